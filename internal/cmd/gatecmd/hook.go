package gatecmd

import (
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/client"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/hook"
	"github.com/portcullis/portcullis/internal/cmd/cmdutil"
	"github.com/portcullis/portcullis/policy"
)

// hookRefusal returns the refusal of a hook that fails before the event is
// decided: a deny in the host's format, exit status 2.
func hookRefusal(host hook.Host, stdout, stderr io.Writer) func(error) error {
	return func(err error) error {
		msg := err.Error()
		var ee *cmdutil.ExitError
		if errors.As(err, &ee) && ee.Msg == "" {
			msg = "bad arguments"
		}
		return &cmdutil.ExitError{Code: hook.Refuse(host, stdout, stderr, msg)}
	}
}

// runHook is `portcullis hook HOST`: one host hook event on stdin, decided,
// answered on stdout. Everything that goes wrong before the event is
// decided — a bad flag, a policy that does not load, a store that does not
// open, a gateway that does not answer — is answered with a deny and exit
// status 2, never with exit status 1 (which Claude Code takes as "go
// ahead").
func runHook(ctx context.Context, env *cmdutil.Env, host hook.Host, o *hookOptions, pos []string, stdin io.Reader, stdout, stderr io.Writer) error {
	refuse := hookRefusal(host, stdout, stderr)
	if len(pos) > 0 {
		return refuse(cmdutil.UsageError("the hook reads its event from stdin; unexpected argument %q", pos[0]))
	}
	logw, closeLog, err := cmdutil.LogFile(o.log, stderr)
	if err != nil {
		return refuse(err)
	}
	defer closeLog()
	log := cmdutil.Logger(logw)
	opts := o.Options
	opts.Agent, opts.Logger = cmp.Or(o.Agent, strings.TrimSpace(env.Getenv("PORTCULLIS_AGENT"))), log
	hosts := hookEnv(env, env.Getenv("CLAUDE_PROJECT_DIR"), env.Dir())
	protect := hosts.HostFiles(host)
	deferMCP, err := deferMCPFlag(o.deferMCP)
	if err != nil {
		return refuse(err)
	}
	if len(deferMCP) > 0 {
		if host.Name() != (hook.ClaudeCode{}).Name() {
			return refuse(cmdutil.UsageError("--defer-mcp reads Claude Code's MCP configuration: it is for the claude-code hook"))
		}
		read, files := hosts.ClaudeMCP()
		opts.DeferMCP, opts.MCPServers, protect = deferMCP, read, append(protect, files...)
	}
	if gw := cmp.Or(o.gateway, strings.TrimSpace(env.Getenv("PORTCULLIS_GATEWAY"))); gw != "" {
		c, err := hookClient(env, gw, o.tokenFile)
		if err != nil {
			return refuse(err)
		}
		opts.Decider, opts.Holder = c, c
		// The gateway decides under its own policy; a local one, when
		// named, only maps the host's tools and bounds the hold.
		if path := cmp.Or(o.policy, strings.TrimSpace(env.Getenv("PORTCULLIS_POLICY"))); path != "" {
			if opts.Policy, _, err = policy.Load(path); err != nil {
				return refuse(err)
			}
		}
	} else {
		g, pol, cleanup, err := openAgentGate(ctx, env, o.policy, &o.state, &o.notify, log, stderr, protect...)
		if err != nil {
			return refuse(err)
		}
		defer cleanup()
		opts.Decider, opts.Holder, opts.Policy = g, hook.WaitThenDecide{Waiter: g, Decider: g}, pol
	}
	h, err := hook.New(opts)
	if err != nil {
		return refuse(err)
	}
	if code := h.Run(ctx, host, stdin, stdout, stderr); code != 0 {
		return &cmdutil.ExitError{Code: code}
	}
	return nil
}

