package policy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/policy"
)

func ptr[T any](v T) *T { return &v }

func TestLoadTestsWithPolicyPath(t *testing.T) {
	const path = "testdata/tests/path_test.yaml"
	tf, err := policy.LoadTests(path)
	if err != nil {
		t.Fatalf("LoadTests(%s) = %v", path, err)
	}
	if tf.Path != path || tf.Policy == nil || tf.Policy.Source != filepath.Join("testdata", "tests", "policy.yaml") {
		t.Errorf("LoadTests(%s) path %q, policy source %v; want the file and its policy", path, tf.Path, tf.Policy)
	}
	want := []policy.TestCase{
		{
			Name: "reads are auto-approved", File: path, Line: 3,
			Request: portcullis.Call{Tool: "list_elements"},
			Want: policy.Expectation{
				Outcome:         ptr(portcullis.OutcomeAllow),
				PermissionLevel: ptr(portcullis.AutoApprove),
				Source:          ptr(portcullis.SourceOperationDefault),
				Code:            ptr(portcullis.CodeNone),
			},
		},
		{
			Name: "deletes are denied", File: path, Line: 6,
			Request: portcullis.Call{
				Tool:           "delete_element",
				Args:           map[string]any{"name": "x", "count": json.Number("3"), "ratio": json.Number("0.5")},
				ActiveElements: []string{"Security Persona"},
			},
			Want: policy.Expectation{
				Outcome:             ptr(portcullis.OutcomeDeny),
				PermissionLevel:     ptr(portcullis.Deny),
				Code:                ptr(portcullis.CodeElementPolicyViolation),
				Source:              ptr(portcullis.SourceElementPolicy),
				SourceElement:       ptr("Security Persona"),
				MatchedPolicy:       ptr("deny"),
				ConflictingElements: ptr([]portcullis.Conflict{}),
				FailClosed:          ptr(false),
				ReasonContains:      ptr("deny policy"),
				Tool:                ptr("delete_element"),
				Risk:                ptr(portcullis.Risk("")),
			},
		},
	}
	if diff := cmp.Diff(want, tf.Cases); diff != "" {
		t.Errorf("LoadTests(%s) cases mismatch (-want +got):\n%s", path, diff)
	}
}

func TestLoadTestsWithInlinePolicy(t *testing.T) {
	const path = "testdata/tests/inline_test.yaml"
	tf, err := policy.LoadTests(path)
	if err != nil {
		t.Fatalf("LoadTests(%s) = %v", path, err)
	}
	dir, err := filepath.Abs("testdata/tests")
	if err != nil {
		t.Fatal(err)
	}
	if tf.Policy.Source != path || !strings.HasPrefix(tf.Policy.Hash, "sha256:") || tf.Policy.PolicyDocument != filepath.Join(dir, "permissions.md") {
		t.Errorf("LoadTests(%s) policy source %q, hash %q, document %q; want the test file, a hash, a resolved path",
			path, tf.Policy.Source, tf.Policy.Hash, tf.Policy.PolicyDocument)
	}
	// Line numbers of the inline policy are the test file's.
	wantWarns := []policy.Warning{{File: path, Line: 10, Message: `element "Mailer": gatekeeper.allow[1]: "verify_challenge" cannot be gated (a recovery operation that must stay open to people); removed`}}
	if diff := cmp.Diff(wantWarns, tf.Warnings); diff != "" {
		t.Errorf("LoadTests(%s) warnings mismatch (-want +got):\n%s", path, diff)
	}
	if got := tf.Policy.Tools[0].Line; got != 6 {
		t.Errorf("LoadTests(%s) tool line = %d; want 6", path, got)
	}
	c := tf.Cases[0]
	wantReq := portcullis.Call{
		Tool:   "send_email",
		Args:   map[string]any{"to": "a@example.com"},
		Grants: []portcullis.Grant{{Tool: "send_email", Kind: portcullis.GrantSession}},
		Run:    &portcullis.Run{ID: "r1", Step: 2, RiskScore: ptr(40.0)},
	}
	if diff := cmp.Diff(wantReq, c.Request); diff != "" {
		t.Errorf("LoadTests(%s) request mismatch (-want +got):\n%s", path, diff)
	}
	wantWant := policy.Expectation{
		Outcome:             ptr(portcullis.OutcomeAllow),
		PermissionLevel:     ptr(portcullis.AutoApprove),
		ConflictingElements: ptr([]portcullis.Conflict{}),
	}
	if diff := cmp.Diff(wantWant, c.Want); diff != "" {
		t.Errorf("LoadTests(%s) want mismatch (-want +got):\n%s", path, diff)
	}
}

