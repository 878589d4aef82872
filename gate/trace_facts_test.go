package gate_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/memstore"
)

const traceFactsPolicy = `
version: 1
tools:
  search: {endpoint: READ}
  send_email: {endpoint: CREATE, risk: external-write}
validator:
  provider: command
  command: [judge]
elements:
  - name: bot
    type: agent
    autonomy: {riskTolerance: aggressive, maxAutonomousSteps: 5}
`

// TestTraceFacts checks that the stages record what programs read from a
// trace (policy replay does) as facts, not only as prose, and that the
// audit row keeps them: the upstream tool no server offers, one
// classified from its trusted upstream's pinned annotations, one an
// untrusted upstream's hints made stricter, one new since its upstream's
// tool set was pinned, one whose definition changed, a
// validator with no verdict, and the run step the store supplied.
func TestTraceFacts(t *testing.T) {
	ctx := context.Background()
	st := memstore.New(nil)
	g := mustGate(t, traceFactsPolicy, gate.WithStore(st),
		gate.WithValidator(&fakeValidator{verdict: portcullis.Verdict{FailClosed: true, Reasoning: "timeout"}}))
	type want struct {
		stage    string
		facts    []portcullis.Fact
		upstream string
		step     int
		also     map[string][]portcullis.Fact // other stages' facts
	}
	for _, tc := range []struct {
		name string
		call portcullis.Call
		want want
	}{
		{"no upstream offers it", portcullis.Call{Tool: "ghost", Session: "s", Upstream: &portcullis.UpstreamTool{Server: "fs"}},
			want{stage: "route", facts: []portcullis.Fact{portcullis.FactUpstreamMissing}}},
		{"classified by pinned annotations", portcullis.Call{Tool: "read_text", Session: "s", Upstream: &portcullis.UpstreamTool{Server: "fs", Offered: true, Annotated: true, Trusted: true, ReadOnly: true}},
			want{stage: "route", facts: []portcullis.Fact{portcullis.FactUpstreamAnnotated}, upstream: "fs"}},
		{"annotated and changed", portcullis.Call{Tool: "edit", Session: "s", Upstream: &portcullis.UpstreamTool{Server: "fs", Offered: true, Annotated: true, Trusted: true, Changed: true}},
			want{stage: "route", facts: []portcullis.Fact{portcullis.FactUpstreamAnnotated, portcullis.FactDefinitionChanged}, upstream: "fs"}},
		{"policy tool changed", portcullis.Call{Tool: "search", Session: "s", Upstream: &portcullis.UpstreamTool{Server: "fs", Offered: true, Annotated: true, Changed: true}},
			want{stage: "route", facts: []portcullis.Fact{portcullis.FactDefinitionChanged}}},
		{"a listed tool raised by destructiveHint", portcullis.Call{Tool: "search", Session: "s", Upstream: &portcullis.UpstreamTool{Server: "fs", Offered: true, Annotated: true, Destructive: true}},
			want{stage: "route", facts: []portcullis.Fact{portcullis.FactDestructiveHint}, upstream: "fs"}},
		{"an unlisted tool's openWorldHint, new since the set was pinned", portcullis.Call{Tool: "fetch_page", Session: "s", Upstream: &portcullis.UpstreamTool{Server: "web", Offered: true, Annotated: true, OpenWorld: true, ReadOnly: true, New: true}},
			// risk external-write puts it in the validator's scope, which has no verdict here
			want{stage: "route", facts: []portcullis.Fact{portcullis.FactToolNew, portcullis.FactOpenWorldHint}, upstream: "web",
				also: map[string][]portcullis.Fact{"validator": {portcullis.FactNoVerdict}}}},
		{"unclassified and changed", portcullis.Call{Tool: "mystery", Session: "s", Upstream: &portcullis.UpstreamTool{Server: "fs", Offered: true, Changed: true}},
			want{stage: "route", facts: []portcullis.Fact{portcullis.FactDefinitionChanged}}},
		{"validator gave no verdict", portcullis.Call{Tool: "send_email", Session: "s"},
			want{stage: "validator", facts: []portcullis.Fact{portcullis.FactNoVerdict}}},
		{"run's first step from the store", portcullis.Call{Tool: "search", Agent: "bot", Session: "s", Run: &portcullis.Run{ID: "r1"}},
			want{stage: "autonomy", facts: []portcullis.Fact{portcullis.FactRunStateFromStore}, step: 0}},
		{"run's second step from the store", portcullis.Call{Tool: "search", Agent: "bot", Session: "s", Run: &portcullis.Run{ID: "r1"}},
			want{stage: "autonomy", facts: []portcullis.Fact{portcullis.FactRunStateFromStore}, step: 1}},
		{"run step from the request", portcullis.Call{Tool: "search", Agent: "bot", Session: "s", Run: &portcullis.Run{Step: 2}},
			want{stage: "autonomy", step: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := g.Decide(ctx, tc.call)
			if err != nil {
				t.Fatal(err)
			}
			check := func(where string, trace []portcullis.TraceEntry) {
				t.Helper()
				i := slices.IndexFunc(trace, func(e portcullis.TraceEntry) bool { return e.Stage == tc.want.stage })
				if i < 0 {
					t.Fatalf("%s: no %s entry in %+v", where, tc.want.stage, trace)
				}
				e := trace[i]
				if !slices.Equal(e.Facts, tc.want.facts) || e.Upstream != tc.want.upstream || e.Step != tc.want.step {
					t.Errorf("%s: %s entry has facts %v, upstream %q, step %d; want %v, %q, %d (result %q)",
						where, e.Stage, e.Facts, e.Upstream, e.Step, tc.want.facts, tc.want.upstream, tc.want.step, e.Result)
				}
				for _, f := range tc.want.facts {
					if !e.Has(f) {
						t.Errorf("%s: Has(%s) = false", where, f)
					}
				}
				// Every entry of the stage carries them, and no other stage
				// does (but those named in also, with exactly those facts).
				for _, o := range trace {
					if o.Stage != tc.want.stage && !slices.Equal(o.Facts, tc.want.also[o.Stage]) {
						t.Errorf("%s: %s entry has facts %v", where, o.Stage, o.Facts)
					}
				}
			}
			check("decision", d.Trace)
			evs := auditRows(t, st)
			row := evs[len(evs)-1]
			if row.DecisionID != d.DecisionID || row.Decision == nil {
				t.Fatalf("last audit row is not the decision: %+v", row)
			}
			check("audit row", row.Decision.Trace)
		})
	}
}

