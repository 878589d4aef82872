package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

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
	var mcpConfig []string
	var deferMCP []string
	for _, v := range o.deferMCP {
		for _, s := range strings.Split(v, ",") {
			if err := hook.CheckMCPServerName(s); err != nil {
				return refuse(usageError("--defer-mcp: %v", err))
			}
			deferMCP = append(deferMCP, s)
		}
	}
	if len(deferMCP) > 0 {
		if host.Name() != (hook.ClaudeCode{}).Name() {
			return refuse(usageError("--defer-mcp reads Claude Code's MCP configuration: it is for the claude-code hook"))
		}
		var read func(string) ([]hook.MCPServer, error)
		read, mcpConfig = claudeMCPServers()
		opts.DeferMCP, opts.MCPServers = deferMCP, read
	}
	gw := firstNonEmpty(o.gateway, strings.TrimSpace(os.Getenv("PORTCULLIS_GATEWAY")))
	if gw != "" {
		c, err := hookClient(gw, o.tokenFile)
		if err != nil {
			return refuse(err)
		}
		opts.Decider, opts.Holder = c, c
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
		g, pol, cleanup, err := openHookGate(ctx, host, o.policy, sf, nf, log, stderr, mcpConfig...)
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
// Portcullis's own files protected — its state, its binary, the policy,
// the host's settings files that hold the hook, and the files in protect.
func openHookGate(ctx context.Context, host hook.Host, policyFlag string, sf *stateFlags, nf *notifyFlags, log *slog.Logger, stderr io.Writer, protect ...string) (*gate.Gate, *portcullis.Policy, func(), error) {
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
	opts = append(opts, gate.WithProtectedPaths(hostConfigFiles(host)...), gate.WithProtectedPaths(protect...))
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
	if h := os.Getenv("COPILOT_HOME"); h != "" && host.Name() == (hook.Copilot{}).Name() {
		out = append(out, h) // Copilot CLI's hooks and the folders it trusts
	}
	if p := os.Getenv("GEMINI_CLI_TRUSTED_FOLDERS_PATH"); p != "" && host.Name() == (hook.Gemini{}).Name() {
		out = append(out, p) // the folders Gemini CLI trusts, kept elsewhere
	}
	if host.Name() == (hook.OpenCode{}).Name() {
		// opencode also reads its configuration and plugins from
		// $XDG_CONFIG_HOME/opencode and from $OPENCODE_CONFIG_DIR.
		if x := os.Getenv("XDG_CONFIG_HOME"); filepath.IsAbs(x) {
			out = append(out, filepath.Join(x, "opencode"))
		}
		if d := os.Getenv("OPENCODE_CONFIG_DIR"); filepath.IsAbs(d) {
			out = append(out, d)
		}
	}
	return out
}

// claudeMCPServers reads the definitions of an MCP server from the files
// Claude Code reads them from — .claude.json in $CLAUDE_CONFIG_DIR or the
// home directory, and .mcp.json of the project ($CLAUDE_PROJECT_DIR and
// the working directory, both checked) — and returns those files, which
// an agent must not rewrite while servers are deferred to their wrappers.
func claudeMCPServers() (func(string) ([]hook.MCPServer, error), []string) {
	dir := strings.TrimSpace(os.Getenv("CLAUDE_CONFIG_DIR"))
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = "" // no home: .claude.json is looked for in the working directory, and not found
		}
		dir = home
	}
	claudeJSON := filepath.Join(dir, ".claude.json")
	var projects, files []string
	for _, p := range []string{os.Getenv("CLAUDE_PROJECT_DIR"), workDir()} {
		if p != "" && !slices.Contains(projects, p) {
			projects = append(projects, p)
			files = append(files, hook.ClaudeMCPConfigFiles(claudeJSON, p)...)
		}
	}
	read := func(server string) ([]hook.MCPServer, error) {
		var all []hook.MCPServer
		for _, p := range projects {
			defs, err := hook.ClaudeMCPServers(claudeJSON, p, server)
			if err != nil {
				return nil, err
			}
			all = append(all, defs...)
		}
		return all, nil
	}
	return read, files
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

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
