package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/portcullis/portcullis"
)

var update = flag.Bool("update", false, "rewrite golden files")

// runCLI runs the command in process and returns its exit status and output.
func runCLI(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	code = exitCode(err, &errb)
	return code, out.String(), errb.String()
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run go test -update to create it): %v", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (run go test -update after checking):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func decisions(t *testing.T, stdout string) []portcullis.Decision {
	t.Helper()
	var ds []portcullis.Decision
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		if line == "" {
			continue
		}
		var d portcullis.Decision
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			t.Fatalf("stdout line %q is not a decision: %v", line, err)
		}
		ds = append(ds, d)
	}
	return ds
}

func TestDecide(t *testing.T) {
	in := strings.Join([]string{
		`{"tool": "list_elements"}`,
		``,
		`{"tool": "create_element", "session": "s1"}`,
		`{"tool": "delete_element", "args": {"name": "x"}}`,
		`{"tool": "open_console"}`,
		`{"tool": "edit_element", "activeElements": ["Sandbox"]}`,
		`{"tool": "create_element", "session": "s1", "grants": [{"tool": "create_element", "kind": "session"}]}`,
	}, "\n")
	code, stdout, stderr := runCLI(t, in, "decide", "--policy", "testdata/policy.yaml")
	if code != 0 {
		t.Fatalf("decide exit %d; stderr: %s", code, stderr)
	}
	type row struct {
		outcome portcullis.Outcome
		level   portcullis.Level
		code    portcullis.Code
		source  portcullis.Source
	}
	want := []row{
		{portcullis.OutcomeAllow, portcullis.AutoApprove, "", portcullis.SourceOperationDefault},
		{portcullis.OutcomeConfirm, portcullis.ConfirmSession, portcullis.CodeConfirmationRequired, portcullis.SourceElementPolicy},
		{portcullis.OutcomeDeny, portcullis.Deny, portcullis.CodeElementPolicyViolation, portcullis.SourceElementPolicy},
		{portcullis.OutcomeAllow, portcullis.AutoApprove, "", portcullis.SourceOperationDefault},
		{portcullis.OutcomeDeny, portcullis.Deny, portcullis.CodeSandboxed, portcullis.SourceElementPolicy},
		{portcullis.OutcomeAllow, portcullis.ConfirmSession, "", portcullis.SourceSessionGrant},
	}
	ds := decisions(t, stdout)
	if len(ds) != len(want) {
		t.Fatalf("decide wrote %d decisions; want %d:\n%s", len(ds), len(want), stdout)
	}
	for i, d := range ds {
		got := row{d.Outcome, d.PermissionLevel, d.Code, d.Source}
		if got != want[i] {
			t.Errorf("decision %d = %+v; want %+v", i+1, got, want[i])
		}
		if d.DecisionID == "" || len(d.Trace) == 0 {
			t.Errorf("decision %d lacks an id or a trace: %+v", i+1, d)
		}
	}
	if ds[3].Tool != "open_portfolio_browser" {
		t.Errorf("alias resolved to %q; want open_portfolio_browser", ds[3].Tool)
	}
}

func TestDecideBadInput(t *testing.T) {
	for _, tc := range []struct {
		name       string
		stdin      string
		args       []string
		wantStderr []string
		wantLines  int // decisions written before the bad line
	}{
		{"malformed line", "{\"tool\":\"list_elements\"}\n{\"tool\": \n", []string{"--policy", "testdata/policy.yaml"}, []string{"line 2:", "JSON"}, 1},
		{"missing tool", "{\"args\": {}}\n", []string{"--policy", "testdata/policy.yaml"}, []string{"line 1:", `missing "tool"`}, 0},
		{"unknown element", "{\"tool\":\"x\",\"activeElements\":[\"Nobody\"]}\n", []string{"--policy", "testdata/policy.yaml"}, []string{"line 1:", `"Nobody"`}, 0},
		{"bad policy", "{\"tool\":\"list_elements\"}\n", []string{"--policy", "testdata/bad_policy.yaml"}, []string{"bad_policy.yaml:10", "alow"}, 0},
		{"missing policy file", "", []string{"--policy", "testdata/nope.yaml"}, []string{"nope.yaml"}, 0},
		{"stray argument", "", []string{"--policy", "testdata/policy.yaml", "extra"}, []string{`"extra"`}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("PORTCULLIS_POLICY", "")
			code, stdout, stderr := runCLI(t, tc.stdin, append([]string{"decide"}, tc.args...)...)
			if code != 2 {
				t.Fatalf("decide exit %d; want 2 (stderr: %s)", code, stderr)
			}
			for _, w := range tc.wantStderr {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q lacks %q", stderr, w)
				}
			}
			if got := len(decisions(t, stdout)); got != tc.wantLines {
				t.Errorf("decide wrote %d decisions; want %d:\n%s", got, tc.wantLines, stdout)
			}
		})
	}
}

