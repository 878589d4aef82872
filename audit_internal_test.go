package portcullis

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The audit row's encoding mirrors AuditEvent field for field: a field
// added to one and not the other would be silently left out of the log.
func TestAuditWireMatchesAuditEvent(t *testing.T) {
	ev, w := reflect.TypeFor[AuditEvent](), reflect.TypeFor[auditWire]()
	if ev.NumField() != w.NumField() {
		t.Fatalf("AuditEvent has %d fields, auditWire %d", ev.NumField(), w.NumField())
	}
	for i := range ev.NumField() {
		a, b := ev.Field(i), w.Field(i)
		if a.Name != b.Name || a.Tag != b.Tag {
			t.Errorf("field %d: AuditEvent.%s %q, auditWire.%s %q", i, a.Name, a.Tag, b.Name, b.Tag)
		}
		if a.Name == "Decision" {
			if a.Type != reflect.TypeFor[*Decision]() || b.Type != reflect.TypeFor[*decisionJSON]() {
				t.Errorf("Decision: %v and %v", a.Type, b.Type)
			}
			continue
		}
		if a.Type != b.Type {
			t.Errorf("field %s: AuditEvent %v, auditWire %v", a.Name, a.Type, b.Type)
		}
	}
}

// auditWire is how encoding/json encodes an AuditEvent as a row: the same
// fields, names and order, with the decision's empty lists as []. It
// defines the canonical form that EncodeAuditBody writes without
// reflection; TestAuditWireMatchesAuditEvent keeps it in step with
// AuditEvent.
type auditWire struct {
	Kind        AuditKind        `json:"kind"`
	Time        time.Time        `json:"time"`
	DecisionID  string           `json:"decisionId,omitempty"`
	Session     string           `json:"session,omitempty"`
	Agent       string           `json:"agent,omitempty"`
	Tool        string           `json:"tool,omitempty"`
	Outcome     Outcome          `json:"outcome,omitempty"`
	Request     *Call            `json:"request,omitempty"`
	Decision    *decisionJSON    `json:"decision,omitempty"`
	PolicyHash  string           `json:"policyHash,omitempty"`
	LatencyNS   int64            `json:"latencyNs,omitempty"`
	Validator   *ValidatorRecord `json:"validator,omitempty"`
	UserPresent bool             `json:"userPresent,omitempty"`
	Actor       string           `json:"actor,omitempty"`
	Detail      string           `json:"detail,omitempty"`
}

// encodingJSONBody is the canonical form of an event as encoding/json
// writes it: the oracle EncodeAuditBody is held to.
func encodingJSONBody(ev *AuditEvent) ([]byte, error) {
	w := auditWire{
		Kind: ev.Kind, Time: ev.Time, DecisionID: ev.DecisionID, Session: ev.Session,
		Agent: ev.Agent, Tool: ev.Tool, Outcome: ev.Outcome, Request: ev.Request,
		PolicyHash: ev.PolicyHash, LatencyNS: ev.LatencyNS, Validator: ev.Validator,
		UserPresent: ev.UserPresent, Actor: ev.Actor, Detail: ev.Detail,
	}
	if ev.Decision != nil {
		d := decisionFields(*ev.Decision)
		w.Decision = &d
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&w); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// Every field of an event reaches its row: an event with every field set
// encodes to a row with every key.
func TestEncodeAuditBodyWritesEveryField(t *testing.T) {
	var ev AuditEvent
	v := reflect.ValueOf(&ev).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString("x")
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Int64:
			f.SetInt(7)
		case reflect.Pointer:
			f.Set(reflect.New(f.Type().Elem()))
		case reflect.Struct:
			f.Set(reflect.ValueOf(time.Unix(1, 0).UTC()))
		default:
			t.Fatalf("field %s of kind %s: teach this test to set it", v.Type().Field(i).Name, f.Kind())
		}
	}
	ev.Decision = fullEvent().Decision // a zero decision has no valid level
	body, err := EncodeAuditBody(&ev)
	if err != nil {
		t.Fatal(err)
	}
	var row map[string]any
	if err := json.Unmarshal(body, &row); err != nil {
		t.Fatal(err)
	}
	for i := range v.NumField() {
		key, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
		if _, ok := row[key]; !ok {
			t.Errorf("field %s (%q) is missing from the row %s", v.Type().Field(i).Name, key, body)
		}
	}
}