func TestParseTestsErrors(t *testing.T) {
	const pol = "policy:\n  version: 1\n  elements: [{name: E, type: persona, gatekeeper: {deny: [x]}}]\n"
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{"malformed", "policy: [\n", []string{"t.yaml:2: malformed YAML: did not find expected node content"}},
		{"empty", "", []string{"t.yaml: empty file"}},
		{"not a mapping", "- a\n", []string{"t.yaml:1: the test file is a list; want a mapping"}},
		{"unknown top key", pol + "case: []\n", []string{`t.yaml:4: unknown key "case" (did you mean "cases"?)`, "t.yaml:1: cases: missing"}},
		{"no policy", "cases:\n  - {name: a, request: {tool: x}, want: {outcome: allow}}\n", []string{"t.yaml:1: policy: missing"}},
		{"policy file missing", "policy: nope.yaml\ncases:\n  - {name: a, request: {tool: x}, want: {outcome: allow}}\n", []string{"t.yaml:1: policy: the policy file nope.yaml does not exist"}},
		{"policy not a path", "policy: 3\ncases:\n  - {name: a, request: {tool: x}, want: {outcome: allow}}\n", []string{"t.yaml:1: policy: got number 3, want the path of a policy file or a policy mapping"}},
		{"bad inline policy", "policy:\n  version: 1\n  mode: loud\ncases:\n  - {name: a, request: {tool: x}, want: {outcome: allow}}\n", []string{`t.yaml:3: mode: unknown mode "loud"`}},
		{"no cases", pol + "cases: []\n", []string{"t.yaml:4: cases: got a list, want a non-empty list of cases"}},
		{"unknown case key", pol + "cases:\n  - name: a\n    request: {tool: x}\n    want: {outcome: allow}\n    expect: {outcome: deny}\n", []string{`t.yaml:8: case "a": unknown key "expect"`}},
		{"case without name", pol + "cases:\n  - {request: {tool: x}, want: {outcome: allow}}\n", []string{"t.yaml:5: cases[0].name: missing"}},
		{"duplicate case", pol + "cases:\n  - {name: a, request: {tool: x}, want: {outcome: allow}}\n  - {name: a, request: {tool: y}, want: {outcome: allow}}\n", []string{`t.yaml:6: case "a": duplicate case name (first at line 5)`}},
		{"no request", pol + "cases:\n  - {name: a, want: {outcome: allow}}\n", []string{`t.yaml:5: case "a": request: missing`}},
		{"request without tool", pol + "cases:\n  - {name: a, request: {args: {}}, want: {outcome: allow}}\n", []string{`t.yaml:5: case "a": request: missing "tool"`}},
		{"request unknown field", pol + "cases:\n  - name: a\n    request:\n      tool: x\n      sesion: s1\n    want: {outcome: allow}\n", []string{`t.yaml:8: case "a": request: unknown field "sesion"`}},
		{"request bad grant", pol + "cases:\n  - {name: a, request: {tool: x, grants: [{tool: x, kind: forever}]}, want: {outcome: allow}}\n", []string{`t.yaml:5: case "a": request: grants[0]: unknown kind "forever"`}},
		{"request wrong type", pol + "cases:\n  - {name: a, request: {tool: x, userPresent: \"yes\"}, want: {outcome: allow}}\n", []string{`t.yaml:5: case "a": request: field "userPresent"`}},
		{"request unknown element", pol + "cases:\n  - name: a\n    request:\n      tool: x\n      activeElements: [E, F]\n    want: {outcome: allow}\n", []string{`t.yaml:8: case "a": request.activeElements[1]: no element "F" in the policy`}},
		{"request infinite number", pol + "cases:\n  - {name: a, request: {tool: x, args: {n: .inf}}, want: {outcome: allow}}\n", []string{`t.yaml:5: case "a": request: ".inf" is not a number JSON can hold`}},
		{"no want", pol + "cases:\n  - {name: a, request: {tool: x}}\n", []string{`t.yaml:5: case "a": want: missing`}},
		{"empty want", pol + "cases:\n  - {name: a, request: {tool: x}, want: {}}\n", []string{`t.yaml:5: case "a": want: empty (want at least one of outcome, permissionLevel`}},
		{"unknown want key", pol + "cases:\n  - {name: a, request: {tool: x}, want: {level: DENY}}\n", []string{`t.yaml:5: case "a": want: unknown key "level"`}},
		{"unknown outcome", pol + "cases:\n  - {name: a, request: {tool: x}, want: {outcome: allowed}}\n", []string{`t.yaml:5: case "a": want.outcome: unknown outcome "allowed" (want allow, confirm, deny or stop)`}},
		{"unknown level", pol + "cases:\n  - {name: a, request: {tool: x}, want: {permissionLevel: CONFIRM}}\n", []string{`t.yaml:5: case "a": want.permissionLevel: unknown level "CONFIRM"`}},
		{"unknown code", pol + "cases:\n  - {name: a, request: {tool: x}, want: {code: DENIED}}\n", []string{`t.yaml:5: case "a": want.code: unknown code "DENIED" (want "", UNKNOWN_OPERATION`}},
		{"unknown source", pol + "cases:\n  - {name: a, request: {tool: x}, want: {source: policy}}\n", []string{`t.yaml:5: case "a": want.source: unknown source "policy"`}},
		{"unknown matched policy", pol + "cases:\n  - {name: a, request: {tool: x}, want: {matchedPolicy: block}}\n", []string{`t.yaml:5: case "a": want.matchedPolicy: unknown matched policy "block"`}},
		{"unknown risk", pol + "cases:\n  - {name: a, request: {tool: x}, want: {risk: high}}\n", []string{`t.yaml:5: case "a": want.risk: unknown risk "high"`}},
		{"non-boolean failClosed", pol + "cases:\n  - {name: a, request: {tool: x}, want: {failClosed: no}}\n", []string{`t.yaml:5: case "a": want.failClosed: got string "no", want true or false`}},
		{"bad conflict", pol + "cases:\n  - {name: a, request: {tool: x}, want: {conflictingElements: [{name: E, level: DENY}]}}\n",
			[]string{`t.yaml:5: case "a": want.conflictingElements[0]: unknown key "level"`, `want.conflictingElements[0].wantedLevel: missing`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tf, err := policy.ParseTests("t.yaml", []byte(tt.src))
			if err == nil {
				t.Fatalf("ParseTests(%s) = %+v, nil; want an error", tt.name, tf)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("ParseTests(%s) error =\n%v\nwant it to contain\n%s", tt.name, err, w)
				}
			}
		})
	}
}

