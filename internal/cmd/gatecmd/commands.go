// Package gatecmd holds the commands that gate one agent's calls: hook
// (and hook install), exec and mcp. Their work is in packages hook,
// hostconfig, shellgate and server.
//
// Like every command package, it reads the process's environment only
// through the cmdutil.Env it is given, does no work that belongs to a
// domain package, and imports no command package but cmdutil.
package gatecmd

import (
	"errors"
	"fmt"

	"github.com/portcullis/portcullis/hook"
	"github.com/portcullis/portcullis/internal/cmd/cmdutil"
	"github.com/portcullis/portcullis/server"
	"github.com/portcullis/portcullis/shellgate"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

type hookOptions struct {
	hook.Options                    // Agent, Hold, MaxWait, Timeout and MCPNames are flags
	policy, gateway, tokenFile, log string
	state                           cmdutil.StateFlags
	notify                          cmdutil.NotifyFlags
	deferMCP                        []string
}

// NewHookCmd is `portcullis hook` and its subcommands.
func NewHookCmd(env *cmdutil.Env) *cobra.Command {
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
				return cmdutil.UsageError("hook needs the host: %s", hook.HostNames())
			}
			msg := fmt.Sprintf("unknown hook host %q (want %s, or install)", args[0], hook.HostNames())
			if s := cmdutil.Suggestions(cmd, args[0]); len(s) > 0 {
				msg += "; did you mean " + s[0] + "?"
			}
			return cmdutil.UsageError("%s", msg)
		},
	}
	for _, h := range hook.Hosts {
		cmd.AddCommand(newHookHostCmd(env, h))
	}
	cmd.AddCommand(newHookInstallCmd(env))
	return cmd
}

