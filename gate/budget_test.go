package gate_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/memstore"
	"github.com/portcullis/portcullis/policy"
	"github.com/portcullis/portcullis/storetest"
)

const budgetGatePolicy = `
version: 1
mode: %s
tools:
  send_email: {endpoint: CREATE, defaultLevel: AUTO_APPROVE}
  deploy: {endpoint: EXECUTE}
  payments.create: {endpoint: CREATE, defaultLevel: AUTO_APPROVE}
  list_things: {endpoint: READ}
budgets:
  - {name: email-rate, tools: [send_email], limit: 1, window: hour}
  - {name: deploys, tools: [deploy], limit: 1, window: day}
  - {name: payments, tools: [payments.create], cost: {arg: amount}, limit: 100, window: day}
`

// countingStore counts the budget operations that reach the store.
type countingStore struct {
	*memstore.Store
	takes int
}

func (s *countingStore) TakeBudget(ctx context.Context, cs []portcullis.BudgetCharge, m portcullis.BudgetMode, now time.Time) (portcullis.BudgetResult, error) {
	s.takes++
	return s.Store.TakeBudget(ctx, cs, m, now)
}

func budgetGate(t *testing.T, mode string) (*gate.Gate, *countingStore, *storetest.Clock) {
	t.Helper()
	pol, _, err := policy.Parse("budgets.yaml", []byte(fmt.Sprintf(budgetGatePolicy, mode)))
	if err != nil {
		t.Fatal(err)
	}
	clock := storetest.NewClock()
	st := &countingStore{Store: memstore.New(clock)}
	g, err := gate.New(pol, gate.WithStore(st), gate.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	return g, st, clock
}

func used(t *testing.T, st portcullis.Store, clock *storetest.Clock, budget string) portcullis.Amount {
	t.Helper()
	us, err := st.BudgetUse(context.Background(), clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	var n portcullis.Amount
	for _, u := range us {
		if u.Budget == budget {
			n += u.Used
		}
	}
	return n
}

// A call held for a person takes nothing; the same call decided again
// once the person approved it (the grant the approval recorded lets it
// through) is what counts.
func TestBudgetHeldCallCountsOnlyOnceApproved(t *testing.T) {
	ctx := context.Background()
	g, st, clock := budgetGate(t, "enforce")
	call := portcullis.Call{Tool: "deploy", Agent: "bot", Session: "s", Args: map[string]any{"env": "prod"}}
	d, err := g.Decide(ctx, call)
	if err != nil || d.Outcome != portcullis.OutcomeConfirm || d.ChallengeID == "" {
		t.Fatalf("Decide(deploy) = %s %s, %v; want confirm with an approval request", d.Outcome, d.ChallengeID, err)
	}
	if n := used(t, st, clock, "deploys"); n != 0 {
		t.Errorf("a held call used %s of its budget; want 0", n)
	}
	if _, err := g.Approve(ctx, d.ChallengeID, "alice", false); err != nil {
		t.Fatal(err)
	}
	d, err = g.Decide(ctx, call)
	if err != nil || !d.Allowed() {
		t.Fatalf("Decide(deploy, approved) = %s %s: %s, %v; want allow", d.Outcome, d.Code, d.Reason, err)
	}
	if n := used(t, st, clock, "deploys"); n != portcullis.Units(1) {
		t.Errorf("the approved call used %s of its budget; want 1", n)
	}
	// The budget is spent: the next deploy is refused before any person
	// is asked, and told when the day reopens.
	call.Args = map[string]any{"env": "staging"}
	d, _ = g.Decide(ctx, call)
	if d.Code != portcullis.CodeBudgetExceeded || d.Budget == nil || !d.Budget.ReopensAt.Equal(time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("Decide(second deploy) = %s %s %+v; want BUDGET_EXCEEDED reopening at midnight", d.Outcome, d.Code, d.Budget)
	}
}

// Explain and shadow mode look at budgets but never use them.
func TestBudgetDryRunsTakeNothing(t *testing.T) {
	ctx := context.Background()
	for _, mode := range []string{"enforce", "shadow"} {
		g, st, clock := budgetGate(t, mode)
		call := portcullis.Call{Tool: "send_email", Agent: "bot"}
		for range 3 {
			if _, err := g.Explain(ctx, call); err != nil {
				t.Fatal(err)
			}
		}
		if mode == "shadow" {
			for range 3 {
				if d, err := g.Decide(ctx, call); err != nil || !d.Allowed() {
					t.Fatalf("shadow Decide = %s, %v; want allow", d.Outcome, err)
				}
			}
		}
		if n := used(t, st, clock, "email-rate"); n != 0 {
			t.Errorf("%s: explain (and shadow) used %s of the budget; want 0", mode, n)
		}
		d, err := g.Explain(ctx, call)
		if err != nil || !slices.ContainsFunc(d.Trace, func(e portcullis.TraceEntry) bool { return e.Stage == "budget" && e.Has(portcullis.FactBudgetTaken) }) {
			t.Errorf("%s: Explain trace = %+v; want a budget entry", mode, d.Trace)
		}
	}
}

// A cost that is not a number of 0 or more is refused however it came:
// NaN and infinities from a decoder that makes floats, too.
func TestBudgetRefusesBadCosts(t *testing.T) {
	ctx := context.Background()
	g, st, clock := budgetGate(t, "enforce")
	for _, v := range []any{math.NaN(), math.Inf(1), math.Inf(-1), -0.5, "12", nil, true, []any{1}, map[string]any{"v": 1}, 1e15} {
		d, err := g.Decide(ctx, portcullis.Call{Tool: "payments.create", Agent: "bot", Args: map[string]any{"amount": v}})
		if err != nil || d.Outcome != portcullis.OutcomeDeny || d.Code != portcullis.CodeBudgetCostInvalid || d.FailClosed {
			t.Errorf("Decide(amount %v) = %s %s (failClosed %v): %s; want deny BUDGET_COST_INVALID", v, d.Outcome, d.Code, d.FailClosed, d.Reason)
		}
	}
	if n := used(t, st, clock, "payments"); n != 0 {
		t.Errorf("refused costs used %s; want 0", n)
	}
	for _, v := range []any{float64(40), int64(40), 19.75} {
		if d, _ := g.Decide(ctx, portcullis.Call{Tool: "payments.create", Agent: "bot", Args: map[string]any{"amount": v}}); !d.Allowed() {
			t.Errorf("Decide(amount %v) = %s %s: %s; want allow", v, d.Outcome, d.Code, d.Reason)
		}
	}
	if n := used(t, st, clock, "payments"); n != portcullis.Amount(99_750_000) {
		t.Errorf("payments used %s; want 99.75", n)
	}
}

// A call no budget counts never reaches the budget store, and its trace
// has no budget entry.
func TestBudgetNotOnOtherCalls(t *testing.T) {
	g, st, _ := budgetGate(t, "enforce")
	d, err := g.Decide(context.Background(), portcullis.Call{Tool: "list_things", Agent: "bot"})
	if err != nil || !d.Allowed() {
		t.Fatalf("Decide(list_things) = %s, %v", d.Outcome, err)
	}
	if st.takes != 0 || slices.ContainsFunc(d.Trace, func(e portcullis.TraceEntry) bool { return e.Stage == "budget" }) {
		t.Errorf("a call no budget counts: %d budget takes, trace %+v; want none", st.takes, d.Trace)
	}
}
