package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/portcullis/portcullis/hostconfig"
	"github.com/portcullis/portcullis/policy"
	"github.com/spf13/cobra"
)

// initFlags are the flags every `portcullis init` subcommand takes.
type initFlags struct {
	project bool   // the project's files instead of the user's
	dir     string // the project directory
	force   bool   // replace a policy file a person edited
	binary  string // the portcullis binary the client runs
	policy  string // an existing policy file instead of a starter
	state   string // the hook's --state
	hold    bool   // the hook's --hold
}

func (f *initFlags) register(cmd *cobra.Command, hooked bool) {
	fl := cmd.Flags()
	fl.BoolVar(&f.project, "project", false, "write the policy and the client's configuration in the project (see --dir) instead of for the user")
	fl.StringVar(&f.dir, "dir", "", "the project `directory` for --project (default: the current one)")
	fl.BoolVar(&f.force, "force", false, "replace a policy file that was edited since init wrote it (the old one is kept as .bak)")
	fl.StringVar(&f.binary, "binary", "", "the portcullis `binary` the client runs (default: this one; never one in the Go build cache or a temporary directory)")
	if hooked || cmd.Name() != "mcp" {
		fl.StringVar(&f.policy, "policy", "", "use this policy `file` instead of writing a starter policy")
	}
	if hooked {
		fl.StringVar(&f.state, "state", "", "the state `directory` the hook uses (default: the hook's own default)")
		fl.BoolVar(&f.hold, "hold", false, "the hook holds calls that need a person for an out-of-band approval instead of asking in the agent")
	}
}

