package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
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
	root.SetArgs(singleDashLongFlags(root, args))
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
// names it may have meant.
func unknownCommand(cmd *cobra.Command, name string) error {
	msg := fmt.Sprintf("unknown command %q for %q", name, cmd.CommandPath())
	if s := suggestions(cmd, name); len(s) > 0 {
		msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t") + "\n"
	}
	return usageError("%s\nRun '%s --help' for usage.", msg, cmd.CommandPath())
}

// flagError makes a flag the command line got wrong bad input (exit status
// 2), naming the flags an unknown one may have meant.
func flagError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	var ne *pflag.NotExistError
	if errors.As(err, &ne) && ne.GetSpecifiedShortnames() == "" {
		if s := flagSuggestions(cmd, ne.GetSpecifiedName()); len(s) > 0 {
			msg += "\n\nDid you mean this?\n\t--" + strings.Join(s, "\n\t--") + "\n"
		}
	}
	return usageError("%s\nRun '%s --help' for usage.", msg, cmd.CommandPath())
}

// flagSuggestions are the flags of cmd whose names are close to name, by
// cobra's own measure for command names (a prefix, or a small edit
// distance).
func flagSuggestions(cmd *cobra.Command, name string) []string {
	probe := &cobra.Command{Use: "probe"}
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden && f.Deprecated == "" {
			probe.AddCommand(&cobra.Command{Use: f.Name, Run: func(*cobra.Command, []string) {}})
		}
	})
	return suggestions(probe, name)
}

// suggestions are the subcommands of cmd whose names are close to name.
func suggestions(cmd *cobra.Command, name string) []string {
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2
	}
	return cmd.SuggestionsFor(name)
}

// singleDashLongFlags rewrites -name and -name=value to --name and
// --name=value where name is a long flag of the command the arguments
// select. Earlier versions parsed flags with the standard library, which
// took both forms, and scripts written then keep working. Nothing after
// "--" is touched, nor a flag's value, nor (for a command whose flags end
// at its first argument, like exec) anything from that argument on.
func singleDashLongFlags(root *cobra.Command, args []string) []string {
	cmd, rest, err := root.Find(args)
	if err != nil || cmd == root {
		return args
	}
	var words []string
	for c := cmd; c != root; c = c.Parent() {
		words = append([]string{c.Name()}, words...)
	}
	if len(words)+len(rest) != len(args) {
		return args // an alias or an unusual order: leave it to cobra
	}
	return append(words, singleDash(cmd, rest)...)
}

// singleDash is singleDashLongFlags for the arguments of cmd.
func singleDash(cmd *cobra.Command, args []string) []string {
	if len(args) > 0 && args[0] == cmd.Annotations[annotationOwnParser] {
		return args
	}
	cmd.InitDefaultHelpFlag()
	fs := cmd.Flags()
	out := make([]string, len(args))
	copy(out, args)
	for i := 0; i < len(out); i++ {
		a := out[i]
		if a == "--" {
			break
		}
		if len(a) < 2 || a[0] != '-' {
			if cmd.Annotations[annotationFlagsFirst] != "" {
				break
			}
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		var f *pflag.Flag
		switch {
		case strings.HasPrefix(a, "--"):
			f = fs.Lookup(name)
		case len(name) > 1 && fs.Lookup(name) != nil:
			f = fs.Lookup(name)
			out[i] = "-" + a
		default:
			// Shorthands: the last of a cluster may take the next
			// argument as its value, unless the value is attached.
			f = fs.ShorthandLookup(name[len(name)-1:])
			hasValue = hasValue || len(name) > 1 && fs.ShorthandLookup(name[:1]) != nil && fs.ShorthandLookup(name[:1]).NoOptDefVal == ""
		}
		if f != nil && !hasValue && f.NoOptDefVal == "" {
			i++ // the flag's value, whatever it looks like
		}
	}
	return out
}

// Annotations that tell singleDash where a command's own flags end.
const (
	// annotationFlagsFirst: the command's flags end at its first argument
	// (exec: `exec ls -la`).
	annotationFlagsFirst = "portcullis/flags-first"
	// annotationOwnParser names a first argument that hands the command
	// line to another parser (exec --shell: a shell's command line).
	annotationOwnParser = "portcullis/own-parser"
)
