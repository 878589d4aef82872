package main

import (
	"errors"
	"fmt"
	"github.com/portcullis/portcullis/shellgate"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/portcullis/portcullis/hook"
)

// The commands that gate agents (hook, exec, mcp, serve, tools), and bench
// and version.

type hookOptions struct {
	policy    string
	state     stateFlags
	notify    notifyFlags
	gateway   string
	tokenFile string
	agent     string
	hold      bool
	maxWait   time.Duration
	timeout   time.Duration
	mcpNames  string
	log       string
	deferMCP  []string
}

func newHookCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "hook HOST [flags] < event.json",
		Short: "A host's tool hook (" + hook.HostNames() + "): the event on stdin, the answer on stdout",
		Long: `A host's tool hook: the host's event on stdin, decided, the answer on stdout in
the host's format. HOST is ` + hook.HostNames() + `; hook install adds the hook to a
host's settings.`,
		Example: `  portcullis hook install claude-code --policy policy.yaml
  portcullis hook claude-code --policy policy.yaml < event.json`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				cmd.SetOut(cmd.ErrOrStderr())
				_ = cmd.Usage()
				return usageError("hook needs the host: %s", hook.HostNames())
			}
			msg := fmt.Sprintf("unknown hook host %q (want %s, or install)", args[0], hook.HostNames())
			if s := suggestions(cmd, args[0]); len(s) > 0 {
				msg += "; did you mean " + s[0] + "?"
			}
			return usageError("%s", msg)
		},
	}
	for _, h := range hook.Hosts {
		cmd.AddCommand(newHookHostCmd(h))
	}
	cmd.AddCommand(newHookInstallCmd())
	return cmd
}