// referenceBody is the plain encoding of the event, through
// Decision.MarshalJSON.
func referenceBody(t *testing.T, ev *AuditEvent) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(ev); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

func fullEvent() *AuditEvent {
	return &AuditEvent{
		Kind: AuditDecision, Time: time.Date(2026, 11, 22, 3, 4, 5, 6, time.UTC),
		DecisionID: "d-1", Session: "s <1>", Agent: "bot & co", Tool: "send_email", Outcome: OutcomeConfirm,
		Request: &Call{Tool: "send_email", Args: map[string]any{"to": "a@example.com", "n": json.Number("3"), "html": "<b>"},
			Session: "s <1>", Agent: "bot & co", ActiveElements: []string{"mail"}},
		Decision: &Decision{DecisionID: "d-1", Outcome: OutcomeConfirm, PermissionLevel: ConfirmSingleUse,
			Reason: "needs a person <now>", ConflictingElements: []Conflict{{Name: "x", WantedLevel: AutoApprove}},
			Trace:  []TraceEntry{{Stage: "route", Result: "send_email"}, {Stage: "level", Result: "confirm", Level: ConfirmSingleUse, Decided: true}},
			Shadow: &ShadowResult{Outcome: OutcomeDeny, PermissionLevel: Deny, Reason: "r"}, Tool: "send_email", Endpoint: Create, Risk: RiskExternalWrite},
		PolicyHash: "sha256:ab", LatencyNS: 1234,
		Validator:   &ValidatorRecord{Provider: "p", Model: "m", PromptHash: "h", Verdict: "allow", Confidence: 0.5, LatencyNS: 9},
		UserPresent: true, Actor: "ann", Detail: "d",
	}
}

func TestEncodeAuditBodyMatchesTheReference(t *testing.T) {
	full := fullEvent()
	noLists := fullEvent()
	noLists.Decision.Trace, noLists.Decision.ConflictingElements = nil, nil
	plain := fullEvent()
	plain.Session, plain.Agent, plain.Request.Session, plain.Request.Agent, plain.Decision.Reason = "s1", "bot", "s1", "bot", "needs a person"
	plain.Request.Args["html"] = "b"
	human := &AuditEvent{Kind: AuditApproval, Time: time.Unix(0, 0).UTC(), DecisionID: "d-2", Actor: "ann", Detail: "fine"}
	for name, ev := range map[string]*AuditEvent{"full": full, "empty lists": noLists, "plain text": plain, "no decision": human} {
		got, err := EncodeAuditBody(ev)
		if err != nil {
			t.Fatal(err)
		}
		want := referenceBody(t, ev)
		// The same JSON value ...
		var g, w any
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatalf("%s: %v in %s", name, err, got)
		}
		if err := json.Unmarshal(want, &w); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s:\n got %s\nwant %s", name, got, want)
		}
		// ... and the same bytes, except that no part of the row escapes
		// HTML now (through Decision.MarshalJSON the decision's strings
		// were escaped, the rest of the row was not).
		if bytes.ContainsAny(got, "<>&") != (name == "full" || name == "empty lists") {
			t.Errorf("%s: HTML characters escaped: %s", name, got)
		}
		if name == "plain text" || name == "no decision" {
			if !bytes.Equal(got, want) {
				t.Errorf("%s:\n got %s\nwant %s", name, got, want)
			}
		}
	}
	got, _ := EncodeAuditBody(noLists)
	if !bytes.Contains(got, []byte(`"conflictingElements":[]`)) || !bytes.Contains(got, []byte(`"trace":[]`)) {
		t.Errorf("empty lists are not written as []: %s", got)
	}
}

// The chain's hash is the one existing logs were written with.
func TestChainHashIsUnchanged(t *testing.T) {
	old := func(prev string, seq int64, body []byte) string {
		h := sha256.New()
		fmt.Fprintf(h, "%s\n%d\n", prev, seq)
		h.Write(body)
		return "sha256:" + hex.EncodeToString(h.Sum(nil))
	}
	for _, c := range []struct {
		prev string
		seq  int64
		body string
	}{{"", 1, `{"kind":"decision"}`}, {"sha256:00ff", 9223372036854775807, ""}, {"sha256:ab", -3, "x\ny"}} {
		if got, want := ChainHash(c.prev, c.seq, []byte(c.body)), old(c.prev, c.seq, []byte(c.body)); got != want {
			t.Errorf("ChainHash(%q, %d, %q) = %s; want %s", c.prev, c.seq, c.body, got, want)
		}
	}
}

