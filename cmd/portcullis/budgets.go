package main

import (
	"context"
	"io"
	"time"

	"github.com/portcullis/portcullis/budgets"
	"github.com/spf13/cobra"
)

// budgetsOptions are the flags of `portcullis budgets`.
type budgetsOptions struct {
	json  bool
	state stateFlags
}

func newBudgetsCmd() *cobra.Command {
	var o budgetsOptions
	cmd := &cobra.Command{
		Use:   "budgets [BUDGET] [--json]",
		Short: "The use of the policy's budgets in their current windows, and when each reopens",
		Long: `The use of the policy's rate limits and spend caps (budgets:) in their current
windows, read from the store: each budget, whom it counts (agent, session or
tool), what it has used of its limit, and when its window reopens.`,
		Example: `  portcullis budgets
  portcullis budgets payments --json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, pos []string) error {
			return runBudgets(cmd.Context(), &o, pos, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	fs.BoolVar(&o.json, "json", false, "print one JSON object per counter instead of a table")
	o.state.register(fs)
	return cmd
}

// runBudgets prints the budgets' use, or one budget's.
func runBudgets(ctx context.Context, o *budgetsOptions, pos []string, stdout, stderr io.Writer) error {
	st, err := o.state.open(ctx, cliLogger(stderr))
	if err != nil {
		return err
	}
	defer st.Close()
	now := time.Now()
	use, err := budgets.Use(ctx, st, now, pos)
	if err != nil {
		return err
	}
	return budgets.Write(stdout, use, now, o.json)
}