func TestLoadTestsPolicyErrorsNameThePolicyFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := writeFile(p, content); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("bad.yaml", "version: 1\nmode: loud\n")
	tp := write("bad_test.yaml", "policy: bad.yaml\ncases:\n  - {name: a, request: {tool: x}, want: {outcome: allow}, extra: 1}\n")
	_, err := policy.LoadTests(tp)
	if portcullis.ErrorCode(err) != portcullis.CodeInvalidPolicy {
		t.Fatalf("LoadTests(bad policy) = %v; want INVALID_POLICY", err)
	}
	for _, w := range []string{filepath.Join(dir, "bad.yaml") + `:2: mode: unknown mode "loud"`, tp + `:3: case "a": unknown key "extra"`} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("LoadTests(bad policy) error =\n%v\nwant it to contain\n%s", err, w)
		}
	}
}

// fakeDecider returns canned decisions by tool, and an error for a tool it
// does not know.
type fakeDecider map[string]portcullis.Decision

func (f fakeDecider) Decide(_ context.Context, c portcullis.Call) (portcullis.Decision, error) {
	d, ok := f[c.Tool]
	if !ok {
		return portcullis.Decision{Outcome: portcullis.OutcomeDeny, PermissionLevel: portcullis.Deny, FailClosed: true},
			portcullis.Errorf(portcullis.CodeInvalidRequest, "no such tool %q\nsecond line", c.Tool)
	}
	return d, nil
}