// hookEnv is where the hosts keep their files, from the environment, for
// the projects.
func hookEnv(env *cmdutil.Env, projects ...string) hook.Env {
	home, err := env.Home()
	if err != nil {
		home = "" // no home: the projects' files only
	}
	conf, err := env.UserConfigDir()
	if err != nil {
		conf = ""
	}
	return hook.Env{
		Home: home, Projects: projects, UserConfigDir: conf,
		ClaudeConfigDir: strings.TrimSpace(env.Getenv("CLAUDE_CONFIG_DIR")),
		CopilotHome:     env.Getenv("COPILOT_HOME"), GeminiTrustedFolders: env.Getenv("GEMINI_CLI_TRUSTED_FOLDERS_PATH"),
		XDGConfigHome: env.Getenv("XDG_CONFIG_HOME"), OpenCodeConfigDir: env.Getenv("OPENCODE_CONFIG_DIR"),
	}
}

// openAgentGate builds the gate of a command that gates one agent's
// calls (hook, exec): the policy (no request overrides), the store in the
// state directory, the people's channels, the validator, and
// Portcullis's own files protected — its state, its binary, the policy
// and the files in protect. cleanup closes the store and the channels.
func openAgentGate(ctx context.Context, env *cmdutil.Env, policyFlag string, sf *cmdutil.StateFlags, nf *cmdutil.NotifyFlags, log *slog.Logger, stderr io.Writer, protect ...string) (*gate.Gate, *portcullis.Policy, func(), error) {
	path := cmdutil.AgentPolicyPath(env, policyFlag, stderr)
	st, dir, err := sf.OpenState(ctx, env, log)
	if err != nil {
		return nil, nil, nil, err
	}
	// The people who approve a call are told out of band; stderr is the
	// agent's.
	n, stopNotify, err := nf.Notifier(log)
	if err != nil {
		st.Close()
		return nil, nil, nil, err
	}
	cleanup := func() { stopNotify(); st.Close() }
	opts := []gate.Option{gate.WithStore(st), gate.WithLogger(log), gate.WithProtectedPaths(dir), gate.WithProtectedPaths(protect...)}
	if n != nil {
		opts = append(opts, gate.WithNotifier(n))
	}
	g, pol, err := loadAgentGate(env, path, stderr, opts...)
	if err != nil {
		cleanup()
		return nil, nil, nil, err
	}
	return g, pol, cleanup, nil
}

// hookClient is the decision API's client for --gateway. The agent token
// comes from --token-file, $PORTCULLIS_AGENT_TOKEN or the file
// $PORTCULLIS_AGENT_TOKEN_FILE.
func hookClient(env *cmdutil.Env, gateway, tokenFile string) (*client.Client, error) {
	token := ""
	if tokenFile == "" {
		token = strings.TrimSpace(env.Getenv("PORTCULLIS_AGENT_TOKEN"))
		tokenFile = env.Getenv("PORTCULLIS_AGENT_TOKEN_FILE")
	}
	var err error
	switch {
	case token == "" && tokenFile == "":
		return nil, cmdutil.UsageError("--gateway needs the agent's token: --token-file FILE, $PORTCULLIS_AGENT_TOKEN or $PORTCULLIS_AGENT_TOKEN_FILE")
	case token == "":
		if token, err = client.ReadToken(tokenFile); err != nil {
			return nil, err
		}
	}
	// No overall timeout: the hook bounds every call with its context.
	c, err := client.New(gateway, token)
	if err != nil {
		return nil, cmdutil.UsageError("--gateway: %v", err)
	}
	return c, nil
}

// loadAgentGate builds a gate for an agent-facing entry point (the MCP
// gateway): requests cannot override what the gate knows.
func loadAgentGate(env *cmdutil.Env, path string, stderr io.Writer, opts ...gate.Option) (*gate.Gate, *portcullis.Policy, error) {
	g, err := cmdutil.BuildGate(env, path, stderr, opts...)
	if err != nil {
		return nil, nil, err
	}
	return g, g.Policy(), nil
}
