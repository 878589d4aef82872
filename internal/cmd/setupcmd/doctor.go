package setupcmd

import (
	"cmp"
	"context"
	"fmt"
	"io"

	"github.com/portcullis/portcullis/hostconfig"
	"github.com/portcullis/portcullis/internal/cmd/cmdutil"
	"github.com/spf13/cobra"
)

// NewDoctorCmd is `portcullis doctor`: is each installed client protected?
func NewDoctorCmd(env *cmdutil.Env) *cobra.Command {
	var dir string
	var asJSON, trustProject bool
	c := &cobra.Command{
		Use:   "doctor [CLIENT...]",
		Short: "Check that Portcullis is in front of each installed agent client (exit 1 when one is not protected)",
		Long: `Find each installed agent client — Claude Code (user and project settings),
Codex (hooks and their trust), Gemini CLI, Claude Desktop and Cursor (MCP
servers), Cursor's hooks.json (a misspelled hook name, a blocking hook
without Portcullis), GitHub Copilot CLI (its hooks, and its trust in a
repository's), opencode (Portcullis's plugin, unchanged since it was
written) — and say whether Portcullis is in front of it: protected, refusing
every call, or not protected, why, and the command that fixes it. A hook is
probed through the exact command its settings hold, with a harmless event
(the shell command "true", decided and audited, never run).

Each MCP server of each client's configuration (Claude Code's ~/.claude.json
and the project's .mcp.json, Gemini CLI's settings, Claude Desktop, Cursor)
is checked too: one behind portcullis mcp is started as the client would
start it (same command, arguments and env) and must answer the MCP handshake
and list its tools through the gate; one that is not is not protected,
unless a Portcullis hook of the same client (Claude Code, Gemini CLI)
decides its calls. The hook commands and servers that a project's own files
name are run or started only with --trust-project: a cloned repository can
name any command there.

Exit status: 0 when everything found is protected (or nothing is installed),
1 when something is not, 2 on bad input.`,
		ValidArgs: hostconfig.ClientNames(),
		Args:      cobra.OnlyValidArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			hosts, err := env.Hosts()
			if err != nil {
				return err
			}
			project, err := env.Abs(cmp.Or(dir, "."))
			if err != nil {
				return err
			}
			var only []hostconfig.Client
			for _, a := range args { // cobra.OnlyValidArgs: each names a client
				only = append(only, hostconfig.Client(a))
			}
			return doctorReport(cmd.Context(), cmd.OutOrStdout(), hosts, project, only, asJSON, hostconfig.Probes{Project: trustProject})
		},
	}
	c.Flags().StringVar(&dir, "dir", "", "the project `directory` whose settings are checked too (default: the current one)")
	c.Flags().BoolVar(&asJSON, "json", false, "print the findings as one JSON array")
	c.Flags().BoolVar(&trustProject, "trust-project", false, "run the hook commands and start the MCP servers that the project's own files name, to probe them too")
	return c
}

// doctorReport checks the clients and prints what it found; an error
// with exit status 1 when anything found is not protected.
func doctorReport(ctx context.Context, w io.Writer, hosts hostconfig.Env, project string, only []hostconfig.Client, asJSON bool, probes hostconfig.Probes) error {
	bad, total, err := hosts.Report(ctx, w, project, only, asJSON, probes)
	if err != nil {
		return err
	}
	if bad > 0 {
		return &cmdutil.ExitError{Code: 1, Msg: fmt.Sprintf("doctor: %d of %d not protected", bad, total)}
	}
	return nil
}

// installBinary is the binary a client is told to run (hostconfig's
// Env.Binary): --binary, else this one, refused when it will not last.
func installBinary(hosts hostconfig.Env, flagValue string) (string, error) {
	exe, err := hosts.Binary(flagValue)
	if err != nil {
		return "", cmdutil.UsageError("%v", err)
	}
	return exe, nil
}
