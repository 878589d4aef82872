package gate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/policy"
)

const cliPolicy = `
version: 1
tools:
  list_elements:  {endpoint: READ}
  create_element: {endpoint: CREATE}
  open_portfolio_browser: {endpoint: READ, aliases: [open_console]}
elements:
  - name: Security Persona
    type: persona
    gatekeeper: {confirm: [create_element], deny: [delete_*]}
  - name: Permissive Skill
    type: skill
    gatekeeper: {allow: [create_element]}
`

func TestDecideLines(t *testing.T) {
	g := mustGate(t, cliPolicy)
	in := "{\"tool\": \"list_elements\"}\n\n   \n{\"tool\": \"open_console\"}\r\n{\"tool\": \"delete_element\"}\n{\"tool\": \"<a&b>\"}"
	var out bytes.Buffer
	if err := g.DecideLines(context.Background(), strings.NewReader(in), &out); err != nil {
		t.Fatalf("DecideLines = %v; want nil", err)
	}
	var got []string
	for _, d := range decodeDecisions(t, out.String()) {
		got = append(got, d.Tool+" "+string(d.Outcome))
	}
	want := []string{"list_elements allow", "open_portfolio_browser allow", "delete_element deny", "<a&b> confirm"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("DecideLines decisions (-want +got):\n%s", diff)
	}
}

func TestDecideLinesStopsAtABadLine(t *testing.T) {
	for _, tc := range []struct {
		name, in, wantErr string
		wantLines         int
	}{
		{"malformed", "{\"tool\":\"list_elements\"}\n{\"tool\": \n{\"tool\":\"list_elements\"}\n", "line 2: ", 1},
		{"missing tool", "\n{\"args\": {}}\n", `line 2: `, 0},
		{"unknown element", "{\"tool\":\"x\",\"activeElements\":[\"Nobody\"]}\n", `"Nobody"`, 0},
		{"too long", "{\"tool\":\"list_elements\"}\n" + strings.Repeat(" ", portcullis.MaxRequestBytes+2) + "\n", "line 2: line longer than the limit of 1048576 bytes", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := mustGate(t, cliPolicy).DecideLines(context.Background(), strings.NewReader(tc.in), &out)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("DecideLines = %v; want an error containing %q", err, tc.wantErr)
			}
			if got := len(decodeDecisions(t, out.String())); got != tc.wantLines {
				t.Errorf("DecideLines wrote %d decisions before the bad line; want %d", got, tc.wantLines)
			}
		})
	}
}

func TestDecideLinesStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out bytes.Buffer
	err := mustGate(t, cliPolicy).DecideLines(ctx, strings.NewReader("{\"tool\":\"list_elements\"}\n"), &out)
	if !errors.Is(err, context.Canceled) || out.Len() != 0 {
		t.Errorf("DecideLines(cancelled) = %v, wrote %q; want context.Canceled and nothing", err, out.String())
	}
}

