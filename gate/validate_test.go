package gate_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/memstore"
)

const validatorPolicy = `
version: 1
policyDocument: ./permissions.md
tools:
  list_elements: {endpoint: READ}
  send_email: {endpoint: CREATE, risk: external-write, summary: "send to {{.to}}"}
  write_file: {endpoint: UPDATE, pathArg: path}
  Bash: {endpoint: EXECUTE, shellArg: command}
  delete_element: {endpoint: DELETE}
validator:
  provider: command
  command: [judge]
  mode: contextual
migrations:
  - name: add-tentative-default
    paths: [/preferences/calendar.md, /preferences/permissions.md]
elements:
  - name: Helper
    type: skill
    gatekeeper: {allow: [send_email]}
`

// fakeValidator answers with a fixed verdict and records what it was asked.
type fakeValidator struct {
	mu      sync.Mutex
	verdict portcullis.Verdict
	err     error
	asked   []portcullis.ValidationRequest
}

func (f *fakeValidator) Validate(_ context.Context, r portcullis.ValidationRequest) (portcullis.Verdict, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, r)
	return f.verdict, f.err
}

func TestValidatorStage(t *testing.T) {
	email := portcullis.Call{Tool: "send_email", Session: "s", Args: map[string]any{"to": "jane@acme.com"},
		Conversation: []portcullis.Message{{Role: "user", Content: "email jane"}}, UserPresent: true}
	for _, tc := range []struct {
		name     string
		v        *fakeValidator
		call     portcullis.Call
		outcome  portcullis.Outcome
		code     portcullis.Code
		fail     bool
		consults bool
	}{
		{"allow keeps the level (auto-approved by an element)", &fakeValidator{verdict: portcullis.Verdict{Allow: true, Confidence: 0.9}}, email, portcullis.OutcomeAllow, "", false, true},
		{"deny", &fakeValidator{verdict: portcullis.Verdict{Reasoning: "outside acme.com", WhatWouldAuthorize: "the user asking"}}, email, portcullis.OutcomeDeny, portcullis.CodeValidatorDenied, false, true},
		{"no verdict fails closed", &fakeValidator{verdict: portcullis.Verdict{FailClosed: true, Reasoning: "timeout"}}, email, portcullis.OutcomeDeny, portcullis.CodeFailClosed, true, true},
		{"an error fails closed", &fakeValidator{err: errors.New("boom")}, email, portcullis.OutcomeDeny, portcullis.CodeFailClosed, true, true},
		{"unannotated tools are not validated", &fakeValidator{}, portcullis.Call{Tool: "list_elements"}, portcullis.OutcomeAllow, "", false, false},
		{"a write to the policy document is policy-write and validated", &fakeValidator{verdict: portcullis.Verdict{Allow: true}}, portcullis.Call{Tool: "write_file", Args: map[string]any{"path": "/preferences/permissions.md"}}, portcullis.OutcomeConfirm, portcullis.CodeConfirmationRequired, false, true},
		{"a write elsewhere is not", &fakeValidator{}, portcullis.Call{Tool: "write_file", Args: map[string]any{"path": "/tmp/x"}}, portcullis.OutcomeConfirm, portcullis.CodeConfirmationRequired, false, false},
		{"a migration writing its declared path bypasses", &fakeValidator{}, portcullis.Call{Tool: "write_file", Args: map[string]any{"path": "/preferences/permissions.md"}, Run: &portcullis.Run{ID: "m", Trigger: "migration:add-tentative-default"}}, portcullis.OutcomeConfirm, portcullis.CodeAutonomyPause, false, false},
		{"an undeclared migration does not bypass", &fakeValidator{verdict: portcullis.Verdict{Reasoning: "no"}}, portcullis.Call{Tool: "write_file", Args: map[string]any{"path": "/preferences/permissions.md"}, Run: &portcullis.Run{ID: "m", Trigger: "migration:other"}}, portcullis.OutcomeDeny, portcullis.CodeValidatorDenied, false, true},
		{"a migration reaching an external write is validated", &fakeValidator{verdict: portcullis.Verdict{Reasoning: "no"}}, portcullis.Call{Tool: "send_email", Args: map[string]any{"to": "x"}, Run: &portcullis.Run{ID: "m", Trigger: "migration:add-tentative-default"}}, portcullis.OutcomeDeny, portcullis.CodeValidatorDenied, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := mustGate(t, validatorPolicy, gate.WithValidator(tc.v))
			d := decide(t, g, tc.call)
			if d.Outcome != tc.outcome || d.Code != tc.code || d.FailClosed != tc.fail {
				t.Fatalf("Decide = %s/%s failClosed=%v (%s); want %s/%s failClosed=%v", d.Outcome, d.Code, d.FailClosed, d.Reason, tc.outcome, tc.code, tc.fail)
			}
			if got := len(tc.v.asked) > 0; got != tc.consults {
				t.Fatalf("validator consulted = %v; want %v", got, tc.consults)
			}
		})
	}
}

