package gate_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/memstore"
)

const auditPolicy = `
version: 1
tools:
  list_elements: {endpoint: READ}
  login: {endpoint: EXECUTE, redact: [password]}
  delete_element: {endpoint: DELETE}
audit:
  redact: [token]
elements:
  - name: Guard
    type: persona
    gatekeeper: {deny: [delete_*]}
`

func auditRows(t *testing.T, st portcullis.Store) []portcullis.AuditEvent {
	t.Helper()
	recs, err := st.QueryAudit(context.Background(), portcullis.AuditQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var evs []portcullis.AuditEvent
	for _, r := range recs {
		ev, err := r.Event()
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	return evs
}

func TestEveryDecisionIsAudited(t *testing.T) {
	ctx := context.Background()
	st := memstore.New(nil)
	g := mustGate(t, auditPolicy, gate.WithStore(st))
	calls := []portcullis.Call{
		{Tool: "list_elements", Session: "s1", Agent: "bot", UserPresent: true},
		{Tool: "login", Session: "s1", Args: map[string]any{"user": "ana", "password": "hunter2", "token": "t0k"}},
		{Tool: "delete_element", Session: "s2"},
	}
	var ds []portcullis.Decision
	for _, c := range calls {
		ds = append(ds, decide(t, g, c))
	}
	evs := auditRows(t, st)
	if len(evs) != len(calls) {
		t.Fatalf("%d audit rows for %d decisions", len(evs), len(calls))
	}
	for i, ev := range evs {
		d := ds[i]
		if ev.Kind != portcullis.AuditDecision || ev.DecisionID != d.DecisionID || ev.Outcome != d.Outcome || ev.Tool != d.Tool || ev.Session != calls[i].Session {
			t.Errorf("row %d = %+v; want the decision %s (%s %s)", i+1, ev, d.DecisionID, d.Outcome, d.Tool)
		}
		if ev.Decision == nil || len(ev.Decision.Trace) == 0 || ev.PolicyHash == "" || ev.LatencyNS <= 0 {
			t.Errorf("row %d lacks the trace, policy hash or latency: %+v", i+1, ev)
		}
		if last := d.Trace[len(d.Trace)-1]; last.Stage != "audit" || !strings.HasPrefix(last.Result, "recorded as row ") {
			t.Errorf("decision %d's last trace entry = %+v; want the audit stage", i+1, last)
		}
	}
	if !evs[0].UserPresent || evs[0].Agent != "bot" {
		t.Errorf("row 1 = %+v; want user present, agent bot", evs[0])
	}
	args := evs[1].Request.Args
	if args["password"] != portcullis.RedactedValue || args["token"] != portcullis.RedactedValue || args["user"] != "ana" {
		t.Errorf("row 2 arguments = %v; want password and token redacted, user kept", args)
	}
	b, _ := json.Marshal(evs)
	if strings.Contains(string(b), "hunter2") || strings.Contains(string(b), "t0k") {
		t.Fatalf("a redacted value reached the audit log: %s", b)
	}
	// The caller's call is untouched by redaction.
	if calls[1].Args["password"] != "hunter2" {
		t.Fatal("redaction changed the caller's arguments")
	}
	v, err := portcullis.VerifyAudit(ctx, st, nil)
	if err != nil || !v.OK() || v.Rows != 3 {
		t.Fatalf("VerifyAudit = %+v, %v", v, err)
	}
}

func TestExplainAndOffModeWriteNoAuditRow(t *testing.T) {
	st := memstore.New(nil)
	g := mustGate(t, auditPolicy, gate.WithStore(st))
	if _, err := g.Explain(context.Background(), portcullis.Call{Tool: "list_elements"}); err != nil {
		t.Fatal(err)
	}
	if n := len(auditRows(t, st)); n != 0 {
		t.Fatalf("Explain wrote %d audit rows; want 0", n)
	}
	off := mustGate(t, strings.Replace(auditPolicy, "version: 1", "version: 1\nmode: off", 1), gate.WithStore(st))
	decide(t, off, portcullis.Call{Tool: "delete_element"})
	if n := len(auditRows(t, st)); n != 0 {
		t.Fatalf("mode off wrote %d audit rows; want 0", n)
	}
	shadow := mustGate(t, strings.Replace(auditPolicy, "version: 1", "version: 1\nmode: shadow", 1), gate.WithStore(st))
	decide(t, shadow, portcullis.Call{Tool: "delete_element"})
	evs := auditRows(t, st)
	if len(evs) != 1 || evs[0].Decision.Shadow == nil || evs[0].Decision.Shadow.Outcome != portcullis.OutcomeDeny {
		t.Fatalf("shadow mode rows = %+v; want one row recording the would-be deny", evs)
	}
}

// auditFails is a store whose audit log cannot be written.
type auditFails struct{ *memstore.Store }

func (auditFails) AppendAudit(context.Context, ...portcullis.AuditEvent) ([]portcullis.AuditRecord, error) {
	return nil, errors.New("disk full")
}

func TestUnrecordedCallIsNeverAllowed(t *testing.T) {
	g := mustGate(t, auditPolicy, gate.WithStore(auditFails{memstore.New(nil)}))
	d := decide(t, g, portcullis.Call{Tool: "list_elements"})
	if d.Outcome != portcullis.OutcomeDeny || !d.FailClosed || d.Code != portcullis.CodeFailClosed {
		t.Fatalf("Decide with a failing audit log = %s/%s failClosed=%v; want a fail-closed deny", d.Outcome, d.Code, d.FailClosed)
	}
	if last := d.Trace[len(d.Trace)-1]; last.Stage != "audit" || !last.Has(portcullis.FactNotRecorded) {
		t.Errorf("fail-closed allow: last trace %+v; want the audit stage with fact %s", last, portcullis.FactNotRecorded)
	}
	// A deny stays a deny, with the failure in its trace.
	d = decide(t, g, portcullis.Call{Tool: "delete_element"})
	last := d.Trace[len(d.Trace)-1]
	if d.Code != portcullis.CodeElementPolicyViolation || last.Stage != "audit" || !strings.Contains(last.Result, "disk full") {
		t.Fatalf("deny with a failing audit log = %s, last trace %+v", d.Code, last)
	}
	if !last.Has(portcullis.FactNotRecorded) {
		t.Errorf("deny with a failing audit log: last trace %+v; want fact %s", last, portcullis.FactNotRecorded)
	}
}
