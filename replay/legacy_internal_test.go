package replay

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/portcullis/portcullis"
)

// TestLegacyTraceFacts checks that a row written before trace entries
// carried facts is read from its prose, as the gate wrote it then.
func TestLegacyTraceFacts(t *testing.T) {
	for _, tc := range []struct {
		entry portcullis.TraceEntry
		d     portcullis.Decision
		want  *portcullis.UpstreamTool
	}{
		{portcullis.TraceEntry{Stage: "route", Result: `no upstream server offers a tool named "x"`}, portcullis.Decision{}, &portcullis.UpstreamTool{}},
		{portcullis.TraceEntry{Stage: "route", Result: `w: DELETE, base level CONFIRM_SINGLE_USE, not elevatable (MCP annotations of upstream "a \"b\"", pinned)`}, portcullis.Decision{Endpoint: portcullis.Delete},
			&portcullis.UpstreamTool{Server: `a "b"`, Offered: true, Annotated: true, Trusted: true, Destructive: true}},
		{portcullis.TraceEntry{Stage: "route", Result: `w: UPDATE, base level CONFIRM_SINGLE_USE, risk external-write (MCP annotations of upstream "s", pinned); its definition changed since it was pinned: CONFIRM_SINGLE_USE, not elevatable, until a person accepts the change (portcullis tools accept)`},
			portcullis.Decision{Endpoint: portcullis.Update, Risk: portcullis.RiskExternalWrite},
			&portcullis.UpstreamTool{Server: "s", Offered: true, Annotated: true, Trusted: true, OpenWorld: true, Changed: true}},
		{portcullis.TraceEntry{Stage: "route", Result: `search: READ, base level AUTO_APPROVE; its definition changed since it was pinned: CONFIRM_SINGLE_USE, not elevatable, until a person accepts the change (portcullis tools accept)`},
			portcullis.Decision{}, &portcullis.UpstreamTool{Offered: true, Changed: true}},
		{portcullis.TraceEntry{Stage: "route", Result: `w: READ, base level AUTO_APPROVE (policy tools entry)`}, portcullis.Decision{}, nil},
	} {
		trace := []portcullis.TraceEntry{tc.entry}
		legacyTraceFacts(trace)
		if got := upstreamFromTrace(trace[0], tc.d.Endpoint, tc.d.Risk); !cmp.Equal(got, tc.want) {
			t.Errorf("old row %q: upstream %+v; want %+v", tc.entry.Result, got, tc.want)
		}
	}
	// Rows with facts: the hints that made a tool stricter and a tool new
	// since its upstream's set was pinned are read from the facts alone.
	for _, tc := range []struct {
		entry portcullis.TraceEntry
		d     portcullis.Decision
		want  *portcullis.UpstreamTool
	}{
		{portcullis.TraceEntry{Stage: "route", Result: "reworded", Upstream: "fs", Facts: []portcullis.Fact{portcullis.FactDestructiveHint}},
			portcullis.Decision{Endpoint: portcullis.Read}, &portcullis.UpstreamTool{Server: "fs", Offered: true, Annotated: true, Destructive: true}},
		{portcullis.TraceEntry{Stage: "route", Result: "reworded", Upstream: "web", Facts: []portcullis.Fact{portcullis.FactOpenWorldHint, portcullis.FactToolNew}},
			portcullis.Decision{}, &portcullis.UpstreamTool{Server: "web", Offered: true, Annotated: true, OpenWorld: true, New: true}},
		{portcullis.TraceEntry{Stage: "route", Result: "reworded", Upstream: "s", Facts: []portcullis.Fact{portcullis.FactUpstreamAnnotated}},
			portcullis.Decision{Endpoint: portcullis.Delete}, &portcullis.UpstreamTool{Server: "s", Offered: true, Annotated: true, Trusted: true, Destructive: true}},
		{portcullis.TraceEntry{Stage: "route", Result: "reworded", Facts: []portcullis.Fact{portcullis.FactToolNew}},
			portcullis.Decision{}, &portcullis.UpstreamTool{Offered: true, New: true}},
	} {
		if got := upstreamFromTrace(tc.entry, tc.d.Endpoint, tc.d.Risk); !cmp.Equal(got, tc.want) {
			t.Errorf("row with facts %v: upstream %+v; want %+v", tc.entry.Facts, got, tc.want)
		}
	}
	trace := []portcullis.TraceEntry{
		{Stage: "autonomy", Result: "pause: the run has taken 3 steps of 3 (step 3 (run state from the store), risk 0.2, tier advisory)"},
		{Stage: "validator", Result: "no verdict (timeout): fail closed"},
	}
	legacyTraceFacts(trace)
	if !trace[0].Has(portcullis.FactRunStateFromStore) || trace[0].Step != 3 {
		t.Errorf("old autonomy entry read as %+v; want step 3 from the store", trace[0])
	}
	if !validatorFailed(trace) {
		t.Errorf("old validator entry %q not read as no verdict", trace[1].Result)
	}
	if !slices.Equal(redactedArgs(map[string]any{"a": portcullis.RedactedValue, "b": "x", "c": portcullis.RedactedValue}), []string{"a", "c"}) {
		t.Errorf("redactedArgs does not name both redacted arguments")
	}
}
