package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/approvals"
	"github.com/portcullis/portcullis/client"
	"github.com/portcullis/portcullis/gate"

	"github.com/spf13/pflag"
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

func (p *peopleFlags) register(fs *pflag.FlagSet) {
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
func runApprovals(ctx context.Context, o *approvalsOptions, pos []string, stdout, stderr io.Writer) error {
	pf := &o.people
	if len(pos) > 1 {
		return usageError("approvals takes at most one request ID")
	}
	f := portcullis.ApprovalFilter{Session: o.session, Agent: o.agent, Limit: o.limit}
	switch s := portcullis.ApprovalStatus(o.status); s {
	case "all":
	case portcullis.ApprovalPending, portcullis.ApprovalApproved, portcullis.ApprovalDenied, portcullis.ApprovalExpired:
		f.Status = s
	default:
		return usageError("--status: want pending, approved, denied, expired or all, got %q", o.status)
	}
	if o.limit < 1 || o.limit > 1000 {
		return usageError("--limit: want 1 to 1000")
	}
	if o.watch && (o.interval <= 0 || len(pos) > 0) {
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
		if o.json {
			return approvals.WriteJSONLines(stdout, []portcullis.Approval{a})
		}
		return approvals.WriteDetail(stdout, a)
	}
	if o.watch {
		f.Status = portcullis.ApprovalPending
		return watchApprovals(ctx, p, f, o.interval, o.json, stdout)
	}
	list, err := p.Approvals(ctx, f)
	if err != nil {
		return peopleError(err)
	}
	if o.json {
		return approvals.WriteJSONLines(stdout, list)
	}
	if len(list) == 0 {
		what := "approval requests"
		if f.Status != "" {
			what = string(f.Status) + " " + what
		}
		fmt.Fprintf(stdout, "no %s\n", what)
		return nil
	}
	return approvals.WriteTable(stdout, list, time.Now())
}

// watchApprovals prints the pending requests, then each new one as it
// arrives and each answer as it is given, until ctx ends.
func watchApprovals(ctx context.Context, p approvals.Service, f portcullis.ApprovalFilter, every time.Duration, asJSON bool, stdout io.Writer) error {
	err := approvals.Watch(ctx, p, f, every, func(r approvals.Round) error {
		return approvals.WriteRound(stdout, r, time.Now(), asJSON)
	})
	if err != nil {
		return peopleError(err)
	}
	return nil
}

// runApprove approves a pending request, once or for the session.
func runApprove(ctx context.Context, o *approveOptions, pos []string, stdout, stderr io.Writer) error {
	pf := &o.people
	if len(pos) != 1 {
		return usageError("approve takes one request ID (portcullis approvals lists them)")
	}
	p, closeFn, err := pf.open(ctx, stderr)
	if err != nil {
		return err
	}
	defer closeFn()
	a, err := p.Approve(ctx, pos[0], o.session)
	if err != nil {
		return peopleError(err)
	}
	return approvals.WriteAnswer(stdout, a, o.session)
}

// runDeny denies a pending request with a reason the agent will see.
func runDeny(ctx context.Context, o *denyOptions, pos []string, stdout, stderr io.Writer) error {
	pf := &o.people
	if len(pos) != 1 {
		return usageError("deny takes one request ID (portcullis approvals lists them)")
	}
	if strings.TrimSpace(o.reason) == "" {
		return usageError("deny %s needs --reason TEXT: the agent is shown it", pos[0])
	}
	p, closeFn, err := pf.open(ctx, stderr)
	if err != nil {
		return err
	}
	defer closeFn()
	a, err := p.Deny(ctx, pos[0], o.reason)
	if err != nil {
		return peopleError(err)
	}
	return approvals.WriteAnswer(stdout, a, false)
}

// runGrants lists the live grants, or revokes some.
func runGrants(ctx context.Context, o *grantsOptions, pos []string, stdout, stderr io.Writer) error {
	pf := &o.people
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
	list, err := p.Grants(ctx, o.session)
	if err != nil {
		return peopleError(err)
	}
	if o.json {
		return approvals.WriteJSONLines(stdout, list)
	}
	if len(list) == 0 {
		fmt.Fprintln(stdout, "no grants")
		return nil
	}
	return approvals.WriteGrants(stdout, list)
}