// newHookHostCmd is `portcullis hook HOST`. Everything that goes wrong
// before the event is decided — a bad flag, a policy that does not load, a
// store that does not open, a gateway that does not answer — is answered
// with a deny and exit status 2, never with exit status 1 (which Claude
// Code takes as "go ahead").
func newHookHostCmd(host hook.Host) *cobra.Command {
	// The hook opens the store for one decision, per tool call: it skips
	// SQLite's whole-file check (seconds on a large audit log).
	o := hookOptions{state: stateFlags{perCall: true}}
	cmd := &cobra.Command{
		Use:   host.Name() + " [flags] < event.json",
		Short: "The hook of " + host.Name(),
		Long: `The hook of ` + host.Name() + `: one event on stdin, the answer on stdout in the host's
format. A failure of any kind answers deny with exit status 2.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runHook(cmd.Context(), host, &o, args, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return hookRefusal(host, cmd.OutOrStdout(), cmd.ErrOrStderr())(fmt.Errorf("bad arguments: %w", err))
	})
	fs := cmd.Flags()
	fs.StringVar(&o.policy, "policy", "", "policy `file` (default $PORTCULLIS_POLICY, else the built-in default policy)")
	o.state.register(fs)
	fs.StringVar(&o.gateway, "gateway", "", "decide through a running gateway's POST /v1/decide at this `URL` (http://127.0.0.1:8470; default $PORTCULLIS_GATEWAY) instead of opening the store")
	fs.StringVar(&o.tokenFile, "token-file", "", "`file` holding the gateway's agent token (default $PORTCULLIS_AGENT_TOKEN, or the file $PORTCULLIS_AGENT_TOKEN_FILE)")
	fs.StringVar(&o.agent, "agent", "", "the agent `identity` (default $PORTCULLIS_AGENT, else the host's name)")
	fs.BoolVar(&o.hold, "hold", false, "hold a call that needs a person until one answers out of band (up to approvals.wait), instead of asking in the host")
	fs.DurationVar(&o.maxWait, "max-wait", hook.DefaultMaxWait, "the longest a call is held, whatever approvals.wait says; keep it under the host's hook timeout")
	fs.DurationVar(&o.timeout, "timeout", hook.DefaultTimeout, "how long one decision may take")
	fs.StringVar(&o.mcpNames, "mcp-names", string(hook.MCPToolName), "decide an MCP tool mcp__server__tool under its `name`: tool or full")
	fs.StringVar(&o.log, "log", "", "append logs to this `file` instead of stderr")
	fs.StringArrayVar(&o.deferMCP, "defer-mcp", nil, "leave calls of this MCP `server`'s tools (mcp__SERVER__*) to the `portcullis mcp` wrapper that every definition of the server in Claude Code's MCP configuration runs it through (repeatable; claude-code only)")
	o.notify.register(fs)
	return cmd
}

type execOptions struct {
	policy  string
	state   stateFlags
	notify  notifyFlags
	script  string
	tool    string
	agent   string
	session string
	noWait  bool
}

func newExecCmd() *cobra.Command {
	o := execOptions{state: stateFlags{perCall: true}} // one decision per process
	cmd := &cobra.Command{
		Use:   "exec [flags] -- COMMAND [ARGS...]",
		Short: "Decide a shell command, wait for a person if one must approve it, run it",
		Long: `Decide a shell command under the policy's shell tool, wait (up to
approvals.wait) for a person when one must approve it, then run it.

The command starts at "--" or at the first argument that is not a flag, and
its own flags are its own; -c 'COMMANDS' runs shell commands with the real
shell. An allowed command runs with this process's stdin, stdout and stderr,
and exec exits with its status. A command that is not allowed never starts:
exit status 126, the reason on stderr.

Started as portcullis-sh (a link to this binary), it is a login-shell wrapper:
exec --shell [-l] -c 'COMMANDS', with everything else from the environment.`,
		Example: `  portcullis exec -- rm -rf build
  portcullis exec --no-wait -c 'make clean && make'`,
		Annotations: map[string]string{
			annotationFlagsFirst: "yes",
			annotationOwnParser:  "--shell",
		},
		// exec parses its own command line: a shell's (--shell) is not a
		// flag set's, and the command's flags are the command's.
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			spec, err := execCommandLine(cmd, &o, args)
			if err != nil || spec == nil {
				return err
			}
			return runExec(cmd.Context(), &o, *spec, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.policy, "policy", "", "policy `file` (default $PORTCULLIS_POLICY, else the built-in default policy)")
	o.state.register(fs)
	o.notify.register(fs)
	fs.StringVarP(&o.script, "command", "c", "", "run these shell `commands` with the real shell (as sh -c does)")
	fs.StringVar(&o.tool, "tool", "", "the policy's shell `tool` to decide under (default: the first tool with shellArg)")
	fs.StringVar(&o.agent, "agent", "", "the agent `identity` (default $PORTCULLIS_AGENT, else shell)")
	fs.StringVar(&o.session, "session", "", "the session `id` grants are scoped to (default $PORTCULLIS_SESSION)")
	fs.BoolVar(&o.noWait, "no-wait", false, "do not wait for a person: a command that needs one exits 126 at once")
	aliasFlag(fs, "c", "command")
	fs.SetInterspersed(false)
	return cmd
}

// execCommandLine reads exec's command line into what it runs; nil, nil
// when it asked for help (which is printed).
func execCommandLine(cmd *cobra.Command, o *execOptions, args []string) (*shellgate.Spec, error) {
	if len(args) > 0 && args[0] == "--shell" {
		// A shell's command line: everything else comes from the
		// environment, as a login shell has no other way to be told.
		s, err := shellgate.ParseShellArgs(args[1:])
		if err != nil {
			fmt.Fprintf(cmd.ErrOrStderr(), "%s: %v\n", shellgate.ShellName, err)
			return nil, &exitError{code: 2}
		}
		return &s, nil
	}
	fs := cmd.Flags()
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil, cmd.Help()
		}
		return nil, flagError(cmd, err)
	}
	if help, _ := fs.GetBool("help"); help {
		return nil, cmd.Help()
	}
	pos := fs.Args()
	c := fs.Changed("command")
	switch {
	case c && len(pos) > 0:
		return nil, usageError("exec: give shell commands with -c, or a program after --, not both")
	case c:
		return &shellgate.Spec{Script: o.script, Shell: true}, nil
	case len(pos) == 0:
		return nil, usageError("exec needs a command: portcullis exec -- COMMAND [ARGS...] or portcullis exec -c 'COMMANDS'")
	}
	return &shellgate.Spec{Argv: pos}, nil
}

type mcpOptions struct {
	policy           string
	name             string
	agent            string
	showDenied       bool
	autonomous       bool
	userPresent      bool
	trustAnnotations bool
	log              string
	obs              obsFlags
	state            stateFlags
	notify           notifyFlags
	witness          witnessFlags
}

func newMCPCmd() *cobra.Command {
	var o mcpOptions
	cmd := &cobra.Command{
		Use:   "mcp [flags] -- SERVER [ARGS...]",
		Short: "Wrap a stdio MCP server: every tools/call goes through the gate",
		Long: `Wrap a stdio MCP server: the client talks to portcullis mcp as to the server,
and every tools/call goes through the gate. Everything after "--" is the
server's command line, flags and all.`,
		Example: `  portcullis mcp --policy policy.yaml -- npx -y @modelcontextprotocol/server-filesystem ~/work`,
		Args:    cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runMCP(cmd.Context(), &o, args, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.policy, "policy", "", "policy `file` (default $PORTCULLIS_POLICY, else the built-in default policy)")
	fs.StringVar(&o.name, "name", "", "the upstream's `name` in pins and the audit (default: from the server command)")
	fs.StringVar(&o.agent, "agent", "", "the agent `identity` of this client (default $PORTCULLIS_AGENT, else the upstream's name)")
	fs.BoolVar(&o.showDenied, "show-denied", false, "list tools the policy denies too (calling them is still denied)")
	fs.BoolVar(&o.autonomous, "autonomous", false, "treat the session as an autonomous run: the autonomy stage counts its steps")
	fs.BoolVar(&o.userPresent, "user-present", false, "tell the contextual validator a person is at the keyboard")
	fs.BoolVar(&o.trustAnnotations, "trust-annotations", false, "let the server's MCP tool annotations classify the tools the policy does not name (readOnlyHint → READ, auto-approved); by default they only make a tool stricter")
	fs.StringVar(&o.log, "log", "", "append logs to this `file` instead of stderr")
	o.obs.register(fs, true)
	o.state.register(fs)
	o.notify.register(fs)
	o.witness.register(fs)
	return cmd
}

