package main

import (
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The commands that decide requests and check policies: decide, explain,
// classify and the policy group.

type decideOptions struct {
	policy string
	state  stateFlags
	notify notifyFlags
}

func newDecideCmd() *cobra.Command {
	var o decideOptions
	cmd := &cobra.Command{
		Use:   "decide [flags] < requests.jsonl",
		Short: "Decide JSON-line requests from stdin, one JSON decision per line on stdout",
		Long: `Decide JSON-line requests from stdin, one JSON decision per line on stdout.

Without --state or --store, decide is a pure function of the policy and the
requests: no grant is used up, no approval or audit row kept. A malformed line
stops the run with exit status 2 and a message naming the line.`,
		Example: `  portcullis decide --policy policy.yaml < requests.jsonl`,
		Args:    cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDecide(cmd.Context(), &o, args, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.policy, "policy", "", "policy `file` (default $PORTCULLIS_POLICY, else the built-in default policy)")
	o.state.register(fs)
	o.notify.register(fs)
	return cmd
}

type explainOptions struct {
	policy string
	json   bool
}

func newExplainCmd() *cobra.Command {
	var o explainOptions
	cmd := &cobra.Command{
		Use:   "explain REQUEST",
		Short: "Show which stage decided a request and why",
		Long: `Show which stage decided a request and why: the verdict first, then every
stage of the pipeline. REQUEST is a JSON object, or - to read it from stdin.
Nothing is recorded.`,
		Example: `  portcullis explain --policy policy.yaml '{"tool": "delete_element", "args": {"name": "x"}}'
  echo '{"tool": "create_element"}' | portcullis explain --json -`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runExplain(cmd.Context(), &o, args, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.policy, "policy", "", "policy `file` (default $PORTCULLIS_POLICY)")
	fs.BoolVar(&o.json, "json", false, "print the decision as JSON instead of text")
	return cmd
}

type classifyOptions struct {
	policy string
}

func newClassifyCmd() *cobra.Command {
	var o classifyOptions
	cmd := &cobra.Command{
		Use:         "classify [--policy FILE] [-- COMMAND WORDS...]",
		Annotations: map[string]string{annotationFlagsFirst: "yes"},
		Short:       "Classify a shell command without running it",
		Long: `Classify a shell command without running it: the words after -- as one
command, or else one {"command": "..."} JSON object per line of stdin. One
classification JSON line is printed per command.`,
		Example: `  portcullis classify -- 'git status && rm -r -f /'
  echo '{"command": "curl https://example.com | sh"}' | portcullis classify`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runClassify(cmd.Context(), &o, args, cmd.ArgsLenAtDash(), cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&o.policy, "policy", "", "policy `file` whose shell.rules apply (default $PORTCULLIS_POLICY; none: the built-in knowledge only)")
	// The flags come first: a command's words are not classify's flags.
	cmd.Flags().SetInterspersed(false)
	return cmd
}

func newPolicyCmd() *cobra.Command {
	return groupCmd("policy", "Check, test, compare and replay policy files", `Check, test, compare and replay policy files.

See docs/POLICY.md for the policy file.`,
		newPolicyLintCmd(), newPolicyTestCmd(), newPolicyDiffCmd(), newPolicyReplayCmd(), newPolicyShowDefaultCmd())
}

type policyLintOptions struct {
	strict bool
}

func newPolicyLintCmd() *cobra.Command {
	var o policyLintOptions
	cmd := &cobra.Command{
		Use:   "lint [--strict] FILE",
		Short: "Check a policy file and print its warnings",
		Long: `Check a policy file and print its warnings.

Exit status: 0 when it loads (1 with --strict and warnings), 2 when it does not.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPolicyLint(&o, args, cmd.OutOrStdout())
		},
	}
	cmd.Flags().BoolVar(&o.strict, "strict", false, "exit 1 when there are warnings")
	return cmd
}

type policyTestOptions struct {
	verbose bool
}

func newPolicyTestCmd() *cobra.Command {
	var o policyTestOptions
	cmd := &cobra.Command{
		Use:   "test [-v] FILE...",
		Short: "Run policy unit-test files",
		Long: `Run policy unit-test files through the real gate.

Exit status: 0 when every case passes, 1 when one fails, 2 when a file does not load.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPolicyTest(cmd.Context(), &o, args, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	fs.BoolVarP(&o.verbose, "verbose", "v", false, "list passing cases too")
	aliasFlag(fs, "v", "verbose")
	return cmd
}

type policyDiffOptions struct {
	json, all bool
}

func newPolicyDiffCmd() *cobra.Command {
	var o policyDiffOptions
	cmd := &cobra.Command{
		Use:   "diff [--json] [--all] OLD NEW",
		Short: "What changes between two policies: tools, elements, effective levels",
		Long: `What changes between two policies: tools, elements, effective levels.

Exit status: 0 when they decide alike, 1 when they differ (like diff), 2 when one does not load.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPolicyDiff(&o, args, cmd.OutOrStdout())
		},
	}
	fs := cmd.Flags()
	fs.BoolVar(&o.json, "json", false, "print the difference as one JSON object")
	fs.BoolVar(&o.all, "all", false, "list every tool's effective level, not only those that change")
	return cmd
}

type policyReplayOptions struct {
	policy       string
	since, until string
	json         bool
	progress     int64
	state        stateFlags
}

func newPolicyReplayCmd() *cobra.Command {
	// The replay reads every row of the log itself, and a damaged page is an
	// error of that scan: SQLite's whole-file quick_check at open would read
	// the file twice.
	o := policyReplayOptions{state: stateFlags{perCall: true}}
	cmd := &cobra.Command{
		Use:   "replay --policy NEW [flags]",
		Short: "Re-decide the audit log's calls under a new policy; list every decision that would change",
		Long: `Re-decide the audit log's calls under a new policy and list every decision
that would change.

Exit status: 0 when nothing changes, 1 when something does, 2 bad input.`,
		Example: `  portcullis policy replay --policy new.yaml --since 7d`,
		Args:    cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPolicyReplay(cmd.Context(), &o, args, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.policy, "policy", "", "the new policy `file` to replay the recorded calls under (default $PORTCULLIS_POLICY)")
	fs.StringVar(&o.since, "since", "", "replay decisions from this `time` (RFC 3339) or this long ago (90m, 24h, 7d); default: the whole log")
	fs.StringVar(&o.until, "until", "", "replay decisions before this `time` (RFC 3339) or this long ago")
	fs.BoolVar(&o.json, "json", false, "one JSON object per changed decision, then one summary object")
	fs.Int64Var(&o.progress, "progress", 100000, "report progress on stderr every `N` rows (0: never)")
	o.state.register(fs)
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
			return runPolicyShowDefault(args, cmd.OutOrStdout())
		},
	}
}

// aliasFlag makes --alias another name of the flag name (for the one-letter
// flags earlier versions took as -v or --v, now shorthands of a long flag).
func aliasFlag(fs *pflag.FlagSet, alias, name string) {
	prev := fs.GetNormalizeFunc()
	fs.SetNormalizeFunc(func(f *pflag.FlagSet, n string) pflag.NormalizedName {
		if n == alias {
			n = name
		}
		return prev(f, n)
	})
}
