package main

import (
	"context"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/portcullis/portcullis/internal/cli"
)

// The command tree is spf13/cobra's. Each command is built by a new...Cmd
// constructor that declares its flags into an options struct and hands the
// parsed options and positional arguments to a run function that does the
// work; the constructors live in the commands_*.go files, the work beside
// its subject.

const rootLong = `portcullis: a permission gateway for AI agents

Stateful commands take --state DIR (default $PORTCULLIS_STATE, else $XDG_STATE_HOME/portcullis)
and --store URL (sqlite:///path or postgres://...; default $PORTCULLIS_STORE, else SQLite there).
approvals, approve, deny and grants talk to a running gateway with --gateway URL (or $PORTCULLIS_GATEWAY)
and its human token (--token-file, default admin.token in the state directory), else to the store.
The policy file may also be named by $PORTCULLIS_POLICY.

Exit status: 0 success, 1 a policy test failed (or lint --strict found warnings, or diff or replay
found changes, or audit verify found a fault), 2 bad input.
See docs/POLICY.md for the policy file and docs/ARCHITECTURE.md for the pipeline.`

const rootExample = `  portcullis decide --policy policy.yaml < requests.jsonl
  portcullis explain '{"tool": "delete_file"}' --policy policy.yaml
  portcullis hook install claude-code --policy policy.yaml
  portcullis classify [--policy FILE] -- CMD
  portcullis exec -- rm -rf build
  portcullis mcp --policy policy.yaml -- npx -y @modelcontextprotocol/server-filesystem .
  portcullis serve --config portcullis.yaml
  portcullis approvals --watch
  portcullis version --json`

// Command groups of the top-level help.
const (
	groupDecide = "decide"
	groupGate   = "gate"
	groupPeople = "people"
	groupAudit  = "audit"
)

// run is the command line: main calls it, and so do the tests.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	root := newRootCmd()
	if args == nil {
		args = []string{} // cobra reads nil as "use os.Args"
	}
	root.SetArgs(cli.SingleDashLongFlags(root, args))
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	return root.ExecuteContext(ctx)
}

// newRootCmd builds the command tree.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:                   "portcullis",
		DisableFlagsInUseLine: true,
		Short:                 "a permission gateway for AI agents",
		Long:                  rootLong,
		Example:               rootExample,
		SilenceErrors:         true,
		SilenceUsage:          true,
		Args:                  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				cmd.SetOut(cmd.ErrOrStderr())
				_ = cmd.Help()
				return &exitError{code: 2}
			}
			return unknownCommand(cmd, args[0])
		},
	}
	root.AddGroup(
		&cobra.Group{ID: groupDecide, Title: "Decide and check policies:"},
		&cobra.Group{ID: groupGate, Title: "Gate agents:"},
		&cobra.Group{ID: groupPeople, Title: "People's answers:"},
		&cobra.Group{ID: groupAudit, Title: "Audit and operate:"},
	)
	root.SetFlagErrorFunc(flagError)
	addToGroup(root, groupDecide, newDecideCmd(), newExplainCmd(), newPolicyCmd(), newClassifyCmd())
	addToGroup(root, groupGate, newInitCmd(), newDoctorCmd(), newHookCmd(), newExecCmd(), newMCPCmd(), newServeCmd(), newToolsCmd())
	addToGroup(root, groupPeople, newApprovalsCmd(), newApproveCmd(), newDenyCmd(), newGrantsCmd(), newUnblockCmd())
	addToGroup(root, groupAudit, newAuditCmd(), newBudgetsCmd(), newWitnessCmd(), newBenchCmd(), newVersionCmd())
	return root
}

// addToGroup adds commands to root, listed under a group of its help.
func addToGroup(root *cobra.Command, id string, cmds ...*cobra.Command) {
	for _, c := range cmds {
		c.GroupID = id
	}
	root.AddCommand(cmds...)
}

// groupCmd is a command that only holds subcommands: without one, or with
// an unknown one, it is bad input (exit status 2) with a suggestion.
func groupCmd(use, short, long string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{
		Use:                   use,
		DisableFlagsInUseLine: true,
		Short:                 short,
		Long:                  long,
		Args:                  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				cmd.SetOut(cmd.ErrOrStderr())
				_ = cmd.Usage()
				return usageError("%s needs a command (see the list above)", strings.TrimPrefix(cmd.CommandPath(), "portcullis "))
			}
			return unknownCommand(cmd, args[0])
		},
	}
	c.AddCommand(subs...)
	return c
}

// unknownCommand is the error for a command cmd does not have, with the
// names it may have meant: bad input (exit status 2).
func unknownCommand(cmd *cobra.Command, name string) error {
	return usageError("%s", cli.UnknownCommand(cmd, name))
}

// flagError makes a flag the command line got wrong bad input (exit status
// 2), naming the flags an unknown one may have meant.
func flagError(cmd *cobra.Command, err error) error {
	return usageError("%s", cli.FlagError(cmd, err))
}
