package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/approvals"
	"github.com/portcullis/portcullis/client"
	"github.com/portcullis/portcullis/gate"
)

// This file holds the people's commands for approval requests and grants:
// approvals [--watch], approve, deny, grants [revoke]. They talk to a
// running gateway's approvals API (--gateway URL or $PORTCULLIS_GATEWAY,
// with the human token) or, when no gateway is named, to the store itself
// through a gate, which audits each action with who did it: either is an
// approvals.Service.

// peopleFlags are the flags of the people's commands.
type peopleFlags struct {
	state     stateFlags
	gateway   string
	tokenFile string
	as        string
}

func (p *peopleFlags) register(fs *flag.FlagSet) {
	p.state.register(fs)
	fs.StringVar(&p.gateway, "gateway", "", "a running gateway's `URL` (default $PORTCULLIS_GATEWAY); without one, the store is used directly")
	fs.StringVar(&p.tokenFile, "token-file", "", "`file` holding the gateway's human token (default admin.token in the state directory)")
	fs.StringVar(&p.as, "as", "", "who is acting, for the audit log (default the user running the command)")
}

// open returns the people's API the flags name, and says which it is.
func (p *peopleFlags) open(ctx context.Context, stderr io.Writer) (approvals.Service, func(), error) {
	url := p.gateway
	if url == "" {
		url = strings.TrimSpace(os.Getenv("PORTCULLIS_GATEWAY"))
	}
	if url != "" {
		token, err := p.token()
		if err != nil {
			return nil, nil, err
		}
		name := p.as
		if name == "" {
			name = userName()
		}
		c, err := client.New(url, token, client.WithActor(name))
		if err != nil {
			return nil, nil, usageError("--gateway: %v", err)
		}
		return c, func() {}, nil
	}
	log := cliLogger(stderr)
	st, err := p.state.open(ctx, log)
	if err != nil {
		return nil, nil, err
	}
	g, err := gate.New(&portcullis.Policy{Version: 1}, gate.WithStore(st), gate.WithLogger(log))
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	by := p.as
	if by == "" {
		by = actor()
	}
	return &approvals.Local{Store: st, Gate: g, By: by}, func() { st.Close() }, nil
}

// token reads the human token: --token-file, else admin.token in the state
// directory (which `portcullis serve` shares when it runs on this machine).
func (p *peopleFlags) token() (string, error) {
	if p.tokenFile != "" {
		b, err := os.ReadFile(p.tokenFile)
		if err != nil {
			return "", fmt.Errorf("--token-file: %w", err)
		}
		if t := strings.TrimSpace(string(b)); t != "" {
			return t, nil
		}
		return "", fmt.Errorf("--token-file: %s is empty", p.tokenFile)
	}
	dir, err := p.state.dir(false)
	if err != nil {
		return "", err
	}
	t, err := readSecret(dir, "admin.token")
	if err != nil {
		return "", usageError("no human token for the gateway: %v (pass --token-file FILE, the gateway's admin.token)", err)
	}
	return t, nil
}

// userName is the person running the command: $USER, else the account.
func userName() string {
	if u := strings.TrimSpace(os.Getenv("USER")); u != "" {
		return u
	}
	return strings.TrimPrefix(actor(), "cli:")
}

// peopleError turns what a person can fix or must know (a request already
// answered, a wrong token) into exit status 1 and an unknown ID into exit
// status 2 like every bad input, with the message alone; a gateway that
// does not answer is named with the command that runs it.
func peopleError(err error) error {
	msg := err.Error()
	var pe *portcullis.Error
	if errors.As(err, &pe) {
		msg = pe.Message
	}
	switch portcullis.ErrorCode(err) {
	case portcullis.CodeConflict, portcullis.CodeVerificationFailed, portcullis.CodeRateLimited,
		"UNAUTHORIZED", "FORBIDDEN":
		return &exitError{code: 1, msg: msg}
	case portcullis.CodeNotFound:
		return &exitError{code: 2, msg: msg + " (portcullis approvals lists the requests, portcullis grants the grants)"}
	case portcullis.CodeInvalidRequest:
		return &exitError{code: 2, msg: msg}
	}
	var ue *client.UnreachableError
	if errors.As(err, &ue) {
		return &exitError{code: 2, msg: fmt.Sprintf("no gateway answers at %s (%v): is `portcullis serve` running at %s? (--gateway or $PORTCULLIS_GATEWAY names it)", ue.Gateway, ue.Err, ue.Gateway)}
	}
	return err
}

