package gate_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/memstore"
)

// benchPolicy builds a policy with the given number of tools and 20 active
// elements of 50 patterns each (40 exact names and 10 globs per element,
// spread over deny, confirm and allow).
func benchPolicy(tools int) *portcullis.Policy {
	p := &portcullis.Policy{Version: 1, Mode: portcullis.ModeEnforce, UnknownTools: portcullis.UnknownConfirm}
	endpoints := portcullis.Endpoints
	for i := range tools {
		p.Tools = append(p.Tools, portcullis.ToolPolicy{
			Name:          fmt.Sprintf("tool_%d", i),
			Endpoint:      endpoints[i%len(endpoints)],
			CanBeElevated: true,
		})
	}
	p.Tools = append(p.Tools,
		portcullis.ToolPolicy{Name: "list_elements", Endpoint: portcullis.Read, CanBeElevated: true},
		portcullis.ToolPolicy{Name: "edit_element", Endpoint: portcullis.Update, CanBeElevated: true},
		portcullis.ToolPolicy{Name: "delete_element", Endpoint: portcullis.Delete, CanBeElevated: false},
	)
	for e := range 20 {
		var gk portcullis.GatekeeperPolicy
		for k := range 40 {
			name := fmt.Sprintf("op_%d_%d", e, k)
			switch k % 3 {
			case 0:
				gk.Deny = append(gk.Deny, name)
			case 1:
				gk.Confirm = append(gk.Confirm, name)
			default:
				gk.Allow = append(gk.Allow, name)
			}
		}
		for k := range 10 {
			gk.Confirm = append(gk.Confirm, fmt.Sprintf("glob_%d_%d_*", e, k))
		}
		if e == 7 {
			gk.Allow = append(gk.Allow, "edit_*")
		}
		p.Elements = append(p.Elements, portcullis.Element{
			Name: fmt.Sprintf("element-%d", e), Type: portcullis.Skill, Active: true, Gatekeeper: gk,
		})
	}
	return p
}

func benchDecide(b *testing.B, p *portcullis.Policy, call portcullis.Call, want portcullis.Outcome) {
	g, err := gate.New(p)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	d, err := g.Decide(ctx, call)
	if err != nil || d.Outcome != want {
		b.Fatalf("Decide(%s) = %s, %v; want %s", call.Tool, d.Outcome, err, want)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := g.Decide(ctx, call); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecide is the deterministic path: 20 active elements of 50
// patterns each; the call is auto-approved by one element's allow glob.
func BenchmarkDecide(b *testing.B) {
	benchDecide(b, benchPolicy(200), portcullis.Call{Tool: "edit_element", Session: "s1", Args: map[string]any{"name": "x"}}, portcullis.OutcomeAllow)
}

// BenchmarkDecideDeny is an element deny with the reason and trace it builds.
func BenchmarkDecideDeny(b *testing.B) {
	benchDecide(b, benchPolicy(200), portcullis.Call{Tool: "op_3_0"}, portcullis.OutcomeDeny)
}

// BenchmarkDecideConfirm is a call that needs a person, with no store.
func BenchmarkDecideConfirm(b *testing.B) {
	benchDecide(b, benchPolicy(200), portcullis.Call{Tool: "delete_element"}, portcullis.OutcomeConfirm)
}

// BenchmarkDecideTools shows the cost does not grow with the number of
// tools in the policy.
func BenchmarkDecideTools(b *testing.B) {
	for _, n := range []int{10, 1000, 100000} {
		p := benchPolicy(n)
		b.Run(fmt.Sprintf("tools=%d", n), func(b *testing.B) {
			benchDecide(b, p, portcullis.Call{Tool: "tool_5", Session: "s1"}, portcullis.OutcomeAllow)
		})
	}
}

// BenchmarkDecideUncached decides a different tool name every time, so the
// per-name match cache never hits: every pattern is matched afresh. The
// names share their first letter with every glob of the policy, so no glob
// is skipped by the index.
func BenchmarkDecideUncached(b *testing.B) {
	g, err := gate.New(benchPolicy(200))
	if err != nil {
		b.Fatal(err)
	}
	names := make([]string, 1<<17) // more than the cache holds
	for i := range names {
		names[i] = fmt.Sprintf("gadget_%d", i)
	}
	ctx := context.Background()
	// Fill the cache so the timed loop measures the uncached path.
	for _, n := range names[:1<<16] {
		if _, err := g.Decide(ctx, portcullis.Call{Tool: n}); err != nil {
			b.Fatal(err)
		}
	}
	rest := names[1<<16:]
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := g.Decide(ctx, portcullis.Call{Tool: rest[i%len(rest)]}); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkDecideAutonomous is BenchmarkDecide as a step of an autonomous
// run: the difference is what the autonomy stage adds to a decision.
func BenchmarkDecideAutonomous(b *testing.B) {
	p := benchPolicy(200)
	p.Elements = append(p.Elements, portcullis.Element{Name: "bot", Type: portcullis.Agent, Active: true,
		Autonomy: &portcullis.Autonomy{RiskTolerance: portcullis.Aggressive, MaxAutonomousSteps: 0, RequiresApproval: []string{"*production*", "*delete*"}}})
	benchDecide(b, p, portcullis.Call{Tool: "edit_element", Session: "s1", Agent: "bot", Args: map[string]any{"name": "x"}, Run: &portcullis.Run{ID: "r1"}}, portcullis.OutcomeAllow)
}

// BenchmarkDecideBudgets is BenchmarkDecide's call under a policy with no
// budgets, with ten budgets on other tools, and with one that counts it
// (in a memstore, the limit never reached): a call no budget names costs
// what it did before budgets existed, and never reaches the store.
func BenchmarkDecideBudgets(b *testing.B) {
	call := portcullis.Call{Tool: "edit_element", Session: "s1", Agent: "bot", Args: map[string]any{"name": "x"}}
	withBudgets := func(tools ...string) *portcullis.Policy {
		p := benchPolicy(200)
		for i, t := range tools {
			p.Budgets = append(p.Budgets, portcullis.Budget{Name: fmt.Sprintf("b%d", i), Tools: []string{t},
				Limit: portcullis.MaxAmount, Window: time.Hour, Over: portcullis.BudgetDeny})
		}
		return p
	}
	var others []string
	for i := range 10 {
		others = append(others, fmt.Sprintf("tool_%d", i), fmt.Sprintf("glob_%d_*", i))
	}
	b.Run("none", func(b *testing.B) { benchDecide(b, benchPolicy(200), call, portcullis.OutcomeAllow) })
	b.Run("other-tools", func(b *testing.B) { benchDecide(b, withBudgets(others[:10]...), call, portcullis.OutcomeAllow) })
	b.Run("other-tools-store", func(b *testing.B) {
		benchDecideStore(b, withBudgets(others[:10]...), call)
	})
	b.Run("applies-store", func(b *testing.B) { benchDecideStore(b, withBudgets("edit_element"), call) })
}

// benchDecideStore decides with a memstore for budgets only (no audit
// rows, no grants), so the figure is the budget stage's own.
func benchDecideStore(b *testing.B, p *portcullis.Policy, call portcullis.Call) {
	st := &countingStore{Store: memstore.New(nil)}
	g, err := gate.New(p, gate.WithBudgetStore(st))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if d, err := g.Decide(ctx, call); err != nil || !d.Allowed() {
			b.Fatalf("Decide = %s, %v", d.Outcome, err)
		}
	}
	applies := len(p.Budgets) == 1
	if (st.takes > 0) != applies {
		b.Fatalf("%d budget takes; want them only when a budget names the call", st.takes)
	}
}
