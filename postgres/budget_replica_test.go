package postgres_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/policy"
	"github.com/portcullis/portcullis/storetest"
)

const budgetPolicy = `
version: 1
tools:
  payments.create: {endpoint: CREATE, defaultLevel: AUTO_APPROVE}
budgets:
  - name: payments
    tools: [payments.create]
    cost: {arg: amount}
    limit: 500
    window: day
    by: agent
`

// Two gateways, each with its own gate and its own pool on one database,
// decide payments of one agent at once: the spend cap holds exactly — no
// two replicas both take the last unit — and only the calls let through
// are counted.
func TestReplicasKeepTheBudget(t *testing.T) {
	dsn := testDSN(t)
	t.Parallel()
	ctx := context.Background()
	schema := freshSchema(t)
	clock := storetest.NewClock()
	pol, _, err := policy.Parse("budget.yaml", []byte(budgetPolicy))
	if err != nil {
		t.Fatal(err)
	}
	var gates []*gate.Gate
	for range 2 {
		g, err := gate.New(pol, gate.WithStore(openStore(t, dsn, schema, clock)), gate.WithClock(clock))
		if err != nil {
			t.Fatal(err)
		}
		gates = append(gates, g)
	}
	const callers = 60 // 60 payments of 10 against a cap of 500: 50 fit
	var allowed, over atomic.Int32
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := gates[i%2].Decide(ctx, portcullis.Call{Tool: "payments.create", Agent: "buyer", Session: "s", Args: map[string]any{"amount": 10, "n": i}})
			if err != nil {
				t.Error(err)
				return
			}
			switch {
			case d.Allowed():
				allowed.Add(1)
			case d.Code == portcullis.CodeBudgetExceeded:
				over.Add(1)
			default:
				t.Errorf("Decide(payment %d) = %s %s: %s; want allow or BUDGET_EXCEEDED", i, d.Outcome, d.Code, d.Reason)
			}
		}()
	}
	wg.Wait()
	if a, o := allowed.Load(), over.Load(); a != 50 || o != callers-50 {
		t.Errorf("%d payments of 10 over two gateways, cap 500: %d allowed, %d over; want exactly 50 and %d", callers, a, o, callers-50)
	}
	st := openStore(t, dsn, schema, clock)
	use, err := st.BudgetUse(ctx, clock.Now())
	if err != nil || len(use) != 1 || use[0].Used != portcullis.Units(500) || use[0].Agent != "buyer" {
		t.Errorf("BudgetUse = %+v, %v; want buyer at 500", use, err)
	}
	// The next day reopens the cap, on either replica.
	clock.Advance(24 * time.Hour)
	d, err := gates[1].Decide(ctx, portcullis.Call{Tool: "payments.create", Agent: "buyer", Args: map[string]any{"amount": 500}})
	if err != nil || !d.Allowed() {
		t.Errorf("Decide(the next day) = %s %s: %s, %v; want allow", d.Outcome, d.Code, d.Reason, err)
	}
}
