package sqlite

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/portcullis/portcullis"
)

// budgetUsed is a counter's use in its window; no row is 0.
const budgetUsed = `SELECT COALESCE((SELECT used FROM budget_use
	WHERE budget = ? AND agent = ? AND session = ? AND tool = ? AND window_start = ?), 0)`

// TakeBudget checks and records the charges in one BEGIN IMMEDIATE
// transaction, so a window never holds more than its limit across
// goroutines and processes. A peek reads only.
func (s *Store) TakeBudget(ctx context.Context, charges []portcullis.BudgetCharge, mode portcullis.BudgetMode, now time.Time) (portcullis.BudgetResult, error) {
	if err := portcullis.CheckCharges(charges); err != nil {
		return portcullis.BudgetResult{}, err
	}
	if mode == portcullis.BudgetPeek {
		if err := s.read(ctx, "peek budget"); err != nil {
			return portcullis.BudgetResult{}, err
		}
		res, err := checkCharges(ctx, s.rdb, charges)
		if err != nil {
			return portcullis.BudgetResult{}, fmt.Errorf("sqlite: peek budget: %w", err)
		}
		return res, nil
	}
	var res portcullis.BudgetResult
	err := s.write(ctx, "take budget", func(t *tx) error {
		var err error
		if res, err = checkCharges(ctx, t, charges); err != nil {
			return err
		}
		if mode == portcullis.BudgetTakeIfFits && res.Over >= 0 {
			return nil
		}
		for i := range charges {
			c := &charges[i]
			if _, err := t.ExecContext(ctx, `DELETE FROM budget_use
				WHERE budget = ? AND agent = ? AND session = ? AND tool = ? AND window_end <= ?`,
				c.Budget, c.Agent, c.Session, c.Tool, nanos(now)); err != nil {
				return fmt.Errorf("drop ended windows: %w", err)
			}
			if _, err := t.ExecContext(ctx, `INSERT INTO budget_use (budget, agent, session, tool, window_start, window_end, used, lim)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?)
				ON CONFLICT (budget, agent, session, tool, window_start)
				DO UPDATE SET used = used + excluded.used, lim = excluded.lim`,
				c.Budget, c.Agent, c.Session, c.Tool, nanos(c.Start), nanos(c.End), int64(c.Cost), int64(c.Limit)); err != nil {
				return fmt.Errorf("record use of budget %q: %w", c.Budget, err)
			}
		}
		res.Taken = true
		return nil
	})
	if err != nil {
		return portcullis.BudgetResult{}, err
	}
	return res, nil
}

// checkCharges reads each charge's use and finds the first that does not
// fit; charges of one call to the same counter add up.
func checkCharges(ctx context.Context, q queryer, charges []portcullis.BudgetCharge) (portcullis.BudgetResult, error) {
	res := portcullis.BudgetResult{Over: -1, Used: make([]portcullis.Amount, len(charges))}
	for i := range charges {
		c := &charges[i]
		var used int64
		if err := q.QueryRowContext(ctx, budgetUsed, c.Budget, c.Agent, c.Session, c.Tool, nanos(c.Start)).Scan(&used); err != nil {
			return res, fmt.Errorf("read use of budget %q: %w", c.Budget, err)
		}
		u := portcullis.Amount(used)
		for j := range charges[:i] {
			if charges[j].SameCounter(c) {
				u += charges[j].Cost
			}
		}
		res.Used[i] = u
		if u+c.Cost > c.Limit && res.Over < 0 {
			res.Over = i
		}
	}
	return res, nil
}

// ReturnBudget gives back charges taken for a call not let through.
func (s *Store) ReturnBudget(ctx context.Context, charges []portcullis.BudgetCharge) error {
	if err := portcullis.CheckCharges(charges); err != nil {
		return err
	}
	return s.write(ctx, "return budget", func(t *tx) error {
		for i := range charges {
			c := &charges[i]
			if _, err := t.ExecContext(ctx, `UPDATE budget_use SET used = MAX(used - ?, 0)
				WHERE budget = ? AND agent = ? AND session = ? AND tool = ? AND window_start = ?`,
				int64(c.Cost), c.Budget, c.Agent, c.Session, c.Tool, nanos(c.Start)); err != nil {
				return fmt.Errorf("give back use of budget %q: %w", c.Budget, err)
			}
		}
		return nil
	})
}

// BudgetUse lists the counters whose window holds now.
func (s *Store) BudgetUse(ctx context.Context, now time.Time) ([]portcullis.BudgetUsage, error) {
	if err := s.read(ctx, "list budget use"); err != nil {
		return nil, err
	}
	n := nanos(now)
	rows, err := s.rdb.QueryContext(ctx, `SELECT budget, agent, session, tool, window_start, window_end, used, lim
		FROM budget_use WHERE window_start <= ? AND window_end > ?`, n, n)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list budget use: %w", err)
	}
	defer rows.Close()
	var out []portcullis.BudgetUsage
	for rows.Next() {
		var u portcullis.BudgetUsage
		var start, end, used, lim int64
		if err := rows.Scan(&u.Budget, &u.Agent, &u.Session, &u.Tool, &start, &end, &used, &lim); err != nil {
			return nil, fmt.Errorf("sqlite: list budget use: %w", err)
		}
		u.Start, u.End, u.Used, u.Limit = fromNanos(start), fromNanos(end), portcullis.Amount(used), portcullis.Amount(lim)
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list budget use: %w", err)
	}
	portcullis.SortBudgetUsage(out)
	return slices.Clip(out), nil
}
