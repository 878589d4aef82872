package policytest_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/policy"
	"github.com/portcullis/portcullis/policytest"
)

// standInFile names every stand-in verdict and counts a budget across its
// cases, in order, on the file's clock.
const standInFile = `
policy:
  version: 1
  tools:
    create_note: {endpoint: CREATE}
    send_email: {endpoint: CREATE, defaultLevel: AUTO_APPROVE, risk: external-write}
  budgets:
    - name: email-rate
      tools: [send_email]
      limit: 1
      window: hour
      by: agent
  validator:
    provider: command
    command: [judge]
cases:
  - name: no stand-in named, so the call in the validator's scope fails closed
    request: {tool: send_email, agent: a, args: {to: x}}
    want: {outcome: deny, code: FAIL_CLOSED, failClosed: true, source: validator}
  - name: a stand-in deny
    request: {tool: send_email, agent: a, args: {to: x}}
    validator: deny
    want: {outcome: deny, code: VALIDATOR_DENIED, reasonContains: "stand-in verdict of the test file: deny"}
  - name: a stand-in without a verdict
    request: {tool: send_email, agent: a, args: {to: x}}
    validator: unavailable
    want: {outcome: deny, code: FAIL_CLOSED, failClosed: true, reasonContains: "the validator is unavailable"}
  - name: a stand-in allow lets the first email through and counts it
    at: 2026-03-01T10:00:00Z
    request: {tool: send_email, agent: a, args: {to: x}}
    validator: allow
    want: {outcome: allow, permissionLevel: AUTO_APPROVE}
  - name: the budget the allowed case used is counted on the other stand-ins' gates too
    at: 2026-03-01T10:30:00Z
    request: {tool: send_email, agent: a, args: {to: x}}
    validator: allow
    want: {outcome: deny, code: BUDGET_EXCEEDED, budget: email-rate}
  - name: an hour later the window has reopened
    at: 2026-03-01T11:00:00Z
    request: {tool: send_email, agent: a, args: {to: x}}
    validator: allow
    want: {outcome: allow}
  - name: a grant carried in the request is honoured
    request: {tool: create_note, grants: [{tool: create_note, kind: session}]}
    want: {outcome: allow, source: session_grant}
`

func TestRun(t *testing.T) {
	tf, err := policy.ParseTests("standin_test.yaml", []byte(standInFile))
	if err != nil {
		t.Fatal(err)
	}
	results, err := policytest.Run(context.Background(), tf)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(results) != len(tf.Cases) {
		t.Fatalf("Run gave %d results; want one per case (%d)", len(results), len(tf.Cases))
	}
	for _, r := range results {
		if r.Err != nil {
			t.Errorf("%s: Decide(%s) error: %v", r.Case.Name, r.Case.Request.Tool, r.Err)
		}
		for _, d := range r.Diffs {
			t.Errorf("%s: Decide(%s): %s", r.Case.Name, r.Case.Request.Tool, d)
		}
	}
}

// TestRunExamples runs the example policies' test files: every case
// passes, and the stand-in cases decide as their verdict says.
func TestRunExamples(t *testing.T) {
	for _, path := range []string{"../examples/dispatch/policy_test.yaml", "../examples/hcli/policy_test.yaml"} {
		tf, err := policy.LoadTests(path)
		if err != nil {
			t.Fatalf("LoadTests(%s): %v", path, err)
		}
		results, err := policytest.Run(context.Background(), tf)
		if err != nil {
			t.Fatalf("Run(%s): %v", path, err)
		}
		standIns := 0
		for _, r := range results {
			if r.Err != nil || len(r.Diffs) > 0 {
				t.Errorf("%s: %s: error %v, diffs %q", path, r.Case.Name, r.Err, r.Diffs)
			}
			if r.Case.Validator == policy.ValidatorDeny && r.Decision.Code == portcullis.CodeValidatorDenied {
				standIns++
				if !strings.Contains(r.Decision.Reason, "stand-in verdict of the test file") {
					t.Errorf("%s: %s: reason %q does not name the stand-in verdict", path, r.Case.Name, r.Decision.Reason)
				}
			}
		}
		if path == "../examples/dispatch/policy_test.yaml" && standIns == 0 {
			t.Errorf("%s: no case was denied by the stand-in validator", path)
		}
	}
}

// TestRunFailingCase: a case whose expectation the gate does not meet is
// reported with its difference, not passed.
func TestRunFailingCase(t *testing.T) {
	tf, err := policy.ParseTests("fail_test.yaml", []byte(`
policy:
  version: 1
  tools:
    delete_all: {endpoint: DELETE}
cases:
  - name: wrongly expected allow
    request: {tool: delete_all}
    want: {outcome: allow}
`))
	if err != nil {
		t.Fatal(err)
	}
	results, err := policytest.Run(context.Background(), tf)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 1 || len(results[0].Diffs) == 0 || !strings.Contains(results[0].Diffs[0], "outcome: got confirm, want allow") {
		t.Fatalf("Run of a failing case = %+v; want the outcome's difference", results)
	}
}

// TestGates: one gate per stand-in verdict, and "" for a case that names
// none.
func TestGates(t *testing.T) {
	tf, err := policy.ParseTests("g_test.yaml", []byte(standInFile))
	if err != nil {
		t.Fatal(err)
	}
	gates, err := policytest.Gates(tf)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"", policy.ValidatorAllow, policy.ValidatorDeny, policy.ValidatorUnavailable} {
		if gates[name] == nil {
			t.Errorf("Gates has no gate for stand-in %q", name)
		}
	}
	if len(gates) != 4 {
		t.Errorf("Gates gave %d gates; want 4", len(gates))
	}
}

func TestRunFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := write("good_test.yaml", `
policy:
  version: 1
  tools:
    list_elements: {endpoint: READ}
cases:
  - name: reads are allowed
    request: {tool: list_elements}
    want: {outcome: allow}
  - name: a wrong expectation
    request: {tool: list_elements}
    want: {outcome: deny}
`)
	refused := write("refused_test.yaml", `
policy:
  version: 1
  tools:
    Bash: {endpoint: EXECUTE, shellArg: command}
  shell:
    rules:
      - {pattern: [git, push], decision: deny, match: [git status]}
cases:
  - name: never runs
    request: {tool: Bash, args: {command: ls}}
    want: {outcome: allow}
`)
	missing := filepath.Join(dir, "missing_test.yaml")

	results, errs := policytest.RunFiles(context.Background(), []string{missing, good, refused})
	var got []string
	for _, r := range results {
		got = append(got, fmt.Sprintf("%s %v", r.Case.Name, r.Passed()))
	}
	if want := []string{"reads are allowed true", "a wrong expectation false"}; !slices.Equal(got, want) {
		t.Errorf("RunFiles results = %q; want %q", got, want)
	}
	if len(errs) != 2 || !strings.Contains(errs[0].Error(), "missing_test.yaml") || !strings.HasPrefix(errs[1].Error(), refused+": ") {
		t.Errorf("RunFiles errors = %v; want the missing file's, then %q", errs, refused+": ...")
	}
}
