package main

import (
	"path/filepath"

	"github.com/portcullis/portcullis/hostconfig"
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

func newInitClientCmd(client hostconfig.Client) *cobra.Command {
	var f initFlags
	c := &cobra.Command{
		Use:   string(client),
		Short: client.Protection(),
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

func runInitClient(cmd *cobra.Command, client hostconfig.Client, f *initFlags) error {
	env, exe, project, err := initSetup(f)
	if err != nil {
		return err
	}
	s, err := env.Prepare(hostconfig.Setup{Client: client, Binary: exe, Project: project, Policy: f.policy, State: f.state, Force: f.force, Hold: f.hold})
	if err != nil {
		return usageError("%v", err)
	}
	if err := env.Protect(cmd.OutOrStdout(), s); err != nil {
		return err
	}
	return doctorReport(cmd.Context(), cmd.OutOrStdout(), env, project, []hostconfig.Client{client}, false, hostconfig.Probes{})
}
