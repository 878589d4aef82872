package main

import (
	"cmp"
	"context"
	"io"
	"os"
	"strings"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/approvals"
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

// open returns the people's API the flags name: the gateway's, with the
// human token, or the store's.
func (p *peopleFlags) open(ctx context.Context, stderr io.Writer) (approvals.Service, func(), error) {
	if url := cmp.Or(p.gateway, strings.TrimSpace(os.Getenv("PORTCULLIS_GATEWAY"))); url != "" {
		token, err := p.token()
		if err != nil {
			return nil, nil, err
		}
		s, err := approvals.Remote(url, token, cmp.Or(p.as, userName()))
		return s, func() {}, err
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
	return &approvals.Local{Store: st, Gate: g, By: cmp.Or(p.as, actor())}, func() { st.Close() }, nil
}

// token reads the human token: --token-file, else admin.token in the state
// directory (which `portcullis serve` shares when it runs on this machine).
func (p *peopleFlags) token() (string, error) {
	if p.tokenFile != "" {
		return approvals.ReadToken(p.tokenFile)
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
	return cmp.Or(strings.TrimSpace(os.Getenv("USER")), strings.TrimPrefix(actor(), "cli:"))
}

// peopleError ends a people's command as approvals.ExitStatus says.
func peopleError(err error) error {
	if err == nil {
		return nil
	}
	if code, msg, ok := approvals.ExitStatus(err); ok {
		return &exitError{code: code, msg: msg}
	}
	return err
}

// runApprovals lists approval requests, shows one, or watches them come
// and go.
func runApprovals(ctx context.Context, o *approvalsOptions, pos []string, stdout, stderr io.Writer) error {
	if _, err := o.list.Filter(pos); err != nil {
		return usageError("%v", err)
	}
	p, closeFn, err := o.people.open(ctx, stderr)
	if err != nil {
		return err
	}
	defer closeFn()
	return peopleError(approvals.List(ctx, p, o.list, pos, stdout))
}

// runApprove approves a pending request, once or for the session.
func runApprove(ctx context.Context, o *approveOptions, pos []string, stdout, stderr io.Writer) error {
	if len(pos) != 1 {
		return usageError("approve takes one request ID (portcullis approvals lists them)")
	}
	p, closeFn, err := o.people.open(ctx, stderr)
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
	if len(pos) != 1 {
		return usageError("deny takes one request ID (portcullis approvals lists them)")
	}
	if strings.TrimSpace(o.reason) == "" {
		return usageError("deny %s needs --reason TEXT: the agent is shown it", pos[0])
	}
	p, closeFn, err := o.people.open(ctx, stderr)
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
	revoke := len(pos) > 0 && pos[0] == "revoke"
	switch {
	case revoke && len(pos) == 1:
		return usageError("grants revoke takes one or more grant IDs (portcullis grants lists them)")
	case !revoke && len(pos) > 0:
		return usageError("unknown grants command %q (want revoke)", pos[0])
	}
	p, closeFn, err := o.people.open(ctx, stderr)
	if err != nil {
		return err
	}
	defer closeFn()
	if revoke {
		return peopleError(approvals.Revoke(ctx, p, pos[1:], stdout))
	}
	return peopleError(approvals.ListGrants(ctx, p, o.session, o.json, stdout))
}
