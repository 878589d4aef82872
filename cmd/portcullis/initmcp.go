package main

import (
	"fmt"
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
	out := cmd.OutOrStdout()
	var client hostconfig.Client
	if clientName != "" {
		c, ok := hostconfig.ClientNamed(clientName)
		if !ok || c.Hooked() {
			return usageError("--client %q: want claude-desktop or cursor (a hooked client sees MCP tools through its hook)", clientName)
		}
		client = c
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
	fmt.Fprintf(out, "starting %s to list its tools...\n", strings.Join(server, " "))
	tools, err := hostconfig.ListTools(cmd.Context(), server, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	classified := hostconfig.ClassifyTools(tools)
	base := starterPolicy()
	have, err := hostconfig.ToolNames(base)
	if err != nil {
		return err
	}
	content, err := hostconfig.InsertTools(base, hostconfig.ToolsBlock(name, classified, have))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s: %d tools, classified from their names and annotations:\n", name, len(classified))
	for _, c := range classified {
		fmt.Fprintf(out, "  %-28s %-7s %s\n", c.Name, c.Endpoint, c.Why)
	}
	polPath := policyFilePath(env, project, name+".yaml")
	if err := writeStarter(out, polPath, content, f.force); err != nil {
		return err
	}
	fmt.Fprintf(out, "REVIEW %s: it is what the gate trusts; the server's annotations are only its own claims.\n", polPath)
	prefix := hostconfig.WrapperPrefix(exe, polPath, "")
	if client == "" {
		line, err := hostconfig.ShellJoin(append(append(prefix, "--name", name, "--"), server...))
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "run the server behind the gate in your client's configuration as:\n  %s\n", line)
		return nil
	}
	scope := hostconfig.UserScope
	if project != "" {
		scope = hostconfig.ProjectScope
	}
	res, err := env.WrapMCP(hostconfig.Wrap{Client: client, Scope: scope, Project: project,
		Prefix: hostconfig.WrapperPrefix(exe, polPath, string(client)),
		Add:    &hostconfig.Server{Name: name, Command: server[0], Args: server[1:]}})
	if err != nil {
		return err
	}
	printInstalled(out, client, res)
	return doctorReport(cmd.Context(), out, env, project, []hostconfig.Client{client}, false)
}