// TestTraceFactsOmittedWhenNone checks that a trace entry with nothing to
// say keeps the contract's shape: no facts, upstream or step keys.
func TestTraceFactsOmittedWhenNone(t *testing.T) {
	g := mustGate(t, traceFactsPolicy)
	d, err := g.Decide(context.Background(), portcullis.Call{Tool: "search", Session: "s"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := d.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{`"facts"`, `"upstream"`, `"step"`} {
		if strings.Contains(string(b), k) {
			t.Errorf("decision JSON has %s: %s", k, b)
		}
	}
}

// TestTraceFactsAreTheDecisions checks that a caller changing its
// decision's facts does not change the next decision's.
func TestTraceFactsAreTheDecisions(t *testing.T) {
	g := mustGate(t, traceFactsPolicy)
	call := portcullis.Call{Tool: "ghost", Session: "s", Upstream: &portcullis.UpstreamTool{Server: "fs"}}
	for range 2 {
		d, err := g.Decide(context.Background(), call)
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Trace) == 0 || !slices.Equal(d.Trace[len(d.Trace)-1].Facts, []portcullis.Fact{portcullis.FactUpstreamMissing}) {
			t.Fatalf("trace %+v; want the route entry with fact %s", d.Trace, portcullis.FactUpstreamMissing)
		}
		d.Trace[len(d.Trace)-1].Facts[0] = "changed-by-the-caller"
	}
}
