package gatecmd

import (
	"github.com/portcullis/portcullis/hook"
	"github.com/portcullis/portcullis/hostconfig"
	"github.com/portcullis/portcullis/internal/cmd/cmdutil"
	"github.com/spf13/cobra"
)

// newHookInstallCmd is `portcullis hook install CLIENT`: it merges the
// hook into the client's settings (hostconfig.InstallHook): Claude Code's,
// Gemini CLI's, Cursor's and opencode's for the project (the default) or
// the user, Codex's for the user, with its trust, Copilot CLI's for the
// user (the default) or the project. It refuses a binary that will not last (the
// Go build cache, `go run`'s directories, a temporary directory).
func newHookInstallCmd(env *cmdutil.Env) *cobra.Command {
	var project, user, hold bool
	var dir, policyFlag, state, binary string
	var deferMCP []string
	c := &cobra.Command{
		Use:   "install claude-code|codex|gemini|cursor|copilot|opencode --policy FILE",
		Short: "Add Portcullis's hook to a client's settings (merged, with a backup)",
		Long: `Merge Portcullis's hook into a client's settings: Claude Code's PreToolUse
hook (.claude/settings.json of the project, or ~/.claude/settings.json with
--user), Gemini CLI's BeforeTool hook (.gemini/settings.json, or
~/.gemini/settings.json), or Codex's PreToolUse and PermissionRequest hooks
($CODEX_HOME/hooks.json) with the trust entries Codex needs in config.toml,
Cursor's beforeShellExecution, beforeMCPExecution, beforeReadFile and
preToolUse (file writes) hooks, fail-closed (.cursor/hooks.json, or
~/.cursor/hooks.json), GitHub Copilot CLI's preToolUse hook
($COPILOT_HOME/hooks/portcullis.json, which Copilot runs in every folder,
or with --project .github/hooks/portcullis.json, which it runs only in a
folder you trust), or opencode's plugin (.opencode/plugin/portcullis.js,
or ~/.config/opencode/plugin/portcullis.js with --user), which runs the
hook for every tool call and blocks the call unless the hook allows it.
Other settings keep their place, the previous file is kept as .bak, and
running it again changes nothing. portcullis init does this and writes a
starter policy too.`,
		ValidArgs: []string{"claude-code", "codex", "gemini", "cursor", "copilot", "opencode"},
		Args:      cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			servers, err := deferMCPFlag(deferMCP)
			req := hostconfig.HookInstall{Client: hostconfig.Client(args[0]), Project: project, User: user, Dir: dir, Binary: binary, State: state, Hold: hold, DeferMCP: servers}
			if err == nil {
				err = req.Check()
			}
			if err == nil {
				req.Policy, err = cmdutil.PolicyPath(env, policyFlag)
			}
			var hosts hostconfig.Env
			if err == nil {
				hosts, err = env.Hosts()
			}
			if err != nil {
				return err
			}
			res, err := hosts.InstallHookFor(req)
			if err != nil {
				return err
			}
			hostconfig.WriteHookInstalled(cmd.OutOrStdout(), req.Client, res)
			return nil
		},
	}
	fl := c.Flags()
	fl.BoolVar(&project, "project", false, "install into the project's settings (the default for claude-code, gemini, cursor and opencode)")
	fl.BoolVar(&user, "user", false, "install into the user's settings (~/.claude/settings.json, ~/.gemini/settings.json, ~/.cursor/hooks.json, ~/.config/opencode/plugin; the default for copilot)")
	fl.StringVar(&dir, "dir", "", "the project `directory` (default: the current one)")
	fl.StringVar(&policyFlag, "policy", "", "policy `file` the hook decides under (default $PORTCULLIS_POLICY)")
	fl.StringVar(&state, "state", "", "state `directory` the hook uses (default: the hook's own default)")
	fl.BoolVar(&hold, "hold", false, "hold calls that need a person for an out-of-band approval instead of asking in the agent")
	fl.StringVar(&binary, "binary", "", "the portcullis `binary` the hook runs (default: this one)")
	fl.StringArrayVar(&deferMCP, "defer-mcp", nil, "claude-code: leave calls of this MCP `server`'s tools to the `portcullis mcp` wrapper it runs behind (repeatable)")
	return c
}

// deferMCPFlag reads --defer-mcp: repeatable, each a comma-separated list
// of MCP server names.
func deferMCPFlag(values []string) ([]string, error) {
	servers, err := hook.MCPServerNames(values)
	if err != nil {
		return nil, cmdutil.UsageError("--defer-mcp: %v", err)
	}
	return servers, nil
}