// newInitCmd is `portcullis init`: one subcommand per client, and mcp.
func newInitCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "init CLIENT",
		Short: "Protect an agent client: a starter policy, the hook or MCP wrapper in its configuration, then doctor",
		Long: `Protect an agent client in one step: write a commented starter policy (the
built-in default policy; under the user's configuration directory, or with
--project in the repository), install Portcullis's hook (Claude Code, Codex,
Gemini CLI, Cursor, GitHub Copilot CLI, opencode) or wrap the client's MCP
servers in portcullis mcp (Claude Desktop), and end with portcullis doctor for
that client.

init mcp -- SERVER... starts an MCP server once, lists its tools and writes
their classification into a policy of its own, for you to review.

Running init again never overwrites a policy file you edited: it shows the
difference instead (--force replaces it, keeping yours as .bak).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cmd.SetOut(cmd.ErrOrStderr())
			if err := cmd.Usage(); err != nil {
				return err
			}
			return usageError("init needs the client: claude-code, codex, gemini, claude-desktop, cursor, copilot, opencode or mcp")
		},
	}
	for _, client := range hostconfig.Clients {
		c.AddCommand(newInitClientCmd(client))
	}
	c.AddCommand(newInitMCPCmd())
	return c
}

var clientTitles = map[hostconfig.Client]string{
	hostconfig.ClaudeCode:    "Claude Code: a PreToolUse hook for every tool",
	hostconfig.Codex:         "Codex CLI: PreToolUse and PermissionRequest hooks, trusted in config.toml",
	hostconfig.Gemini:        "Gemini CLI: a BeforeTool hook for every tool",
	hostconfig.ClaudeDesktop: "Claude Desktop: every MCP server behind portcullis mcp",
	hostconfig.Cursor:        "Cursor: blocking hooks for its terminal, MCP calls, file reads and writes",
	hostconfig.Copilot:       "GitHub Copilot CLI: a preToolUse hook for every tool",
	hostconfig.OpenCode:      "opencode: a plugin that blocks every tool call Portcullis does not allow",
}

func newInitClientCmd(client hostconfig.Client) *cobra.Command {
	var f initFlags
	c := &cobra.Command{
		Use:   string(client),
		Short: clientTitles[client],
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runInitClient(cmd, client, &f)
		},
	}
	f.register(c, client.HookInstallable())
	return c
}

// initSetup is what every init needs: the user's files, the binary the
// client will run, and the project directory.
func initSetup(f *initFlags) (hostconfig.Env, string, string, error) {
	env, err := hostconfig.FromOS()
	if err != nil {
		return env, "", "", err
	}
	exe, err := installBinary(env, f.binary)
	if err != nil {
		return env, "", "", err
	}
	dir := ""
	if f.project {
		if dir, err = filepath.Abs(firstNonEmpty(f.dir, ".")); err != nil {
			return env, "", "", err
		}
	} else if f.dir != "" {
		return env, "", "", usageError("--dir names the project: use it with --project")
	}
	return env, exe, dir, nil
}

// policyFilePath is where init keeps a policy named name (policy.yaml, or
// an MCP server's): the user's configuration directory, or the project's
// .portcullis directory.
func policyFilePath(env hostconfig.Env, project, name string) string {
	if project != "" {
		return filepath.Join(project, ".portcullis", name)
	}
	return filepath.Join(env.PolicyDir(), name)
}

// writeStarter writes content as the policy file at path (unless a person
// edited the one there) and says what happened.
func writeStarter(w io.Writer, path string, content []byte, force bool) error {
	if _, _, err := policy.Parse(path, content); err != nil {
		return fmt.Errorf("the starter policy does not load: %w", err)
	}
	res, err := hostconfig.WritePolicy(path, content, force)
	if err != nil {
		return err
	}
	switch res.Outcome {
	case hostconfig.PolicyCreated:
		fmt.Fprintf(w, "policy: wrote %s (the built-in default policy, commented: edit it to taste)\n", path)
	case hostconfig.PolicyUnchanged:
		fmt.Fprintf(w, "policy: %s is up to date\n", path)
	case hostconfig.PolicyReplaced:
		fmt.Fprintf(w, "policy: replaced %s (the previous file is %s.bak):\n%s", path, path, res.Diff)
	case hostconfig.PolicyKept:
		fmt.Fprintf(w, "policy: kept %s: it was edited since init wrote it. What init would write instead:\n%s", path, res.Diff)
		fmt.Fprintln(w, "  (run again with --force to replace it; yours is then kept as .bak)")
	}
	return nil
}

// starterPolicy is the built-in default policy under init's header.
func starterPolicy() []byte {
	return append(hostconfig.StarterHeader("portcullis init"), policy.DefaultYAML()...)
}

func runInitClient(cmd *cobra.Command, client hostconfig.Client, f *initFlags) error {
	out := cmd.OutOrStdout()
	env, exe, project, err := initSetup(f)
	if err != nil {
		return err
	}
	scope := hostconfig.UserScope
	if project != "" {
		scope = hostconfig.ProjectScope
	}
	if _, err := env.SettingsFile(client, scope, project); err != nil {
		return usageError("%v", err)
	}
	polPath := f.policy
	if polPath != "" {
		if polPath, err = filepath.Abs(polPath); err != nil {
			return err
		}
		if _, _, err := policy.Load(polPath); err != nil {
			return usageError("--policy: %v", err)
		}
		fmt.Fprintf(out, "policy: %s\n", polPath)
	} else {
		polPath = policyFilePath(env, project, "policy.yaml")
		if err := writeStarter(out, polPath, starterPolicy(), f.force); err != nil {
			return err
		}
	}
	var res hostconfig.Installed
	if client.HookInstallable() {
		state := f.state
		if state != "" {
			if state, err = filepath.Abs(state); err != nil {
				return err
			}
		}
		res, err = env.InstallHook(hostconfig.Hook{Client: client, Scope: scope, Project: project,
			Command: hostconfig.HookCommand(exe, client, polPath, state, f.hold), Hold: f.hold})
	} else {
		res, err = env.WrapMCP(hostconfig.Wrap{Client: client, Scope: scope, Project: project,
			Prefix: hostconfig.WrapperPrefix(exe, polPath, string(client))})
	}
	if err != nil {
		return err
	}
	printInstalled(out, client, res)
	if !client.HookInstallable() {
		fmt.Fprintf(out, "  to classify a server's tools instead of asking for each unknown one: portcullis init mcp --client %s -- SERVER...\n", client)
	}
	return doctorReport(cmd.Context(), out, env, project, []hostconfig.Client{client}, false)
}

func printInstalled(w io.Writer, client hostconfig.Client, res hostconfig.Installed) {
	verb := "installed"
	if !res.Changed {
		verb = "already installed"
	}
	what := "hook"
	if !client.HookInstallable() {
		what = "MCP wrapper"
	}
	fmt.Fprintf(w, "%s: %s %s in %s (previous files kept as .bak)\n  %s\n", client, what, verb, strings.Join(res.Files, " and "), res.Command)
	for _, n := range res.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
}
