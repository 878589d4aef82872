package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/client"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/hook"
	"github.com/portcullis/portcullis/policy"
)

// hookRefusal returns the refusal of a hook that fails before the event is
// decided: a deny in the host's format, exit status 2.
func hookRefusal(host hook.Host, stdout, stderr io.Writer) func(error) error {
	return func(err error) error {
		msg := err.Error()
		var ee *exitError
		if errors.As(err, &ee) && ee.msg == "" {
			msg = "bad arguments"
		}
		return &exitError{code: hook.Refuse(host, stdout, stderr, msg)}
	}
}

// runHook is `portcullis hook HOST`: one host hook event on stdin, decided,
// answered on stdout. Everything that goes wrong before the event is
// decided — a bad flag, a policy that does not load, a store that does not
// open, a gateway that does not answer — is answered with a deny and exit
// status 2, never with exit status 1 (which Claude Code takes as "go
// ahead").
func runHook(ctx context.Context, host hook.Host, o *hookOptions, pos []string, stdin io.Reader, stdout, stderr io.Writer) error {
	refuse := hookRefusal(host, stdout, stderr)
	sf, nf := &o.state, &o.notify
	if len(pos) > 0 {
		return refuse(usageError("the hook reads its event from stdin; unexpected argument %q", pos[0]))
	}

	logw := stderr
	if o.log != "" {
		f, err := os.OpenFile(o.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			return refuse(fmt.Errorf("--log: %w", err))
		}
		defer f.Close()
		logw = f
	}
	log := cliLogger(logw)
	opts := hook.Options{
		Agent:    firstNonEmpty(o.agent, strings.TrimSpace(os.Getenv("PORTCULLIS_AGENT"))),
		Hold:     o.hold,
		MaxWait:  o.maxWait,
		Timeout:  o.timeout,
		MCPNames: hook.MCPNames(o.mcpNames),
		Logger:   log,
	}
	gw := firstNonEmpty(o.gateway, strings.TrimSpace(os.Getenv("PORTCULLIS_GATEWAY")))
	if gw != "" {
		c, err := hookClient(gw, o.tokenFile)
		if err != nil {
			return refuse(err)
		}
		opts.Decider, opts.Holder = c, gatewayHolder{c}
		// The gateway decides under its own policy; a local one, when
		// named, only maps the host's tools and bounds the hold.
		if path := firstNonEmpty(o.policy, strings.TrimSpace(os.Getenv("PORTCULLIS_POLICY"))); path != "" {
			pol, _, err := policy.Load(path)
			if err != nil {
				return refuse(err)
			}
			opts.Policy = pol
		}
	} else {
		g, pol, cleanup, err := openHookGate(ctx, host, o.policy, sf, nf, log, stderr)
		if err != nil {
			return refuse(err)
		}
		defer cleanup()
		opts.Decider, opts.Holder, opts.Policy = g, hook.WaitThenDecide{Waiter: g, Decider: g}, pol
	}
	if opts.Policy != nil && opts.Policy.Approvals.OutOfBand {
		opts.Hold = true // the policy says people answer out of band
	}
	h, err := hook.New(opts)
	if err != nil {
		return refuse(err)
	}
	if code := h.Run(ctx, host, stdin, stdout, stderr); code != 0 {
		return &exitError{code: code}
	}
	return nil
}

// openHookGate builds the gate of an agent-facing hook: the policy (no
// request overrides), the store in the state directory, the validator, and
// Portcullis's own files protected — its state, its binary, the policy, and
// the host's settings files that hold the hook.
func openHookGate(ctx context.Context, host hook.Host, policyFlag string, sf *stateFlags, nf *notifyFlags, log *slog.Logger, stderr io.Writer) (*gate.Gate, *portcullis.Policy, func(), error) {
	nothing := func() {}
	path := agentPolicyPath(policyFlag, stderr)
	st, err := sf.open(ctx, log)
	if err != nil {
		return nil, nil, nothing, err
	}
	dir, err := sf.dir(true)
	if err != nil {
		st.Close()
		return nil, nil, nothing, err
	}
	opts := []gate.Option{gate.WithStore(st), gate.WithLogger(log), gate.WithProtectedPaths(dir)}
	opts = append(opts, gate.WithProtectedPaths(hostConfigFiles(host)...))
	n, stopNotify, err := nf.notifier(log)
	if err != nil {
		st.Close()
		return nil, nil, nothing, err
	}
	if n != nil {
		opts = append(opts, gate.WithNotifier(n))
	}
	g, pol, err := loadAgentGate(path, stderr, opts...)
	if err != nil {
		stopNotify()
		st.Close()
		return nil, nil, nothing, err
	}
	return g, pol, func() { stopNotify(); st.Close() }, nil
}

// hostConfigFiles are the settings files that hold the host's hooks, for
// the user and for the project the hook runs in.
func hostConfigFiles(host hook.Host) []string {
	home, err := os.UserHomeDir()
	if err != nil {
		home = "" // no home: the project's files only
	}
	var out []string
	for _, project := range []string{os.Getenv("CLAUDE_PROJECT_DIR"), workDir()} {
		if project != "" {
			out = append(out, hook.ConfigFiles(host, home, project)...)
		}
	}
	return out
}

func workDir() string {
	wd, err := os.Getwd()
	if err != nil {
		return ""
	}
	return wd
}

// hookClient is the decision API's client for --gateway. The agent token
// comes from --token-file, $PORTCULLIS_AGENT_TOKEN or the file
// $PORTCULLIS_AGENT_TOKEN_FILE.
func hookClient(gateway, tokenFile string) (*client.Client, error) {
	token, err := agentToken(tokenFile)
	if err != nil {
		return nil, err
	}
	// No overall timeout: the hook bounds every call with its context.
	c, err := client.New(gateway, token)
	if err != nil {
		return nil, usageError("--gateway: %v", err)
	}
	return c, nil
}

func agentToken(tokenFile string) (string, error) {
	if tokenFile == "" {
		if t := strings.TrimSpace(os.Getenv("PORTCULLIS_AGENT_TOKEN")); t != "" {
			return t, nil
		}
		tokenFile = os.Getenv("PORTCULLIS_AGENT_TOKEN_FILE")
	}
	if tokenFile == "" {
		return "", usageError("--gateway needs the agent's token: --token-file FILE, $PORTCULLIS_AGENT_TOKEN or $PORTCULLIS_AGENT_TOKEN_FILE")
	}
	b, err := os.ReadFile(tokenFile)
	if err != nil {
		return "", fmt.Errorf("read the agent token: %w", err)
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", fmt.Errorf("the agent token file %s is empty", tokenFile)
	}
	return t, nil
}

// gatewayHolder holds a call through the gateway's GET
// /v1/decisions/{id}/wait, which decides the call again once a person
// approves it.
type gatewayHolder struct{ c *client.Client }

func (g gatewayHolder) Hold(ctx context.Context, _ portcullis.Call, d portcullis.Decision) (portcullis.Decision, error) {
	for {
		left := time.Minute
		if dl, ok := ctx.Deadline(); ok {
			left = min(time.Until(dl), left)
		}
		if left < time.Second {
			return d, nil // nobody answered in time
		}
		d2, done, err := g.c.Poll(ctx, d.DecisionID, left)
		switch {
		case err != nil && ctx.Err() != nil:
			return d, nil
		case err != nil:
			return d, err
		case done:
			return d2, nil
		}
	}
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