type serveOptions struct {
	config      string
	configGiven bool
	listen      string
	obs         obsFlags
}

func newServeCmd() *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve [--config FILE] [--listen HOST:PORT]",
		Short: "The HTTP gateway: MCP upstreams on /mcp, tokens for agents",
		Long: `The HTTP gateway: the configured MCP upstreams behind /mcp, the decision API,
the approvals API and the console, for agents and people with tokens.
See portcullis.example.yaml for the configuration.`,
		Example: `  portcullis serve --config portcullis.yaml`,
		Args:    cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.configGiven = cmd.Flags().Changed("config")
			return runServe(cmd.Context(), &o, args, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.config, "config", "portcullis.yaml", "gateway configuration `file`")
	fs.StringVar(&o.listen, "listen", "", "listen `address` HOST:PORT (overrides the configuration)")
	o.obs.register(fs, false)
	return cmd
}

type toolsOptions struct {
	state   stateFlags
	changed bool
	as      string
}

func newToolsCmd() *cobra.Command {
	var o toolsOptions
	run := func(cmd *cobra.Command, pos []string) error {
		return runTools(cmd.Context(), &o, pos, cmd.OutOrStdout(), cmd.ErrOrStderr())
	}
	cmd := &cobra.Command{
		Use:   "tools [--changed]",
		Short: "Pinned MCP tool definitions; accept a changed one (shows the diff)",
		Long: `The MCP tool definitions pinned when first seen. A tool whose definition
changes, or a new tool, is held until a person accepts it (tools accept).`,
		Args: cobra.ArbitraryArgs,
		RunE: run,
	}
	fs := cmd.Flags()
	o.state.register(fs)
	fs.BoolVar(&o.changed, "changed", false, "list only tools whose definition changed and waits for a person")
	accept := &cobra.Command{
		Use:     "accept UPSTREAM TOOL [--as NAME]",
		Short:   "Accept a changed tool definition, after showing what changed",
		Example: `  portcullis tools accept github create_issue`,
		Args:    cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return run(cmd, append([]string{"accept"}, args...))
		},
	}
	accept.Flags().StringVar(&o.as, "as", "", "who accepts (default $USER), recorded in the audit log")
	o.state.register(accept.Flags())
	cmd.AddCommand(accept)
	return cmd
}

