package postgres

import (
	"context"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/portcullis/portcullis"
)

// TakeBudget checks and records the charges in one transaction. Each
// counter's row is created when missing and locked (SELECT ... FOR UPDATE)
// before it is read, in one order for every caller, so two replicas
// cannot both take the last unit and never wait on each other in a circle.
// A peek reads only.
func (s *Store) TakeBudget(ctx context.Context, charges []portcullis.BudgetCharge, mode portcullis.BudgetMode, now time.Time) (portcullis.BudgetResult, error) {
	if err := portcullis.CheckCharges(charges); err != nil {
		return portcullis.BudgetResult{}, err
	}
	res := portcullis.BudgetResult{Over: -1, Used: make([]portcullis.Amount, len(charges))}
	if mode == portcullis.BudgetPeek {
		for i := range charges {
			c := &charges[i]
			var used int64
			err := s.pool.QueryRow(ctx, `SELECT COALESCE((SELECT used FROM budget_use
				WHERE budget = $1 AND agent = $2 AND session = $3 AND tool = $4 AND window_start = $5), 0)`,
				c.Budget, c.Agent, c.Session, c.Tool, ts(c.Start)).Scan(&used)
			if err != nil {
				return portcullis.BudgetResult{}, s.fail("peek budget "+c.Budget, err)
			}
			addUse(&res, charges, i, portcullis.Amount(used))
		}
		return res, nil
	}
	order := make([]int, len(charges))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return portcullis.LessCharge(&charges[order[a]], &charges[order[b]]) })

	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return portcullis.BudgetResult{}, s.fail("take budget", err)
	}
	defer s.rollback(tx)
	used := make([]int64, len(charges))
	for _, i := range order {
		c := &charges[i]
		if _, err := tx.Exec(ctx, `INSERT INTO budget_use (budget, agent, session, tool, window_start, window_end, used, lim)
			VALUES ($1, $2, $3, $4, $5, $6, 0, $7) ON CONFLICT DO NOTHING`,
			c.Budget, c.Agent, c.Session, c.Tool, ts(c.Start), ts(c.End), int64(c.Limit)); err != nil {
			return portcullis.BudgetResult{}, s.fail("take budget "+c.Budget, err)
		}
		if err := tx.QueryRow(ctx, `SELECT used FROM budget_use
			WHERE budget = $1 AND agent = $2 AND session = $3 AND tool = $4 AND window_start = $5 FOR UPDATE`,
			c.Budget, c.Agent, c.Session, c.Tool, ts(c.Start)).Scan(&used[i]); err != nil {
			return portcullis.BudgetResult{}, s.fail("take budget "+c.Budget, err)
		}
	}
	for i := range charges {
		addUse(&res, charges, i, portcullis.Amount(used[i]))
	}
	if mode == portcullis.BudgetTakeIfFits && res.Over >= 0 {
		return res, nil // the rollback drops the rows this made
	}
	b := &pgx.Batch{}
	for _, i := range order {
		c := &charges[i]
		b.Queue(`UPDATE budget_use SET used = used + $6, lim = $7
			WHERE budget = $1 AND agent = $2 AND session = $3 AND tool = $4 AND window_start = $5`,
			c.Budget, c.Agent, c.Session, c.Tool, ts(c.Start), int64(c.Cost), int64(c.Limit))
		b.Queue(`DELETE FROM budget_use
			WHERE budget = $1 AND agent = $2 AND session = $3 AND tool = $4 AND window_end <= $5`,
			c.Budget, c.Agent, c.Session, c.Tool, ts(now))
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return portcullis.BudgetResult{}, s.fail("take budget", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return portcullis.BudgetResult{}, s.fail("take budget: commit", err)
	}
	res.Taken = true
	return res, nil
}

// addUse sets charge i's use (adding what earlier charges of the same call
// put on the same counter) and notes the first that does not fit.
func addUse(res *portcullis.BudgetResult, charges []portcullis.BudgetCharge, i int, used portcullis.Amount) {
	c := &charges[i]
	for j := range charges[:i] {
		if charges[j].SameCounter(c) {
			used += charges[j].Cost
		}
	}
	res.Used[i] = used
	if used+c.Cost > c.Limit && res.Over < 0 {
		res.Over = i
	}
}

// ReturnBudget gives back charges taken for a call not let through.
func (s *Store) ReturnBudget(ctx context.Context, charges []portcullis.BudgetCharge) error {
	if err := portcullis.CheckCharges(charges); err != nil {
		return err
	}
	b := &pgx.Batch{}
	for i := range charges {
		c := &charges[i]
		b.Queue(`UPDATE budget_use SET used = GREATEST(used - $6, 0)
			WHERE budget = $1 AND agent = $2 AND session = $3 AND tool = $4 AND window_start = $5`,
			c.Budget, c.Agent, c.Session, c.Tool, ts(c.Start), int64(c.Cost))
	}
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return s.fail("return budget", err)
	}
	return nil
}

// BudgetUse lists the counters whose window holds now.
func (s *Store) BudgetUse(ctx context.Context, now time.Time) ([]portcullis.BudgetUsage, error) {
	rows, err := s.pool.Query(ctx, `SELECT budget, agent, session, tool, window_start, window_end, used, lim
		FROM budget_use WHERE window_start <= $1 AND window_end > $1`, ts(now))
	if err != nil {
		return nil, s.fail("list budget use", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (portcullis.BudgetUsage, error) {
		var u portcullis.BudgetUsage
		var used, lim int64
		err := row.Scan(&u.Budget, &u.Agent, &u.Session, &u.Tool, &u.Start, &u.End, &used, &lim)
		u.Start, u.End, u.Used, u.Limit = u.Start.UTC(), u.End.UTC(), portcullis.Amount(used), portcullis.Amount(lim)
		return u, err
	})
	if err != nil {
		return nil, s.fail("list budget use", err)
	}
	portcullis.SortBudgetUsage(out)
	return out, nil
}
