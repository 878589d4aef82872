package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/portcullis/portcullis"
)

// Calls decided with a state directory count against the policy's
// budgets; `portcullis budgets` lists each counter's use, and `policy
// test` runs the budget cases on the file's clock.
func TestBudgetsCommand(t *testing.T) {
	dir := t.TempDir()
	pol := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(pol, []byte(`version: 1
tools:
  send_email: {endpoint: CREATE, defaultLevel: AUTO_APPROVE}
budgets:
  - {name: email-rate, tools: [send_email], limit: 2, window: day}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	in := strings.Repeat(`{"tool": "send_email", "agent": "mailer"}`+"\n", 3)
	code, out, stderr := runCLI(t, in, "decide", "--policy", pol, "--state", state)
	if code != 0 {
		t.Fatalf("decide = %d: %s", code, stderr)
	}
	ds := decisions(t, out)
	if len(ds) != 3 || !ds[0].Allowed() || !ds[1].Allowed() || ds[2].Code != portcullis.CodeBudgetExceeded || ds[2].Budget == nil {
		t.Fatalf("decide = %+v; want allow, allow, BUDGET_EXCEEDED", ds)
	}
	code, out, stderr = runCLI(t, "", "budgets", "--state", state)
	if code != 0 {
		t.Fatalf("budgets = %d: %s", code, stderr)
	}
	if !strings.Contains(out, "BUDGET") || !lineHas(out, "email-rate", "mailer", "2", "2", "0") {
		t.Errorf("budgets:\n%s\nwant a row: email-rate mailer ... 2 2 0", out)
	}
	code, out, _ = runCLI(t, "", "budgets", "--state", state, "--json", "email-rate")
	var u portcullis.BudgetUsage
	if code != 0 || json.Unmarshal([]byte(out), &u) != nil || u.Agent != "mailer" || u.Used != portcullis.Units(2) {
		t.Errorf("budgets --json = %d %q; want mailer at 2", code, out)
	}
	code, out, _ = runCLI(t, "", "policy", "test", "../../gate/testdata/cases/budgets.yaml")
	if code != 0 {
		t.Errorf("policy test budgets.yaml = %d:\n%s", code, out)
	}
}

// lineHas reports whether some line holds the fields in order.
func lineHas(out string, fields ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		i := 0
		for _, w := range f {
			if i < len(fields) && w == fields[i] {
				i++
			}
		}
		if i == len(fields) {
			return true
		}
	}
	return false
}