func decodeDecisions(t *testing.T, s string) []portcullis.Decision {
	t.Helper()
	var ds []portcullis.Decision
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		if line == "" {
			continue
		}
		var d portcullis.Decision
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			t.Fatalf("line %q is not a decision: %v", line, err)
		}
		ds = append(ds, d)
	}
	return ds
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "policy.yaml")
	warned := cliPolicy + "  - name: Stray\n    type: skill\n    gatekeeper: {allow: [verify_challenge]}\n"
	if err := os.WriteFile(path, []byte(warned), 0o600); err != nil {
		t.Fatal(err)
	}
	g, warnings, err := gate.Load(path, nil)
	if err != nil {
		t.Fatalf("Load(%s) = %v", path, err)
	}
	if g.Policy().Source != path || !strings.Contains(fmt.Sprint(warnings), `"verify_challenge" cannot be gated`) {
		t.Errorf("Load(%s): policy %q, warnings %v; want the file's policy and its warnings", path, g.Policy().Source, warnings)
	}

	def, _, err := policy.LoadDefault()
	if err != nil {
		t.Fatal(err)
	}
	if g, _, err := gate.Load("", nil); err != nil || g.Policy().Hash != def.Hash {
		t.Errorf(`Load("") = %v; want the built-in default policy`, err)
	}

	// A validator that cannot be made refuses the gate, naming the file;
	// the policy's warnings are still returned.
	_, warnings, err = gate.Load(path, func(*portcullis.Policy) (portcullis.Validator, error) {
		return nil, errors.New("validator: no key")
	})
	if err == nil || err.Error() != path+": validator: no key" || len(warnings) == 0 {
		t.Errorf("Load with a failing validator = %v, %d warnings; want %q and the warning", err, len(warnings), path+": validator: no key")
	}

	// A validator that is made is the gate's.
	var asked *portcullis.Policy
	if _, _, err := gate.Load(path, func(p *portcullis.Policy) (portcullis.Validator, error) { asked = p; return nil, nil }); err != nil || asked == nil || asked.Source != path {
		t.Errorf("Load asked for the validator of %v (err %v); want the loaded policy", asked, err)
	}

	missing := filepath.Join(dir, "nope.yaml")
	if _, warnings, err := gate.Load(missing, nil); err == nil || !strings.Contains(err.Error(), "nope.yaml") || warnings != nil {
		t.Errorf("Load(missing) = %v, %v; want an error naming the file and no warnings", warnings, err)
	}
}

func TestWriteExplanation(t *testing.T) {
	g := mustGate(t, cliPolicy)
	call := portcullis.Call{Tool: "create_element", ActiveElements: []string{"Security Persona", "Permissive Skill"}}
	d, err := g.Explain(context.Background(), call)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := gate.WriteExplanation(&b, call, d); err != nil {
		t.Fatal(err)
	}
	want := `create_element → CONFIRM, CONFIRM_SESSION
  reason:        Operation "create_element" requires confirmation once per session. Active element "Security Persona" policy requires confirmation for this operation. (Note: "Permissive Skill" would auto-approve this but is overridden by the confirm policy.)
  code:          CONFIRMATION_REQUIRED
  source:        element_policy — element "Security Persona", confirm list
  class:         CREATE
  overridden:    "Permissive Skill" wanted AUTO_APPROVE
  to authorize:  a person's confirmation of "create_element" for this session

Stages (▶ decided):
  1.  mode                           enforce
  2.  danger_zone                    no agent named: no block applies
  3.  route         CONFIRM_SESSION  create_element: CREATE, base level CONFIRM_SESSION (policy tools entry)
  4.  elements      CONFIRM_SESSION  confirm list of "Security Persona" matches ("create_element")
▶ 5.  confirmation  CONFIRM_SESSION  no grant: a person must confirm; this gate has no store, so no approval request was recorded
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("WriteExplanation (-want +got):\n%s", diff)
	}

	// An alias shows both names; a failed-closed shadow decision says so.
	d = portcullis.Decision{
		Tool: "open_portfolio_browser", Outcome: portcullis.OutcomeAllow, PermissionLevel: portcullis.AutoApprove,
		Source: portcullis.SourceMode, FailClosed: true, ChallengeID: "ch-1",
		Shadow: &portcullis.ShadowResult{Outcome: portcullis.OutcomeDeny, PermissionLevel: portcullis.Deny, Code: portcullis.CodeFailClosed, Reason: "store down"},
		Trace:  []portcullis.TraceEntry{{Stage: "mode", Result: "shadow", Decided: true}},
	}
	b.Reset()
	if err := gate.WriteExplanation(&b, portcullis.Call{Tool: "open_console"}, d); err != nil {
		t.Fatal(err)
	}
	want = `open_console (open_portfolio_browser) → ALLOW, AUTO_APPROVE
  source:         mode
  challenge:      ch-1
  fail-closed:    yes: the gate could not decide, so it denied
  enforce would:  deny, DENY FAIL_CLOSED — store down

Stages (▶ decided):
▶ 1.  mode    shadow
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("WriteExplanation (-want +got):\n%s", diff)
	}
}