func TestDecidePolicyFromEnvironment(t *testing.T) {
	t.Setenv("PORTCULLIS_POLICY", "testdata/policy.yaml")
	code, stdout, stderr := runCLI(t, `{"tool":"list_elements"}`, "decide")
	if code != 0 || len(decisions(t, stdout)) != 1 {
		t.Fatalf("decide exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

func TestExplain(t *testing.T) {
	for _, tc := range []struct{ name, request string }{
		{"explain_deny", `{"tool": "delete_element", "args": {"name": "x"}}`},
		{"explain_conflict", `{"tool": "create_element"}`},
		{"explain_alias", `{"tool": "open_console"}`},
		{"explain_sandbox", `{"tool": "delete_element", "activeElements": ["Sandbox", "Permissive Skill"]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, "", "explain", tc.request, "--policy", "testdata/policy.yaml")
			if code != 0 {
				t.Fatalf("explain exit %d; stderr: %s", code, stderr)
			}
			golden(t, tc.name, stdout)
		})
	}
	code, stdout, _ := runCLI(t, `{"tool": "create_element"}`, "explain", "--json", "--policy", "testdata/policy.yaml", "-")
	if code != 0 {
		t.Fatalf("explain --json - exit %d", code)
	}
	if ds := decisions(t, strings.ReplaceAll(stdout, "\n", "")); len(ds) != 1 || ds[0].Outcome != portcullis.OutcomeConfirm {
		t.Fatalf("explain --json = %q; want one confirm decision", stdout)
	}
	if code, _, stderr := runCLI(t, "", "explain", `{"tool":`, "--policy", "testdata/policy.yaml"); code != 2 || !strings.Contains(stderr, "request:") {
		t.Fatalf("explain malformed: exit %d stderr %q; want 2 naming the request", code, stderr)
	}
}

func TestPolicyLint(t *testing.T) {
	code, stdout, _ := runCLI(t, "", "policy", "lint", "testdata/policy.yaml")
	if code != 0 || !strings.Contains(stdout, "0 warnings") {
		t.Fatalf("lint clean policy: exit %d, %q", code, stdout)
	}
	code, stdout, _ = runCLI(t, "", "policy", "lint", "testdata/lint_warnings.yaml")
	if code != 0 || !strings.Contains(stdout, "verify_challenge") || !strings.Contains(stdout, "confirm_operation") {
		t.Fatalf("lint with warnings: exit %d, %q; want 0 and both warnings", code, stdout)
	}
	if code, _, _ = runCLI(t, "", "policy", "lint", "--strict", "testdata/lint_warnings.yaml"); code != 1 {
		t.Fatalf("lint --strict with warnings: exit %d; want 1", code)
	}
	code, _, stderr := runCLI(t, "", "policy", "lint", "testdata/bad_policy.yaml")
	if code != 2 || !strings.Contains(stderr, "bad_policy.yaml:10") {
		t.Fatalf("lint bad policy: exit %d, stderr %q; want 2 naming line 10", code, stderr)
	}
}

func TestPolicyTest(t *testing.T) {
	code, stdout, stderr := runCLI(t, "", "policy", "test", "testdata/pass_test.yaml")
	if code != 0 || !strings.Contains(stdout, "2 passed, 0 failed") {
		t.Fatalf("policy test pass: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, stdout, _ = runCLI(t, "", "policy", "test", "testdata/pass_test.yaml", "testdata/fail_test.yaml")
	if code != 1 || !strings.Contains(stdout, "FAIL") || !strings.Contains(stdout, "outcome: got allow, want confirm") || !strings.Contains(stdout, "2 passed, 1 failed") {
		t.Fatalf("policy test fail: exit %d, stdout %q; want 1 with a diff", code, stdout)
	}
	code, _, stderr = runCLI(t, "", "policy", "test", "testdata/policy.yaml")
	if code != 2 || stderr == "" {
		t.Fatalf("policy test on a non-test file: exit %d, stderr %q; want 2 with a message", code, stderr)
	}
}

func TestUsage(t *testing.T) {
	if code, _, stderr := runCLI(t, ""); code != 2 || !strings.Contains(stderr, "Usage") {
		t.Fatalf("no args: exit %d, %q", code, stderr)
	}
	if code, _, stderr := runCLI(t, "", "frobnicate"); code != 2 || !strings.Contains(stderr, `unknown command "frobnicate"`) {
		t.Fatalf("unknown command: exit %d, %q", code, stderr)
	}
	if code, stdout, _ := runCLI(t, "", "help"); code != 0 || !strings.Contains(stdout, "portcullis decide") {
		t.Fatalf("help: exit %d, %q", code, stdout)
	}
}
