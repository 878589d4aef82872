// Package setupcmd holds the commands that put Portcullis in front of the
// agent clients: init (a starter policy and the client's configuration)
// and doctor (is each installed client protected?). Their work is in
// package hostconfig.
//
// Like every command package, it reads the process's environment only
// through the cmdutil.Env it is given, does no work that belongs to a
// domain package, and imports no command package but cmdutil.
package setupcmd

import (
	"cmp"
	"strings"

	"github.com/portcullis/portcullis/hostconfig"
	"github.com/portcullis/portcullis/internal/cmd/cmdutil"
	"github.com/portcullis/portcullis/mcpgw"
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

// NewInitCmd is `portcullis init`: one subcommand per client, and mcp.
func NewInitCmd(env *cmdutil.Env) *cobra.Command {
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
			return cmdutil.UsageError("init needs the client: claude-code, codex, gemini, claude-desktop, cursor, copilot, opencode or mcp")
		},
	}
	for _, client := range hostconfig.Clients {
		c.AddCommand(newInitClientCmd(env, client))
	}
	c.AddCommand(newInitMCPCmd(env))
	return c
}

func newInitClientCmd(env *cmdutil.Env, client hostconfig.Client) *cobra.Command {
	var f initFlags
	c := &cobra.Command{
		Use:   string(client),
		Short: client.Protection(),
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runInitClient(cmd, env, client, &f)
		},
	}
	f.register(c, client.HookInstallable())
	return c
}

// initSetup is what every init needs: the user's files, the binary the
// client will run, and the project directory.
func initSetup(env *cmdutil.Env, f *initFlags) (hostconfig.Env, string, string, error) {
	hosts, err := env.Hosts()
	if err != nil {
		return hosts, "", "", err
	}
	exe, err := installBinary(hosts, f.binary)
	if err != nil {
		return hosts, "", "", err
	}
	dir := ""
	if f.project {
		if dir, err = env.Abs(cmp.Or(f.dir, ".")); err != nil {
			return hosts, "", "", err
		}
	} else if f.dir != "" {
		return hosts, "", "", cmdutil.UsageError("--dir names the project: use it with --project")
	}
	return hosts, exe, dir, nil
}

func runInitClient(cmd *cobra.Command, env *cmdutil.Env, client hostconfig.Client, f *initFlags) error {
	hosts, exe, project, err := initSetup(env, f)
	if err != nil {
		return err
	}
	s, err := hosts.Prepare(hostconfig.Setup{Client: client, Binary: exe, Project: project, Policy: f.policy, State: f.state, Force: f.force, Hold: f.hold})
	if err != nil {
		return cmdutil.UsageError("%v", err)
	}
	if err := hosts.Protect(cmd.OutOrStdout(), s); err != nil {
		return err
	}
	return doctorReport(cmd.Context(), cmd.OutOrStdout(), hosts, project, []hostconfig.Client{client}, false, hostconfig.Probes{})
}

// newInitMCPCmd is `portcullis init mcp`: classify an MCP server's tools
// into a policy of its own and wrap the server with it.
func newInitMCPCmd(env *cmdutil.Env) *cobra.Command {
	var f initFlags
	var name, clientName string
	c := &cobra.Command{
		Use:   "mcp [--client claude-desktop|cursor] [--name NAME] -- SERVER...",
		Short: "Classify an MCP server's tools into a policy of its own, for review; optionally add the wrapped server to a client",
		Long: `Start the MCP server once (as an MCP client over stdio), list its tools, and
write a policy for it — the built-in default policy plus one entry per tool,
classified from the tool's name and the server's annotations, each with a
comment saying where its level came from. REVIEW that file: it is what the
gate trusts, and the server's annotations are only its own claims.

With --client, the server is added to that client's MCP configuration behind
portcullis mcp with this policy, and doctor checks the client.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 0 || len(args) == 0 {
				return cmdutil.UsageError("init mcp needs the server's command after --, e.g. portcullis init mcp -- npx -y @modelcontextprotocol/server-filesystem ~/work")
			}
			return runInitMCP(cmd, env, &f, name, clientName, args)
		},
	}
	f.register(c, false)
	c.Flags().StringVar(&name, "name", "", "the server's `name`: its policy file NAME.yaml, its entry in the client (default: from the command)")
	c.Flags().StringVar(&clientName, "client", "", "add the wrapped server to this `client`'s configuration: claude-desktop or cursor")
	return c
}

func runInitMCP(cmd *cobra.Command, env *cmdutil.Env, f *initFlags, name, clientName string, server []string) error {
	client, ok := hostconfig.WrappedClientNamed(clientName)
	if clientName != "" && !ok {
		return cmdutil.UsageError("--client %q: want claude-desktop or cursor (a hooked client sees MCP tools through its hook)", clientName)
	}
	hosts, exe, project, err := initSetup(env, f)
	if err != nil {
		return err
	}
	if name == "" {
		name = mcpgw.UpstreamName(server)
	}
	if name == "" || strings.ContainsAny(name, `/\`) || strings.HasPrefix(name, ".") {
		return cmdutil.UsageError("--name %q: want a plain name", name)
	}
	out := cmd.OutOrStdout()
	s := hostconfig.ServerSetup{Name: name, Command: server, Client: client, Binary: exe, Project: project, Force: f.force}
	if err := hosts.ProtectServer(cmd.Context(), out, cmd.ErrOrStderr(), s); err != nil || client == "" {
		return err
	}
	return doctorReport(cmd.Context(), out, hosts, project, []hostconfig.Client{client}, false, hostconfig.Probes{})
}