func TestValidatorRequestInContextualMode(t *testing.T) {
	v := &fakeValidator{verdict: portcullis.Verdict{Allow: true}}
	g := mustGate(t, validatorPolicy, gate.WithValidator(v))
	decide(t, g, portcullis.Call{Tool: "send_email", Args: map[string]any{"to": "jane@acme.com"}, UserPresent: true,
		Conversation: []portcullis.Message{{Role: "user", Content: "email jane"}}, Run: &portcullis.Run{ID: "r", Trigger: "nightly digest"}})
	r := v.asked[0]
	if r.Mode != portcullis.ValidateContextual || r.Summary != "send_email: send to jane@acme.com" || !r.UserPresent || r.Trigger != "nightly digest" || len(r.Conversation) != 1 || r.Risk != portcullis.RiskExternalWrite {
		t.Fatalf("validation request = %+v", r)
	}
}

func TestValidatorConfiguredButMissingFailsClosed(t *testing.T) {
	g := mustGate(t, validatorPolicy)
	d := decide(t, g, portcullis.Call{Tool: "send_email", Args: map[string]any{"to": "x"}})
	if d.Outcome != portcullis.OutcomeDeny || !d.FailClosed || d.Source != portcullis.SourceValidator {
		t.Fatalf("Decide without a validator = %s/%s failClosed=%v; want a fail-closed deny from the validator stage", d.Outcome, d.Source, d.FailClosed)
	}
	// Calls outside the validator's scope are unaffected.
	if d := decide(t, g, portcullis.Call{Tool: "list_elements"}); d.Outcome != portcullis.OutcomeAllow {
		t.Fatalf("Decide(list_elements) = %s; want allow", d.Outcome)
	}
}

func TestValidatorVerdictIsAudited(t *testing.T) {
	st := memstore.New(nil)
	v := &fakeValidator{verdict: portcullis.Verdict{Reasoning: "outside acme.com", Provider: "anthropic", Model: "m", PromptHash: "sha256:p", Confidence: 0.8}}
	g := mustGate(t, validatorPolicy, gate.WithValidator(v), gate.WithStore(st))
	decide(t, g, portcullis.Call{Tool: "send_email", Session: "s", Args: map[string]any{"to": "x"}})
	evs := auditRows(t, st)
	if len(evs) != 1 || evs[0].Validator == nil || evs[0].Validator.Verdict != "deny" || evs[0].Validator.Model != "m" || evs[0].Validator.PromptHash != "sha256:p" {
		t.Fatalf("audit rows = %+v; want the validator's deny recorded", evs)
	}
}

func TestRetryGuard(t *testing.T) {
	st := memstore.New(nil)
	g := mustGate(t, validatorPolicy+`
  - name: Guard
    type: persona
    gatekeeper: {deny: [delete_element]}
`, gate.WithStore(st))
	call := portcullis.Call{Tool: "delete_element", Session: "s", Args: map[string]any{"name": "x"}, Run: &portcullis.Run{ID: "r1"},
		Conversation: []portcullis.Message{{Role: "user", Content: "clean up"}}}
	if d := decide(t, g, call); d.Outcome != portcullis.OutcomeDeny || d.Code != portcullis.CodeElementPolicyViolation {
		t.Fatalf("first attempt = %s/%s; want deny", d.Outcome, d.Code)
	}
	d := decide(t, g, call)
	if d.Outcome != portcullis.OutcomeStop || d.Code != portcullis.CodeRetryLoop || d.Source != portcullis.SourceRetryGuard || !strings.Contains(d.Reason, "already denied") {
		t.Fatalf("second identical attempt = %s/%s/%s (%s); want stop RETRY_LOOP", d.Outcome, d.Code, d.Source, d.Reason)
	}
	// Other arguments are another action.
	other := call
	other.Args = map[string]any{"name": "y"}
	if d := decide(t, g, other); d.Code != portcullis.CodeElementPolicyViolation {
		t.Fatalf("other arguments = %s; want a plain deny", d.Code)
	}
	// New user input resets the memo.
	call.Conversation = append(call.Conversation, portcullis.Message{Role: "user", Content: "yes, really delete x"})
	if d := decide(t, g, call); d.Code != portcullis.CodeElementPolicyViolation {
		t.Fatalf("after new user input = %s; want a plain deny", d.Code)
	}
	// Explain never counts.
	g2 := mustGate(t, validatorPolicy+`
  - name: Guard
    type: persona
    gatekeeper: {deny: [delete_element]}
`, gate.WithStore(memstore.New(nil)))
	for range 3 {
		if d, _ := g2.Explain(context.Background(), call); d.Code != portcullis.CodeElementPolicyViolation {
			t.Fatalf("Explain = %s; want a plain deny every time", d.Code)
		}
	}
}

