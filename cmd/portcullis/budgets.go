package main

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/spf13/cobra"
	"io"
	"text/tabwriter"
	"time"

	"github.com/portcullis/portcullis"
)

// runBudgets lists the use of the policy's budgets in their current
// windows, read from the store (every replica's calls count in it).
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
	use, err := st.BudgetUse(ctx, now)
	if err != nil {
		return err
	}
	if len(pos) == 1 {
		kept := use[:0]
		for _, u := range use {
			if u.Budget == pos[0] {
				kept = append(kept, u)
			}
		}
		use = kept
	}
	return writeBudgetUse(stdout, use, now, o.json)
}

// writeBudgetUse prints budget counters as a table (or JSON lines): each
// budget, whom it counts, its use of the limit and when the window
// reopens.
func writeBudgetUse(w io.Writer, use []portcullis.BudgetUsage, now time.Time, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		for _, u := range use {
			if err := enc.Encode(u); err != nil {
				return err
			}
		}
		return nil
	}
	if len(use) == 0 {
		_, err := fmt.Fprintln(w, "No budget has been used in its current window.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BUDGET\tAGENT\tSESSION\tTOOL\tUSED\tLIMIT\tLEFT\tREOPENS")
	for _, u := range use {
		left := u.Limit - u.Used
		if left < 0 {
			left = 0
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s (in %s)\n", u.Budget, dash(u.Agent), dash(u.Session), dash(u.Tool),
			u.Used, u.Limit, left, u.End.UTC().Format(time.RFC3339), u.End.Sub(now).Round(time.Second))
	}
	return tw.Flush()
}
