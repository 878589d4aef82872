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
	return cmdutil.Execute(ctx, newRootCmdFor(processEnv(), args), args, stdin, stdout, stderr)
}

// perCall are the commands a host starts as a new process for every tool
// call or shell command it gates: the hooks and the shell gate (exec, which
// portcullis-sh runs). Their start is part of every call's latency, so the
// root is built for them with that one command only: the rest of the tree
// (some 20 commands and their flags) is not needed to run, or to show the
// help of, a command and its subcommands.
func perCall(name string) bool { return name == "hook" || name == "exec" }

// newRootCmdFor is the root that runs args: the whole tree, or, when
// args[0] names a perCall command, the root with that command only.
func newRootCmdFor(env *cmdutil.Env, args []string) *cobra.Command {
	if len(args) > 0 && perCall(args[0]) {
		return newRoot(env, args[0])
	}
	return newRootCmd(env)
}

// processEnv is the environment of the running process, the one the
// commands are given.
func processEnv() *cmdutil.Env {
	return &cmdutil.Env{
		LookupEnv: os.LookupEnv, HomeDir: os.UserHomeDir, ConfigDir: os.UserConfigDir, WorkDir: os.Getwd, Executable: os.Executable,
		HostConfig: hostconfig.FromOS, Interrupts: watchInterrupts,
	}
}

// topCommand is a command of the root: the name its constructor gives it,
// its group in the help, and its constructor.
type topCommand struct {
	name, group string
	build       func(*cmdutil.Env) *cobra.Command
}

// topCommands are the root's commands, in the order of the help.
var topCommands = []topCommand{
	{"decide", groupDecide, decidecmd.NewDecideCmd},
	{"explain", groupDecide, decidecmd.NewExplainCmd},
	{"policy", groupDecide, policycmd.NewPolicyCmd},
	{"classify", groupDecide, decidecmd.NewClassifyCmd},
	{"init", groupGate, setupcmd.NewInitCmd},
	{"doctor", groupGate, setupcmd.NewDoctorCmd},
	{"hook", groupGate, gatecmd.NewHookCmd},
	{"exec", groupGate, gatecmd.NewExecCmd},
	{"mcp", groupGate, gatecmd.NewMCPCmd},
	{"serve", groupGate, servecmd.NewServeCmd},
	{"tools", groupGate, servecmd.NewToolsCmd},
	{"approvals", groupPeople, peoplecmd.NewApprovalsCmd},
	{"approve", groupPeople, peoplecmd.NewApproveCmd},
	{"deny", groupPeople, peoplecmd.NewDenyCmd},
	{"grants", groupPeople, peoplecmd.NewGrantsCmd},
	{"unblock", groupPeople, peoplecmd.NewUnblockCmd},
	{"audit", groupAudit, auditcmd.NewAuditCmd},
	{"budgets", groupAudit, auditcmd.NewBudgetsCmd},
	{"witness", groupAudit, servecmd.NewWitnessCmd},
	{"bench", groupAudit, servecmd.NewBenchCmd},
	{"version", groupAudit, func(*cmdutil.Env) *cobra.Command { return newVersionCmd() }},
}

// newRootCmd builds the command tree.
func newRootCmd(env *cmdutil.Env) *cobra.Command { return newRoot(env, "") }

// newRoot builds the root with every command, or with the command named
// only.
func newRoot(env *cmdutil.Env, only string) *cobra.Command {
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
	for _, tc := range topCommands {
		if only != "" && tc.name != only {
			continue
		}
		c := tc.build(env)
		c.GroupID = tc.group
		root.AddCommand(c)
	}
	return root
}
