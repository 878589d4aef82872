package main

import (
	"strings"

	"github.com/portcullis/portcullis/hostconfig"
	"github.com/portcullis/portcullis/mcpgw"
	"github.com/spf13/cobra"
)

// `portcullis init mcp`: classify an MCP server's tools into a policy of
// its own and wrap the server with it.

func newInitMCPCmd() *cobra.Command {
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
				return usageError("init mcp needs the server's command after --, e.g. portcullis init mcp -- npx -y @modelcontextprotocol/server-filesystem ~/work")
			}
			return runInitMCP(cmd, &f, name, clientName, args)
		},
	}
	f.register(c, false)
	c.Flags().StringVar(&name, "name", "", "the server's `name`: its policy file NAME.yaml, its entry in the client (default: from the command)")
	c.Flags().StringVar(&clientName, "client", "", "add the wrapped server to this `client`'s configuration: claude-desktop or cursor")
	return c
}

func runInitMCP(cmd *cobra.Command, f *initFlags, name, clientName string, server []string) error {
	client, ok := hostconfig.WrappedClientNamed(clientName)
	if clientName != "" && !ok {
		return usageError("--client %q: want claude-desktop or cursor (a hooked client sees MCP tools through its hook)", clientName)
	}
	env, exe, project, err := initSetup(f)
	if err != nil {
		return err
	}
	if name == "" {
		name = mcpgw.UpstreamName(server)
	}
	if name == "" || strings.ContainsAny(name, `/\`) || strings.HasPrefix(name, ".") {
		return usageError("--name %q: want a plain name", name)
	}
	out := cmd.OutOrStdout()
	s := hostconfig.ServerSetup{Name: name, Command: server, Client: client, Binary: exe, Project: project, Force: f.force}
	if err := env.ProtectServer(cmd.Context(), out, cmd.ErrOrStderr(), s); err != nil || client == "" {
		return err
	}
	return doctorReport(cmd.Context(), out, env, project, []hostconfig.Client{client}, false, hostconfig.Probes{})
}