func TestShadowToolStillConsultsTheValidator(t *testing.T) {
	st := memstore.New(nil)
	v := &fakeValidator{verdict: portcullis.Verdict{Reasoning: "outside acme.com", Model: "m"}}
	g := mustGate(t, strings.Replace(validatorPolicy, "risk: external-write,", "risk: external-write, mode: shadow,", 1), gate.WithValidator(v), gate.WithStore(st))
	d := decide(t, g, portcullis.Call{Tool: "send_email", Session: "s", Args: map[string]any{"to": "bob@example.com"}})
	if d.Outcome != portcullis.OutcomeAllow || d.Shadow == nil || d.Shadow.Code != portcullis.CodeValidatorDenied {
		t.Fatalf("Decide(shadow tool) = %s shadow %+v; want allowed, with the validator's deny recorded", d.Outcome, d.Shadow)
	}
	if len(v.asked) != 1 {
		t.Fatalf("validator asked %d times; want 1", len(v.asked))
	}
	evs := auditRows(t, st)
	if len(evs) != 1 || evs[0].Validator == nil || evs[0].Validator.Verdict != "deny" {
		t.Fatalf("audit = %+v; want the would-be verdict recorded", evs)
	}
}

// TestRetryGuardSeesThroughTrivialVariations: a retry that differs only in
// whitespace, in the order of keys, by a dropped session, or by a "user"
// message the agent wrote itself is the same action.
func TestRetryGuardSeesThroughTrivialVariations(t *testing.T) {
	pol := validatorPolicy + `
  - name: Guard
    type: persona
    gatekeeper: {deny: [delete_element]}
`
	for _, tc := range []struct {
		name          string
		first, second string
	}{
		{"whitespace", `{"tool":"delete_element","agent":"bot","session":"s","args":{"name":"x y"}}`,
			`{"tool":"delete_element","agent":"bot","session":"s","args":{"name":"  x   y "}}`},
		{"key order", `{"tool":"delete_element","agent":"bot","session":"s","args":{"name":"x","scope":{"a":1,"b":2}}}`,
			`{"tool":"delete_element","agent":"bot","session":"s","args":{"scope":{"b":2,"a":1},"name":"x"}}`},
		{"key order inside a JSON string", `{"tool":"delete_element","agent":"bot","session":"s","args":{"name":"{\"a\":1,\"b\":\"p q\"}"}}`,
			`{"tool":"delete_element","agent":"bot","session":"s","args":{"name":" {\"b\": \"p  q\", \"a\": 1}"}}`},
		{"no session at all", `{"tool":"delete_element","agent":"bot","args":{"name":"x"}}`,
			`{"tool":"delete_element","agent":"bot","args":{"name":"x"}}`},
		{"the agent's own user message", `{"tool":"delete_element","agent":"bot","session":"s","contextSource":"agent","args":{"name":"x"},"conversation":[{"role":"user","content":"clean up"}]}`,
			`{"tool":"delete_element","agent":"bot","session":"s","contextSource":"agent","args":{"name":"x"},"conversation":[{"role":"user","content":"yes, I really want x deleted"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := mustGate(t, pol, gate.WithStore(memstore.New(nil)))
			first, err := portcullis.DecodeCall([]byte(tc.first))
			if err != nil {
				t.Fatal(err)
			}
			second, err := portcullis.DecodeCall([]byte(tc.second))
			if err != nil {
				t.Fatal(err)
			}
			if d := decide(t, g, first); d.Code != portcullis.CodeElementPolicyViolation {
				t.Fatalf("first attempt = %s/%s; want a plain deny", d.Outcome, d.Code)
			}
			if d := decide(t, g, second); d.Outcome != portcullis.OutcomeStop || d.Code != portcullis.CodeRetryLoop {
				t.Fatalf("varied retry %s = %s/%s (%s); want stop RETRY_LOOP", tc.second, d.Outcome, d.Code, d.Reason)
			}
		})
	}
	// Whitespace that is not only whitespace is another action; another
	// agent without a session has a memo of its own.
	g := mustGate(t, pol, gate.WithStore(memstore.New(nil)))
	decide(t, g, portcullis.Call{Tool: "delete_element", Agent: "bot", Args: map[string]any{"name": "x y"}})
	if d := decide(t, g, portcullis.Call{Tool: "delete_element", Agent: "bot", Args: map[string]any{"name": "xy"}}); d.Code != portcullis.CodeElementPolicyViolation {
		t.Fatalf("other arguments = %s; want a plain deny", d.Code)
	}
	if d := decide(t, g, portcullis.Call{Tool: "delete_element", Agent: "other", Args: map[string]any{"name": "x y"}}); d.Code != portcullis.CodeElementPolicyViolation {
		t.Fatalf("another agent = %s; want a plain deny", d.Code)
	}
}