// runApprovals lists approval requests, shows one, or watches them come
// and go.
func runApprovals(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("approvals", stderr, "approvals [ID] [--status pending|approved|denied|expired|all] [--session S] [--agent A] [--json] [--watch]")
	var pf peopleFlags
	pf.register(fs)
	status := fs.String("status", "pending", "which requests: pending, approved, denied, expired or all")
	session := fs.String("session", "", "only this session's requests")
	agent := fs.String("agent", "", "only this agent's requests")
	limit := fs.Int("limit", 100, "at most this many requests, newest first")
	asJSON := fs.Bool("json", false, "one JSON object per request and line")
	watch := fs.Bool("watch", false, "keep watching: print requests as they arrive and as they are answered, until interrupted")
	interval := fs.Duration("interval", time.Second, "with --watch, how often to look")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return usageError("approvals takes at most one request ID")
	}
	f := portcullis.ApprovalFilter{Session: *session, Agent: *agent, Limit: *limit}
	switch s := portcullis.ApprovalStatus(*status); s {
	case "all":
	case portcullis.ApprovalPending, portcullis.ApprovalApproved, portcullis.ApprovalDenied, portcullis.ApprovalExpired:
		f.Status = s
	default:
		return usageError("--status: want pending, approved, denied, expired or all, got %q", *status)
	}
	if *limit < 1 || *limit > 1000 {
		return usageError("--limit: want 1 to 1000")
	}
	if *watch && (*interval <= 0 || len(pos) > 0) {
		return usageError("--watch takes no ID and a positive --interval")
	}
	p, closeFn, err := pf.open(ctx, stderr)
	if err != nil {
		return err
	}
	defer closeFn()
	if len(pos) == 1 {
		a, err := p.Approval(ctx, pos[0])
		if err != nil {
			return peopleError(err)
		}
		if *asJSON {
			return writeJSONLine(stdout, a)
		}
		return showApproval(stdout, a)
	}
	if *watch {
		f.Status = portcullis.ApprovalPending
		return watchApprovals(ctx, p, f, *interval, *asJSON, stdout)
	}
	list, err := p.Approvals(ctx, f)
	if err != nil {
		return peopleError(err)
	}
	if *asJSON {
		for _, a := range list {
			if err := writeJSONLine(stdout, a); err != nil {
				return err
			}
		}
		return nil
	}
	if len(list) == 0 {
		what := "approval requests"
		if f.Status != "" {
			what = string(f.Status) + " " + what
		}
		fmt.Fprintf(stdout, "no %s\n", what)
		return nil
	}
	return approvalTable(stdout, list)
}

func writeJSONLine(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func approvalTable(w io.Writer, list []portcullis.Approval) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tAGE\tAGENT\tSESSION\tLEVEL\tREQUEST")
	now := time.Now()
	for _, a := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.ID, a.Status, age(now.Sub(a.CreatedAt)), dash(a.Call.Agent), dash(a.Call.Session), a.Level, oneLine(a.Reason, 70))
	}
	return tw.Flush()
}

// showApproval prints one request in full: what a person needs to answer.
func showApproval(w io.Writer, a portcullis.Approval) error {
	args, err := json.MarshalIndent(a.Call.Args, "  ", "  ")
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "approval %s: %s\n", a.ID, a.Status)
	fmt.Fprintf(w, "  request:  %s\n", a.Reason)
	fmt.Fprintf(w, "  tool:     %s (%s)\n", a.Tool, a.Level)
	fmt.Fprintf(w, "  agent:    %s\n  session:  %s\n", dash(a.Call.Agent), dash(a.Call.Session))
	fmt.Fprintf(w, "  decision: %s\n", a.DecisionID)
	fmt.Fprintf(w, "  asked:    %s\n", a.CreatedAt.Local().Format(time.RFC3339))
	if !a.ExpiresAt.IsZero() && a.Status == portcullis.ApprovalPending {
		fmt.Fprintf(w, "  expires:  %s\n", a.ExpiresAt.Local().Format(time.RFC3339))
	}
	if a.DecidedBy != "" {
		fmt.Fprintf(w, "  answered: %s by %s\n", a.DecidedAt.Local().Format(time.RFC3339), a.DecidedBy)
	}
	if a.DenyReason != "" {
		fmt.Fprintf(w, "  reason:   %s\n", a.DenyReason)
	}
	fmt.Fprintf(w, "  args:     %s\n", args)
	if a.Status == portcullis.ApprovalPending {
		session := ""
		if a.Level == portcullis.ConfirmSession {
			session = " [--session]"
		}
		fmt.Fprintf(w, "answer: portcullis approve %s%s | portcullis deny %s --reason TEXT\n", a.ID, session, a.ID)
	}
	return nil
}