// BenchmarkEncodeAuditBody encodes a decision row with its request, trace
// and validator record, and chains it, as a store appends it.
func BenchmarkEncodeAuditBody(b *testing.B) {
	ev := fullEvent()
	b.ReportAllocs()
	for b.Loop() {
		body, err := EncodeAuditBody(ev)
		if err != nil {
			b.Fatal(err)
		}
		_ = ChainHash("sha256:00", 42, body)
	}
}

// BenchmarkEncodeAuditBodyEncodingJSON is BenchmarkEncodeAuditBody through
// encoding/json's reflection, which defines the canonical form: the peer
// of the encoder's figure.
func BenchmarkEncodeAuditBodyEncodingJSON(b *testing.B) {
	ev := fullEvent()
	b.ReportAllocs()
	for b.Loop() {
		body, err := encodingJSONBody(ev)
		if err != nil {
			b.Fatal(err)
		}
		_ = ChainHash("sha256:00", 42, body)
	}
}

// TestForgedColumnReadsOnlyTheColumns checks the copied columns are read
// from the body however their values look, and that a body with them out
// of the canonical order fails the comparison rather than passing it.
func TestForgedColumnReadsOnlyTheColumns(t *testing.T) {
	for _, session := range []string{"plain", `a","request":{"x":1},"outcome":"allow`, `back\slash\`, "{[", "ünï", ""} {
		ev := AuditEvent{Kind: AuditDecision, Time: time.Date(2026, 11, 28, 14, 0, 0, 123456789, time.FixedZone("x", 3600)),
			DecisionID: "d1", Session: session, Agent: "bot", Tool: "t", Outcome: OutcomeDeny,
			Request: &Call{Tool: "t", Args: map[string]any{"outcome": "allow"}}, Decision: &Decision{Outcome: OutcomeDeny, PermissionLevel: Deny}}
		body, err := EncodeAuditBody(&ev)
		if err != nil {
			t.Fatal(err)
		}
		c := ColumnsOf(&ev)
		r := AuditRecord{Seq: 1, Body: body, Columns: &c}
		if col, problem := r.forgedColumn(); col != "" {
			t.Errorf("session %q: forgedColumn = %s, %s; want none", session, col, problem)
		}
		forged := c
		forged.Outcome = OutcomeAllow
		r.Columns = &forged
		if col, _ := r.forgedColumn(); col != "outcome" {
			t.Errorf("session %q: forgedColumn with the outcome edited = %q; want outcome", session, col)
		}
	}
	// Out of order: the outcome after the request is not read, so the
	// column that claims it does not match.
	c := AuditColumns{Kind: AuditDecision, Outcome: OutcomeDeny}
	r := AuditRecord{Body: []byte(`{"kind":"decision","time":"0001-01-01T00:00:00Z","request":{"tool":"t"},"outcome":"deny"}`), Columns: &c}
	if col, _ := r.forgedColumn(); col != "outcome" {
		t.Errorf("forgedColumn of a body out of order = %q; want outcome", col)
	}
	r = AuditRecord{Body: []byte(`not json`), Columns: &c}
	if col, _ := r.forgedColumn(); col != "body" {
		t.Errorf("forgedColumn of a body that is not JSON = %q; want body", col)
	}
}

func TestColumnsPrefixKeys(t *testing.T) {
	if len(columnKeys) != 7 || !afterColumns["request"] || !afterColumns["detail"] || afterColumns["outcome"] || afterColumns["kind"] {
		t.Fatalf("columnKeys = %v, afterColumns = %v", columnKeys, afterColumns)
	}
	// A key it does not know (a field added among the columns): the
	// whole body is decoded, so the outcome after it is still read.
	c := AuditColumns{Kind: AuditDecision}
	r := AuditRecord{Body: []byte(`{"kind":"decision","time":"0001-01-01T00:00:00Z","provenance":"x","outcome":"deny"}`), Columns: &c}
	if col, _ := r.forgedColumn(); col != "outcome" {
		t.Errorf("forgedColumn with an unknown key before the outcome = %q; want outcome (its column is empty, its body says deny)", col)
	}
}
