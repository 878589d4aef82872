// Package policycmd holds the policy group: lint, test, diff, replay and
// show-default. Their work is in packages policy, policytest, policydiff
// and replay; here are their flags, the one call each makes and its exit
// status.
//
// Like every command package, it reads the process's environment only
// through the cmdutil.Env it is given, does no work that belongs to a
// domain package, and imports no command package but cmdutil.
package policycmd

import (
	"fmt"

	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/internal/cmd/cmdutil"
	"github.com/portcullis/portcullis/policy"
	"github.com/portcullis/portcullis/policydiff"
	"github.com/portcullis/portcullis/policytest"
	"github.com/spf13/cobra"
)

// NewPolicyCmd is `portcullis policy` and its subcommands.
func NewPolicyCmd(env *cmdutil.Env) *cobra.Command {
	return cmdutil.GroupCmd("policy", "Check, test, compare and replay policy files", `Check, test, compare and replay policy files.

See docs/POLICY.md for the policy file.`,
		newPolicyLintCmd(), newPolicyTestCmd(), newPolicyDiffCmd(), newPolicyReplayCmd(env), newPolicyShowDefaultCmd())
}

func newPolicyLintCmd() *cobra.Command {
	var strict bool
	cmd := &cobra.Command{
		Use:   "lint [--strict] FILE",
		Short: "Check a policy file and print its warnings",
		Long: `Check a policy file and print its warnings.

Exit status: 0 when it loads (1 with --strict and warnings), 2 when it does not.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return cmdutil.UsageError("policy lint takes one policy file")
			}
			pol, warnings, err := policy.Load(args[0])
			if err != nil {
				return &cmdutil.ExitError{Code: 2, Msg: err.Error()}
			}
			if _, err := gate.New(pol); err != nil {
				return &cmdutil.ExitError{Code: 2, Msg: fmt.Sprintf("%s: %v", args[0], err)}
			}
			if err := policy.WriteLint(cmd.OutOrStdout(), args[0], pol, warnings); err != nil {
				return err
			}
			if strict && len(warnings) > 0 {
				return &cmdutil.ExitError{Code: 1}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&strict, "strict", false, "exit 1 when there are warnings")
	return cmd
}

func newPolicyTestCmd() *cobra.Command {
	var verbose bool
	cmd := &cobra.Command{
		Use:   "test [-v] FILE...",
		Short: "Run policy unit-test files",
		Long: `Run policy unit-test files through the real gate.

Exit status: 0 when every case passes, 1 when one fails, 2 when a file does not load.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmdutil.UsageError("policy test takes one or more test files")
			}
			results, errs := policytest.RunFiles(cmd.Context(), args)
			for _, err := range errs {
				fmt.Fprintln(cmd.ErrOrStderr(), "portcullis: "+err.Error())
			}
			if len(errs) == len(args) {
				return &cmdutil.ExitError{Code: 2} // nothing ran: the errors alone, no "0 passed, 0 failed"
			}
			failed := policy.FormatResults(cmd.OutOrStdout(), results, verbose)
			switch {
			case len(errs) > 0:
				return &cmdutil.ExitError{Code: 2}
			case failed > 0:
				return &cmdutil.ExitError{Code: 1}
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.BoolVarP(&verbose, "verbose", "v", false, "list passing cases too")
	cmdutil.AliasFlag(fs, "v", "verbose")
	return cmd
}

func newPolicyDiffCmd() *cobra.Command {
	var asJSON, all bool
	cmd := &cobra.Command{
		Use:   "diff [--json] [--all] OLD NEW",
		Short: "What changes between two policies: tools, elements, effective levels",
		Long: `What changes between two policies: tools, elements, effective levels.

Exit status: 0 when they decide alike, 1 when they differ (like diff), 2 when one does not load.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return cmdutil.UsageError("policy diff takes two policy files: OLD NEW")
			}
			d, err := policydiff.CompareFiles(args[0], args[1])
			if err != nil {
				return &cmdutil.ExitError{Code: 2, Msg: err.Error()}
			}
			if asJSON {
				err = d.WriteJSON(cmd.OutOrStdout())
			} else {
				err = d.WriteText(cmd.OutOrStdout(), all)
			}
			if err == nil && !d.Equal {
				return &cmdutil.ExitError{Code: 1} // like diff
			}
			return err
		},
	}
	fs := cmd.Flags()
	fs.BoolVar(&asJSON, "json", false, "print the difference as one JSON object")
	fs.BoolVar(&all, "all", false, "list every tool's effective level, not only those that change")
	return cmd
}

type policyReplayOptions struct {
	policy       string
	since, until string
	json         bool
	progress     int64
	state        cmdutil.StateFlags
}

func newPolicyReplayCmd(env *cmdutil.Env) *cobra.Command {
	// The replay reads every row of the log itself, and a damaged page is an
	// error of that scan: SQLite's whole-file quick_check at open would read
	// the file twice.
	o := policyReplayOptions{state: cmdutil.StateFlags{PerCall: true}}
	cmd := &cobra.Command{
		Use:   "replay --policy NEW [flags]",
		Short: "Re-decide the audit log's calls under a new policy; list every decision that would change",
		Long: `Re-decide the audit log's calls under a new policy and list every decision
that would change.

Exit status: 0 when nothing changes, 1 when something does, 2 bad input.`,
		Example: `  portcullis policy replay --policy new.yaml --since 7d`,
		Args:    cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPolicyReplay(cmd.Context(), env, &o, args, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.policy, "policy", "", "the new policy `file` to replay the recorded calls under (default $PORTCULLIS_POLICY)")
	fs.StringVar(&o.since, "since", "", "replay decisions from this `time` (RFC 3339) or this long ago (90m, 24h, 7d); default: the whole log")
	fs.StringVar(&o.until, "until", "", "replay decisions before this `time` (RFC 3339) or this long ago")
	fs.BoolVar(&o.json, "json", false, "one JSON object per changed decision, then one summary object")
	fs.Int64Var(&o.progress, "progress", 100000, "report progress on stderr every `N` rows (0: never)")
	o.state.Register(fs)
	return cmd
}

func newPolicyShowDefaultCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "show-default",
		Short:   "Print the built-in default policy, commented",
		Long:    "Print the built-in default policy, commented, as the starting point for a policy file.",
		Example: `  portcullis policy show-default > policy.yaml`,
		Args:    cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return cmdutil.UsageError("policy show-default takes no arguments; unexpected %q", args[0])
			}
			_, err := cmd.OutOrStdout().Write(policy.DefaultYAML())
			return err
		},
	}
}