type benchOptions struct {
	state          stateFlags
	gateway        string
	tokenFile      string
	humanTokenFile string
	via            string
	sessions       int
	duration       time.Duration
	count          int64
	rate           float64
	mix            string
	read, write    string
	deny, shell    string
	shellArg       string
	timeout        time.Duration
	progress       time.Duration
	gatewayPID     int
	audit          bool
	json           bool
	seed           uint64
}

func newBenchCmd() *cobra.Command {
	var o benchOptions
	cmd := &cobra.Command{
		Use:   "bench --token-file AGENT.token [flags]",
		Short: "Load a running gateway with agent sessions; throughput, latency, audit completeness",
		Long: `Load a running gateway with agent sessions and report throughput, latency and
the audit log's completeness. An agent token is required: --token-file, or the
token itself in $PORTCULLIS_AGENT_TOKEN.`,
		Example: `  portcullis bench --gateway http://127.0.0.1:8470 --token-file agent.token --sessions 32 --duration 1m`,
		Args:    cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runBench(cmd.Context(), &o, args, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	o.state.register(fs)
	fs.StringVar(&o.gateway, "gateway", "", "the gateway's `URL` (default $PORTCULLIS_GATEWAY, else http://127.0.0.1:8470)")
	fs.StringVar(&o.tokenFile, "token-file", "", "`file` holding an agent's token (required unless $PORTCULLIS_AGENT_TOKEN holds the token itself)")
	fs.StringVar(&o.humanTokenFile, "human-token-file", "", "`file` holding the human token that approves writes (default admin.token in the state directory)")
	fs.StringVar(&o.via, "via", "both", "entry points: api (POST /v1/decide), mcp (/mcp) or both")
	fs.IntVar(&o.sessions, "sessions", 16, "concurrent agent `sessions`")
	fs.DurationVar(&o.duration, "duration", 30*time.Second, "how long to run (0: until --count)")
	fs.Int64Var(&o.count, "count", 0, "stop after this many calls (0: until --duration)")
	fs.Float64Var(&o.rate, "rate", 0, "overall calls per second (0: as fast as the gateway answers)")
	fs.StringVar(&o.mix, "mix", "read=60,write=15,deny=15,shell=10", "weights of the kinds of call: read, write, deny, shell")
	fs.StringVar(&o.read, "read", "read_note", "a tool the policy allows")
	fs.StringVar(&o.write, "write", "write_note", "a tool that needs a person once per session")
	fs.StringVar(&o.deny, "deny", "delete_note", "a tool the policy denies")
	fs.StringVar(&o.shell, "shell", "", "the shell tool (empty: no shell commands)")
	fs.StringVar(&o.shellArg, "shell-arg", "command", "the shell tool's command argument")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "bound on one call, a held write's approval included")
	fs.DurationVar(&o.progress, "progress", time.Second, "how often to print progress on stderr (0: never)")
	fs.IntVar(&o.gatewayPID, "gateway-pid", 0, "the gateway's process `id`, to sample its resident memory (Linux)")
	fs.BoolVar(&o.audit, "audit", true, "check the audit log afterwards (opens the store of --state/--store)")
	fs.BoolVar(&o.json, "json", false, "print the report as JSON")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the mix")
	return cmd
}

type versionOptions struct {
	json bool
}

func newVersionCmd() *cobra.Command {
	var o versionOptions
	cmd := &cobra.Command{
		Use:   "version [--json]",
		Short: "The version, commit and build date",
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runVersion(&o, args, cmd.OutOrStdout())
		},
	}
	cmd.Flags().BoolVar(&o.json, "json", false, "print the build information as one JSON object")
	return cmd
}
