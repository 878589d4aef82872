package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/portcullis/portcullis/hook"
	"github.com/portcullis/portcullis/hostconfig"
	"github.com/spf13/cobra"
)

// newHookInstallCmd is `portcullis hook install CLIENT`: it merges the
// hook into the client's settings (hostconfig.InstallHook): Claude Code's,
// Gemini CLI's, Cursor's and opencode's for the project (the default) or
// the user, Codex's for the user, with its trust, Copilot CLI's for the
// user (the default) or the project. It refuses a binary that will not last (the
// Go build cache, `go run`'s directories, a temporary directory).
func newHookInstallCmd() *cobra.Command {
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
			var servers []string
			for _, v := range deferMCP {
				for _, s := range strings.Split(v, ",") {
					if err := hook.CheckMCPServerName(s); err != nil {
						return usageError("--defer-mcp: %v", err)
					}
					servers = append(servers, s)
				}
			}
			return hookInstall(cmd.OutOrStdout(), args[0], project, user, hold, dir, policyFlag, state, binary, servers)
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

func hookInstall(stdout io.Writer, name string, project, user, hold bool, dir, policyFlag, state, binary string, deferMCP []string) error {
	client, ok := hostconfig.ClientNamed(name)
	if !ok || !client.HookInstallable() {
		return usageError("hook install supports claude-code, codex, gemini, cursor, copilot and opencode (Claude Desktop runs MCP servers: portcullis init %s)", name)
	}
	if project && user {
		return usageError("--project and --user: choose one")
	}
	if client != hostconfig.ClaudeCode && len(deferMCP) > 0 {
		return usageError("--defer-mcp reads Claude Code's MCP configuration: it is for claude-code")
	}
	if client == hostconfig.Codex && (project || dir != "") {
		return usageError("hook install codex installs for the user (in $CODEX_HOME, default ~/.codex), where Codex records which hooks the user trusts: --project and --dir do not apply")
	}
	path, err := policyPath(policyFlag)
	if err != nil {
		return err
	}
	if path, err = filepath.Abs(path); err != nil {
		return err
	}
	if _, err := os.Stat(path); err != nil {
		return usageError("--policy: %v", err)
	}
	env, err := hostconfig.FromOS()
	if err != nil {
		return err
	}
	exe, err := installBinary(env, binary)
	if err != nil {
		return err
	}
	h := hostconfig.Hook{Client: client, Hold: hold}
	if client == hostconfig.Copilot && !project && dir == "" {
		// Copilot runs a repository's hooks only in a folder the user
		// trusts: the user's hooks run everywhere.
		user = true
	}
	if client != hostconfig.Codex && !user {
		h.Scope = hostconfig.ProjectScope
		if h.Project, err = filepath.Abs(firstNonEmpty(dir, ".")); err != nil {
			return err
		}
	}
	if state != "" {
		if state, err = filepath.Abs(state); err != nil {
			return err
		}
	}
	h.Command = hostconfig.HookCommand(exe, client, path, state, false)
	for _, s := range deferMCP {
		h.Command = append(h.Command, "--defer-mcp", s)
	}
	if hold {
		h.Command = append(h.Command, "--hold")
	}
	res, err := env.InstallHook(h)
	if err != nil {
		return err
	}
	switch {
	case !res.Changed && client == hostconfig.OpenCode:
		fmt.Fprintf(stdout, "%s: the Portcullis plugin is already installed\n", res.Files[0])
	case client == hostconfig.OpenCode:
		fmt.Fprintf(stdout, "%s: plugin installed: every tool call runs, and is blocked unless it allows it:\n  %s\n", res.Files[0], res.Command)
	case !res.Changed && client == hostconfig.Codex:
		fmt.Fprintf(stdout, "%s: the Portcullis hooks are already installed and trusted\n", res.Files[0])
	case !res.Changed:
		fmt.Fprintf(stdout, "%s: the Portcullis hook is already installed\n", res.Files[0])
	case client == hostconfig.Codex:
		fmt.Fprintf(stdout, "%s: PreToolUse and PermissionRequest hooks installed for every tool:\n  %s\n", res.Files[0], res.Command)
		fmt.Fprintf(stdout, "%s: trusted (Codex runs them without a review; a changed hook needs this command again)\n", res.Files[1])
	case client == hostconfig.Cursor:
		fmt.Fprintf(stdout, "%s: beforeShellExecution, beforeMCPExecution, beforeReadFile and preToolUse (%s) hooks installed, fail-closed:\n  %s\n", res.Files[0], hostconfig.CursorWriteMatcher, res.Command)
	default:
		event := map[hostconfig.Client]string{hostconfig.ClaudeCode: "PreToolUse", hostconfig.Gemini: "BeforeTool", hostconfig.Copilot: "preToolUse"}[client]
		fmt.Fprintf(stdout, "%s: %s hook installed for every tool:\n  %s\n", res.Files[0], event, res.Command)
	}
	for _, n := range res.Notes {
		fmt.Fprintf(stdout, "  note: %s\n", n)
	}
	return nil
}

// installBinary is the binary a client is told to run: --binary, else
// this one, refused when it will not last.
func installBinary(env hostconfig.Env, flagValue string) (string, error) {
	exe := flagValue
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return "", fmt.Errorf("find this binary: %w", err)
		}
	}
	exe, err := filepath.Abs(exe)
	if err != nil {
		return "", err
	}
	if resolved, err := filepath.EvalSymlinks(exe); err == nil {
		exe = resolved
	}
	if err := env.CheckBinary(exe); err != nil {
		return "", usageError("%v", err)
	}
	return exe, nil
}
