// Package budgets shows people the use of the policy's budgets: what each
// counter (a budget, and the agent, session or tool it counts) has used
// of its limit in its current window, and when that window reopens, as
// `portcullis budgets` prints it. It reads the counters from a store,
// where every replica's calls count, and imports only the root package.
package budgets

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/portcullis/portcullis"
)

// Reader is what Use reads the counters from. Every portcullis.Store is
// one.
type Reader interface {
	BudgetUse(ctx context.Context, now time.Time) ([]portcullis.BudgetUsage, error)
}

// Use returns the counters whose window holds now, of the budgets names
// names (every budget when names is empty), as the store orders them.
func Use(ctx context.Context, r Reader, now time.Time, names []string) ([]portcullis.BudgetUsage, error) {
	use, err := r.BudgetUse(ctx, now)
	if err != nil || len(names) == 0 {
		return use, err
	}
	return slices.DeleteFunc(use, func(u portcullis.BudgetUsage) bool { return !slices.Contains(names, u.Budget) }), nil
}

// Write writes counters as a table, or as one JSON object a line: each
// budget, whom it counts, its use of the limit, what is left and when the
// window reopens (in UTC, and how long from now).
func Write(w io.Writer, use []portcullis.BudgetUsage, now time.Time, asJSON bool) error {
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
		left := max(u.Limit-u.Used, 0)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s (in %s)\n", u.Budget, dash(u.Agent), dash(u.Session), dash(u.Tool),
			u.Used, u.Limit, left, u.End.UTC().Format(time.RFC3339), u.End.Sub(now).Round(time.Second))
	}
	return tw.Flush()
}

// dash shows an empty cell as "-".
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
