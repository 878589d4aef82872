package gate_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/memstore"
)

// seen is what an observer kept of one decision (it may not keep the
// event itself).
type seen struct {
	ID, Tool, Stage, Hash string
	Outcome               portcullis.Outcome
	PolicyTool, Explain   bool
	Stages                []string
	Err                   bool
}

type recorder struct{ got []seen }

func (r *recorder) ObserveDecision(_ context.Context, ev *portcullis.DecisionEvent) {
	s := seen{ID: ev.Decision.DecisionID, Tool: ev.Decision.Tool, Stage: ev.DecidingStage(), Hash: ev.PolicyHash,
		Outcome: ev.Decision.Outcome, PolicyTool: ev.PolicyTool, Explain: ev.Explain, Err: ev.Err != nil}
	var total int64
	for _, st := range ev.Stages {
		s.Stages = append(s.Stages, st.Stage)
		total += int64(st.Duration)
	}
	if total > int64(ev.Duration) {
		panic("the stages took longer than the decision")
	}
	r.got = append(r.got, s)
}

const observedPolicy = `
version: 1
tools:
  list_elements:  {endpoint: READ}
  delete_element: {endpoint: DELETE, canBeElevated: false}
  edit_element:   {endpoint: UPDATE}
elements:
  - name: Guard
    type: persona
    active: true
    gatekeeper: {deny: [edit_element]}
`

func TestObserverSeesEveryDecision(t *testing.T) {
	ctx := context.Background()
	r := &recorder{}
	st := memstore.New(nil)
	g := mustGate(t, observedPolicy, gate.WithStore(st), gate.WithObserver(r), gate.WithObserver(nil))
	hash := g.Policy().Hash
	var ids []string
	for _, c := range []portcullis.Call{
		{Tool: "list_elements", Session: "s1", Agent: "a"},
		{Tool: "edit_element", Session: "s1", Agent: "a"},
		{Tool: "delete_element", Session: "s1", Agent: "a"},
		{Tool: "invented_tool", Session: "s1", Agent: "a"},
		{Tool: ""},
	} {
		d, _ := g.Decide(ctx, c)
		ids = append(ids, d.DecisionID)
	}
	d, err := g.Explain(ctx, portcullis.Call{Tool: "list_elements"})
	if err != nil {
		t.Fatal(err)
	}
	ids = append(ids, d.DecisionID)

	want := []seen{
		{ID: ids[0], Tool: "list_elements", Stage: "elements", Hash: hash, Outcome: portcullis.OutcomeAllow, PolicyTool: true,
			Stages: []string{"mode", "danger_zone", "route", "elements", "audit"}},
		{ID: ids[1], Tool: "edit_element", Stage: "elements", Hash: hash, Outcome: portcullis.OutcomeDeny, PolicyTool: true,
			Stages: []string{"mode", "danger_zone", "route", "elements", "retry_guard", "audit"}},
		{ID: ids[2], Tool: "delete_element", Stage: "confirmation", Hash: hash, Outcome: portcullis.OutcomeConfirm, PolicyTool: true,
			Stages: []string{"mode", "danger_zone", "route", "elements", "confirmation", "audit"}},
		{ID: ids[3], Tool: "invented_tool", Stage: "confirmation", Hash: hash, Outcome: portcullis.OutcomeConfirm,
			Stages: []string{"mode", "danger_zone", "route", "elements", "confirmation", "audit"}},
		{ID: ids[4], Stage: "request", Hash: hash, Outcome: portcullis.OutcomeDeny, Stages: []string{"request"}, Err: true},
		{ID: ids[5], Tool: "list_elements", Stage: "elements", Hash: hash, Outcome: portcullis.OutcomeAllow, PolicyTool: true, Explain: true,
			Stages: []string{"mode", "danger_zone", "route", "elements"}},
	}
	if diff := cmp.Diff(want, r.got); diff != "" {
		t.Errorf("observed decisions (-want +got):\n%s", diff)
	}
}

func TestObserverModeOff(t *testing.T) {
	r := &recorder{}
	g := mustGate(t, "version: 1\nmode: off\n", gate.WithObserver(r))
	if _, err := g.Decide(context.Background(), portcullis.Call{Tool: "anything"}); err != nil {
		t.Fatal(err)
	}
	want := []seen{{ID: r.got[0].ID, Tool: "anything", Stage: "mode", Hash: g.Policy().Hash, Outcome: portcullis.OutcomeAllow, Stages: []string{"mode"}}}
	if diff := cmp.Diff(want, r.got); diff != "" {
		t.Errorf("observed decisions (-want +got):\n%s", diff)
	}
}

type nopObserver struct{}

func (nopObserver) ObserveDecision(context.Context, *portcullis.DecisionEvent) {}

// TestObserverAllocatesNothing: observing a decision costs no allocation
// beyond the decision's own.
func TestObserverAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	call := portcullis.Call{Tool: "edit_element", Session: "s1", Args: map[string]any{"name": "x"}}
	plain, err := gate.New(benchPolicy(20))
	if err != nil {
		t.Fatal(err)
	}
	observed, err := gate.New(benchPolicy(20), gate.WithObserver(nopObserver{}))
	if err != nil {
		t.Fatal(err)
	}
	decide := func(g *gate.Gate) func() {
		return func() {
			if _, err := g.Decide(ctx, call); err != nil {
				t.Fatal(err)
			}
		}
	}
	a, b := testing.AllocsPerRun(200, decide(plain)), testing.AllocsPerRun(200, decide(observed))
	if b > a {
		t.Errorf("Decide allocates %v times with an observer, %v without; want no more", b, a)
	}
}

// BenchmarkDecideObserved is BenchmarkDecide with an observer that does
// nothing: the difference is what timing the stages costs.
func BenchmarkDecideObserved(b *testing.B) {
	g, err := gate.New(benchPolicy(200), gate.WithObserver(nopObserver{}))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	call := portcullis.Call{Tool: "edit_element", Session: "s1", Args: map[string]any{"name": "x"}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := g.Decide(ctx, call); err != nil {
			b.Fatal(err)
		}
	}
}