func TestRunTests(t *testing.T) {
	src := `policy: {version: 1}
cases:
  - name: passes
    request: {tool: list_elements}
    want: {outcome: allow, permissionLevel: AUTO_APPROVE, conflictingElements: []}
  - name: every field differs
    request: {tool: delete_element}
    want:
      outcome: deny
      permissionLevel: DENY
      code: ELEMENT_POLICY_VIOLATION
      source: element_policy
      sourceElement: Security Persona
      matchedPolicy: deny
      conflictingElements: [{name: Permissive Skill, wantedLevel: AUTO_APPROVE}]
      failClosed: true
      reasonContains: "denied by"
      tool: delete_element
      risk: policy-write
  - name: decide fails
    request: {tool: unknown}
    want: {outcome: deny}
`
	tf, err := policy.ParseTests("run_test.yaml", []byte(src))
	if err != nil {
		t.Fatalf("ParseTests(run) = %v", err)
	}
	d := fakeDecider{
		"list_elements": {Outcome: portcullis.OutcomeAllow, PermissionLevel: portcullis.AutoApprove},
		"delete_element": {
			Outcome: portcullis.OutcomeConfirm, PermissionLevel: portcullis.ConfirmSingleUse,
			Reason: "needs a person", Source: portcullis.SourceOperationDefault, Tool: "delete",
			ConflictingElements: []portcullis.Conflict{{Name: "A", WantedLevel: portcullis.AutoApprove}},
		},
	}
	results := policy.RunTests(context.Background(), d, tf)
	if len(results) != 3 {
		t.Fatalf("RunTests = %d results; want 3", len(results))
	}
	if !results[0].Passed() {
		t.Errorf("RunTests case %q = %v, %v; want passed", results[0].Case.Name, results[0].Diffs, results[0].Err)
	}
	wantDiffs := []string{
		"outcome: got confirm, want deny",
		"permissionLevel: got CONFIRM_SINGLE_USE, want DENY",
		`code: got "", want ELEMENT_POLICY_VIOLATION`,
		"source: got operation_default, want element_policy",
		`sourceElement: got "", want "Security Persona"`,
		`matchedPolicy: got "", want deny`,
		`conflictingElements: got [{name: "A", wantedLevel: AUTO_APPROVE}], want [{name: "Permissive Skill", wantedLevel: AUTO_APPROVE}]`,
		"failClosed: got false, want true",
		`reason: got "needs a person", want it to contain "denied by"`,
		`tool: got "delete", want "delete_element"`,
		`risk: got "", want policy-write`,
	}
	if diff := cmp.Diff(wantDiffs, results[1].Diffs); diff != "" {
		t.Errorf("RunTests diffs mismatch (-want +got):\n%s", diff)
	}
	if results[2].Passed() || results[2].Err == nil {
		t.Errorf("RunTests case %q = passed %v, err %v; want a failure with the Decide error", results[2].Case.Name, results[2].Passed(), results[2].Err)
	}

	var out bytes.Buffer
	failed := policy.FormatResults(&out, results, true)
	want := "PASS passes\n" +
		"FAIL run_test.yaml:6 every field differs\n    " + strings.Join(wantDiffs, "\n    ") + "\n" +
		"FAIL run_test.yaml:20 decide fails\n    error: no such tool \"unknown\"\n    second line\n" +
		"1 passed, 2 failed\n"
	if failed != 2 {
		t.Errorf("FormatResults failed = %d; want 2", failed)
	}
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("FormatResults output mismatch (-want +got):\n%s", diff)
	}
	out.Reset()
	policy.FormatResults(&out, results[:1], false)
	if got := out.String(); got != "1 passed, 0 failed\n" {
		t.Errorf("FormatResults(quiet) = %q; want only the summary", got)
	}
}

func TestRunTestsStopsWhenCancelled(t *testing.T) {
	tf, err := policy.ParseTests("c.yaml", []byte("policy: {version: 1}\ncases:\n  - {name: a, request: {tool: x}, want: {outcome: allow}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	results := policy.RunTests(ctx, fakeDecider{"x": {Outcome: portcullis.OutcomeAllow}}, tf)
	if len(results) != 1 || !errors.Is(results[0].Err, context.Canceled) {
		t.Errorf("RunTests(cancelled) = %+v; want the case failed with context.Canceled", results)
	}
}