// newHookHostCmd is `portcullis hook HOST`. Everything that goes wrong
// before the event is decided — a bad flag, a policy that does not load, a
// store that does not open, a gateway that does not answer — is answered
// with a deny and exit status 2, never with exit status 1 (which Claude
// Code takes as "go ahead").
func newHookHostCmd(env *cmdutil.Env, host hook.Host) *cobra.Command {
	// The hook opens the store for one decision, per tool call: it skips
	// SQLite's whole-file check (seconds on a large audit log).
	o := hookOptions{state: cmdutil.StateFlags{PerCall: true}}
	cmd := &cobra.Command{
		Use:   host.Name() + " [flags] < event.json",
		Short: "The hook of " + host.Name(),
		Long: `The hook of ` + host.Name() + `: one event on stdin, the answer on stdout in the host's
format. A failure of any kind answers deny with exit status 2.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runHook(cmd.Context(), env, host, &o, args, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return hookRefusal(host, cmd.OutOrStdout(), cmd.ErrOrStderr())(fmt.Errorf("bad arguments: %w", err))
	})
	fs := cmd.Flags()
	fs.StringVar(&o.policy, "policy", "", "policy `file` (default $PORTCULLIS_POLICY, else the built-in default policy)")
	o.state.Register(fs)
	fs.StringVar(&o.gateway, "gateway", "", "decide through a running gateway's POST /v1/decide at this `URL` (http://127.0.0.1:8470; default $PORTCULLIS_GATEWAY) instead of opening the store")
	fs.StringVar(&o.tokenFile, "token-file", "", "`file` holding the gateway's agent token (default $PORTCULLIS_AGENT_TOKEN, or the file $PORTCULLIS_AGENT_TOKEN_FILE)")
	fs.StringVar(&o.Agent, "agent", "", "the agent `identity` (default $PORTCULLIS_AGENT, else the host's name)")
	fs.BoolVar(&o.Hold, "hold", false, "hold a call that needs a person until one answers out of band (up to approvals.wait), instead of asking in the host")
	fs.DurationVar(&o.MaxWait, "max-wait", hook.DefaultMaxWait, "the longest a call is held, whatever approvals.wait says; keep it under the host's hook timeout")
	fs.DurationVar(&o.Timeout, "timeout", hook.DefaultTimeout, "how long one decision may take")
	fs.StringVar((*string)(&o.MCPNames), "mcp-names", string(hook.MCPToolName), "decide an MCP tool mcp__server__tool under its `name`: tool or full")
	fs.StringVar(&o.log, "log", "", "append logs to this `file` instead of stderr")
	fs.StringArrayVar(&o.deferMCP, "defer-mcp", nil, "leave calls of this MCP `server`'s tools (mcp__SERVER__*) to the `portcullis mcp` wrapper that every definition of the server in Claude Code's MCP configuration runs it through (repeatable; claude-code only)")
	o.notify.Register(fs)
	return cmd
}

type execOptions struct {
	shellgate.Request    // Agent and Session are flags
	policy, script, tool string
	state                cmdutil.StateFlags
	notify               cmdutil.NotifyFlags
	noWait               bool
}

// NewExecCmd is `portcullis exec`.
func NewExecCmd(env *cmdutil.Env) *cobra.Command {
	o := execOptions{state: cmdutil.StateFlags{PerCall: true}} // one decision per process
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
			cmdutil.FlagsFirst: "yes",
			cmdutil.OwnParser:  "--shell",
		},
		// exec parses its own command line: a shell's (--shell) is not a
		// flag set's, and the command's flags are the command's.
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			spec, err := execCommandLine(cmd, &o, args)
			if err != nil || spec == nil {
				return err
			}
			return runExec(cmd.Context(), env, &o, *spec, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.policy, "policy", "", "policy `file` (default $PORTCULLIS_POLICY, else the built-in default policy)")
	o.state.Register(fs)
	o.notify.Register(fs)
	fs.StringVarP(&o.script, "command", "c", "", "run these shell `commands` with the real shell (as sh -c does)")
	fs.StringVar(&o.tool, "tool", "", "the policy's shell `tool` to decide under (default: the first tool with shellArg)")
	fs.StringVar(&o.Agent, "agent", "", "the agent `identity` (default $PORTCULLIS_AGENT, else shell)")
	fs.StringVar(&o.Session, "session", "", "the session `id` grants are scoped to (default $PORTCULLIS_SESSION)")
	fs.BoolVar(&o.noWait, "no-wait", false, "do not wait for a person: a command that needs one exits 126 at once")
	cmdutil.AliasFlag(fs, "c", "command")
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
			return nil, &cmdutil.ExitError{Code: 2}
		}
		return &s, nil
	}
	fs := cmd.Flags()
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil, cmd.Help()
		}
		return nil, cmdutil.FlagError(cmd, err)
	}
	if help, _ := fs.GetBool("help"); help {
		return nil, cmd.Help()
	}
	pos := fs.Args()
	c := fs.Changed("command")
	switch {
	case c && len(pos) > 0:
		return nil, cmdutil.UsageError("exec: give shell commands with -c, or a program after --, not both")
	case c:
		return &shellgate.Spec{Script: o.script, Shell: true}, nil
	case len(pos) == 0:
		return nil, cmdutil.UsageError("exec needs a command: portcullis exec -- COMMAND [ARGS...] or portcullis exec -c 'COMMANDS'")
	}
	return &shellgate.Spec{Argv: pos}, nil
}

type mcpOptions struct {
	// Name, Agent, ShowDenied, Autonomous, UserPresent and
	// TrustAnnotations are flags.
	server.WrapperOptions
	policy, log string
	obs         cmdutil.ObsFlags
	state       cmdutil.StateFlags
	notify      cmdutil.NotifyFlags
	witness     cmdutil.WitnessFlags
}

// NewMCPCmd is `portcullis mcp`.
func NewMCPCmd(env *cmdutil.Env) *cobra.Command {
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
			return runMCP(cmd.Context(), env, &o, args, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.policy, "policy", "", "policy `file` (default $PORTCULLIS_POLICY, else the built-in default policy)")
	fs.StringVar(&o.Name, "name", "", "the upstream's `name` in pins and the audit (default: from the server command)")
	fs.StringVar(&o.Agent, "agent", "", "the agent `identity` of this client (default $PORTCULLIS_AGENT, else the upstream's name)")
	fs.BoolVar(&o.ShowDenied, "show-denied", false, "list tools the policy denies too (calling them is still denied)")
	fs.BoolVar(&o.Autonomous, "autonomous", false, "treat the session as an autonomous run: the autonomy stage counts its steps")
	fs.BoolVar(&o.UserPresent, "user-present", false, "tell the contextual validator a person is at the keyboard")
	fs.BoolVar(&o.TrustAnnotations, "trust-annotations", false, "let the server's MCP tool annotations classify the tools the policy does not name (readOnlyHint → READ, auto-approved); by default they only make a tool stricter")
	fs.StringVar(&o.log, "log", "", "append logs to this `file` instead of stderr")
	o.obs.Register(fs, true)
	o.state.Register(fs)
	o.notify.Register(fs)
	o.witness.Register(fs)
	return cmd
}
