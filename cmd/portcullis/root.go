package main

import (
	"context"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/portcullis/portcullis/hostconfig"
	"github.com/portcullis/portcullis/internal/cmd/auditcmd"
	"github.com/portcullis/portcullis/internal/cmd/cmdutil"
	"github.com/portcullis/portcullis/internal/cmd/decidecmd"
	"github.com/portcullis/portcullis/internal/cmd/gatecmd"
	"github.com/portcullis/portcullis/internal/cmd/peoplecmd"
	"github.com/portcullis/portcullis/internal/cmd/policycmd"
	"github.com/portcullis/portcullis/internal/cmd/servecmd"
	"github.com/portcullis/portcullis/internal/cmd/setupcmd"
)

// The command tree is spf13/cobra's. Each command is built by a New...Cmd
// constructor of a command package under internal/cmd, given the
// environment; it declares its flags into an options struct and hands the
// parsed options and positional arguments to a run function, which makes
// the one call into the package that owns the subject.

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
	return cmdutil.Execute(ctx, newRootCmd(processEnv()), args, stdin, stdout, stderr)
}

// processEnv is the environment of the running process, the one the
// commands are given.
func processEnv() *cmdutil.Env {
	return &cmdutil.Env{
		LookupEnv: os.LookupEnv, HomeDir: os.UserHomeDir, ConfigDir: os.UserConfigDir, WorkDir: os.Getwd, Executable: os.Executable,
		HostConfig: hostconfig.FromOS, Interrupts: watchInterrupts,
	}
}

// newRootCmd builds the command tree.
func newRootCmd(env *cmdutil.Env) *cobra.Command {
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
				return &cmdutil.ExitError{Code: 2}
			}
			return cmdutil.UnknownCommand(cmd, args[0])
		},
	}
	root.AddGroup(
		&cobra.Group{ID: groupDecide, Title: "Decide and check policies:"},
		&cobra.Group{ID: groupGate, Title: "Gate agents:"},
		&cobra.Group{ID: groupPeople, Title: "People's answers:"},
		&cobra.Group{ID: groupAudit, Title: "Audit and operate:"},
	)
	root.SetFlagErrorFunc(cmdutil.FlagError)
	addToGroup(root, groupDecide, decidecmd.NewDecideCmd(env), decidecmd.NewExplainCmd(env), policycmd.NewPolicyCmd(env), decidecmd.NewClassifyCmd(env))
	addToGroup(root, groupGate, setupcmd.NewInitCmd(env), setupcmd.NewDoctorCmd(env), gatecmd.NewHookCmd(env), gatecmd.NewExecCmd(env), gatecmd.NewMCPCmd(env), servecmd.NewServeCmd(env), servecmd.NewToolsCmd(env))
	addToGroup(root, groupPeople, peoplecmd.NewApprovalsCmd(env), peoplecmd.NewApproveCmd(env), peoplecmd.NewDenyCmd(env), peoplecmd.NewGrantsCmd(env), peoplecmd.NewUnblockCmd(env))
	addToGroup(root, groupAudit, auditcmd.NewAuditCmd(env), auditcmd.NewBudgetsCmd(env), servecmd.NewWitnessCmd(env), servecmd.NewBenchCmd(env), newVersionCmd())
	return root
}

// addToGroup adds commands to root, listed under a group of its help.
func addToGroup(root *cobra.Command, id string, cmds ...*cobra.Command) {
	for _, c := range cmds {
		c.GroupID = id
	}
	root.AddCommand(cmds...)
}
