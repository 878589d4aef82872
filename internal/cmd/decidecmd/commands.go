// Package decidecmd holds the commands that decide requests: decide,
// explain and classify. Their work is in packages gate and shell; here are
// their flags, the one call each makes and its exit status.
//
// Like every command package, it reads the process's environment only
// through the cmdutil.Env it is given, does no work that belongs to a
// domain package, and imports no command package but cmdutil.
package decidecmd

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/internal/cmd/cmdutil"
	"github.com/spf13/cobra"
)

type decideOptions struct {
	policy string
	state  cmdutil.StateFlags
	notify cmdutil.NotifyFlags
}

// NewDecideCmd is `portcullis decide`.
func NewDecideCmd(env *cmdutil.Env) *cobra.Command {
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
			return runDecide(cmd.Context(), env, &o, args, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.policy, "policy", "", "policy `file` (default $PORTCULLIS_POLICY, else the built-in default policy)")
	o.state.Register(fs)
	o.notify.Register(fs)
	return cmd
}

// NewExplainCmd is `portcullis explain`.
func NewExplainCmd(env *cmdutil.Env) *cobra.Command {
	var policyFlag string
	var asJSON bool
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
			if len(args) != 1 {
				return cmdutil.UsageError(`explain takes one request, e.g. portcullis explain --policy policy.yaml '{"tool": "delete_element"}'`)
			}
			raw := []byte(args[0])
			if args[0] == "-" {
				var err error
				if raw, err = io.ReadAll(io.LimitReader(cmd.InOrStdin(), portcullis.MaxRequestBytes+1)); err != nil {
					return fmt.Errorf("read request: %w", err)
				}
			}
			call, err := portcullis.DecodeCall(raw)
			if err != nil {
				return cmdutil.UsageError("request: %v", err)
			}
			path, err := cmdutil.PolicyPath(env, policyFlag)
			if err != nil {
				return err
			}
			g, err := loadGate(env, path, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			// Explain decides without side effects.
			d, err := g.Explain(cmd.Context(), call)
			if err != nil {
				return cmdutil.UsageError("request: %v", err)
			}
			if !asJSON {
				return gate.WriteExplanation(cmd.OutOrStdout(), call, d)
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			enc.SetEscapeHTML(false)
			return enc.Encode(d)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&policyFlag, "policy", "", "policy `file` (default $PORTCULLIS_POLICY)")
	fs.BoolVar(&asJSON, "json", false, "print the decision as JSON instead of text")
	return cmd
}

// NewClassifyCmd is `portcullis classify`.
func NewClassifyCmd(env *cmdutil.Env) *cobra.Command {
	var policyFlag string
	cmd := &cobra.Command{
		Use:         "classify [--policy FILE] [-- COMMAND WORDS...]",
		Annotations: map[string]string{cmdutil.FlagsFirst: "yes"},
		Short:       "Classify a shell command without running it",
		Long: `Classify a shell command without running it: the words after -- as one
command, or else one {"command": "..."} JSON object per line of stdin. One
classification JSON line is printed per command.`,
		Example: `  portcullis classify -- 'git status && rm -r -f /'
  echo '{"command": "curl https://example.com | sh"}' | portcullis classify`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			// The words after -- are the command; nothing may stand before it.
			dashAt := cmd.ArgsLenAtDash()
			if dashAt > 0 || (dashAt < 0 && len(args) > 0) {
				return cmdutil.UsageError("classify: unexpected argument %q (put the command after --: portcullis %s)", args[0], cmd.Use)
			}
			if dashAt == 0 && len(args) == 0 {
				return cmdutil.UsageError("classify: no command after --")
			}
			c, err := newShellClassifier(env, policyFlag, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if dashAt < 0 {
				return c.ClassifyLines(cmd.Context(), cmd.InOrStdin(), cmd.OutOrStdout())
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetEscapeHTML(false)
			if err := enc.Encode(c.Classify(strings.Join(args, " "))); err != nil {
				return fmt.Errorf("write classification: %w", err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&policyFlag, "policy", "", "policy `file` whose shell.rules apply (default $PORTCULLIS_POLICY; none: the built-in knowledge only)")
	// The flags come first: a command's words are not classify's flags.
	cmd.Flags().SetInterspersed(false)
	return cmd
}