// watchApprovals prints the pending requests, then each new one as it
// arrives and each answer as it is given, until ctx ends.
func watchApprovals(ctx context.Context, p approvals.Service, f portcullis.ApprovalFilter, every time.Duration, asJSON bool, stdout io.Writer) error {
	err := approvals.Watch(ctx, p, f, every, func(r approvals.Round) error {
		for _, a := range r.Arrived {
			if asJSON {
				if err := writeJSONLine(stdout, a); err != nil {
					return err
				}
				continue
			}
			fmt.Fprintf(stdout, "%s  %s  %s  agent %s, session %s, %s\n", time.Now().Format(time.TimeOnly), a.ID, oneLine(a.Reason, 70), dash(a.Call.Agent), dash(a.Call.Session), a.Level)
		}
		if r.First && len(r.Arrived) == 0 && !asJSON {
			fmt.Fprintln(stdout, "no pending approval requests; watching (Ctrl-C to stop)")
		}
		for _, a := range r.Answered {
			if asJSON {
				if err := writeJSONLine(stdout, a); err != nil {
					return err
				}
				continue
			}
			by := ""
			if a.DecidedBy != "" {
				by = " by " + a.DecidedBy
			}
			fmt.Fprintf(stdout, "%s  %s  %s%s\n", time.Now().Format(time.TimeOnly), a.ID, a.Status, by)
		}
		return nil
	})
	if err != nil {
		return peopleError(err)
	}
	return nil
}

func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(int(d.Seconds()), 0))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// runApprove approves a pending request, once or for the session.
func runApprove(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("approve", stderr, "approve ID [--session]")
	var pf peopleFlags
	pf.register(fs)
	session := fs.Bool("session", false, "approve the tool for the rest of the call's session (CONFIRM_SESSION calls only)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError("approve takes one request ID (portcullis approvals lists them)")
	}
	p, closeFn, err := pf.open(ctx, stderr)
	if err != nil {
		return err
	}
	defer closeFn()
	a, err := p.Approve(ctx, pos[0], *session)
	if err != nil {
		return peopleError(err)
	}
	how := "once"
	if *session {
		how = "for session " + dash(a.Call.Session)
	}
	fmt.Fprintf(stdout, "approved %s %s: %s (agent %s)\n", a.ID, how, oneLine(a.Reason, 80), dash(a.Call.Agent))
	return nil
}

// runDeny denies a pending request with a reason the agent will see.
func runDeny(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("deny", stderr, "deny ID --reason TEXT")
	var pf peopleFlags
	pf.register(fs)
	reason := fs.String("reason", "", "why, in words the agent will be shown (required)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError("deny takes one request ID (portcullis approvals lists them)")
	}
	if strings.TrimSpace(*reason) == "" {
		return usageError("deny %s needs --reason TEXT: the agent is shown it", pos[0])
	}
	p, closeFn, err := pf.open(ctx, stderr)
	if err != nil {
		return err
	}
	defer closeFn()
	a, err := p.Deny(ctx, pos[0], *reason)
	if err != nil {
		return peopleError(err)
	}
	fmt.Fprintf(stdout, "denied %s: %s (agent %s)\n", a.ID, oneLine(a.Reason, 80), dash(a.Call.Agent))
	return nil
}

// runGrants lists the live grants, or revokes some.
func runGrants(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("grants", stderr, "grants [--session S] [--json] | grants revoke ID...")
	var pf peopleFlags
	pf.register(fs)
	session := fs.String("session", "", "only this session's grants")
	asJSON := fs.Bool("json", false, "one JSON object per grant and line")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	revoke := len(pos) > 0 && pos[0] == "revoke"
	switch {
	case revoke && len(pos) == 1:
		return usageError("grants revoke takes one or more grant IDs (portcullis grants lists them)")
	case !revoke && len(pos) > 0:
		return usageError("unknown grants command %q (want revoke)", pos[0])
	}
	p, closeFn, err := pf.open(ctx, stderr)
	if err != nil {
		return err
	}
	defer closeFn()
	if revoke {
		var failed []error
		for _, id := range pos[1:] {
			if err := p.RevokeGrant(ctx, id); err != nil {
				failed = append(failed, peopleError(err))
				continue
			}
			fmt.Fprintf(stdout, "revoked %s\n", id)
		}
		if len(failed) == 1 {
			return failed[0]
		}
		if len(failed) > 1 {
			// The status of the worst: 2 when an ID is unknown.
			code := 1
			for _, err := range failed {
				if ee, ok := err.(*exitError); ok {
					code = max(code, ee.code)
				}
			}
			return &exitError{code: code, msg: errors.Join(failed...).Error()}
		}
		return nil
	}
	list, err := p.Grants(ctx, *session)
	if err != nil {
		return peopleError(err)
	}
	if *asJSON {
		for _, g := range list {
			if err := writeJSONLine(stdout, g); err != nil {
				return err
			}
		}
		return nil
	}
	if len(list) == 0 {
		fmt.Fprintln(stdout, "no grants")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tTOOL\tSESSION\tBY\tEXPIRES")
	for _, g := range list {
		expires := "never"
		if !g.ExpiresAt.IsZero() {
			expires = g.ExpiresAt.Local().Format(time.RFC3339)
		}
		tool := g.Tool
		if g.ElementType != "" {
			tool += " (" + g.ElementType + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", g.ID, g.Kind, tool, dash(g.Session), dash(g.GrantedBy), expires)
	}
	return tw.Flush()
}
