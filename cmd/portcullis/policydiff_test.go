package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/policydiff"
)

func TestPolicyDiffEqual(t *testing.T) {
	code, stdout, stderr := runCLI(t, "", "policy", "diff", "testdata/policy.yaml", "testdata/policy.yaml")
	if code != 0 {
		t.Fatalf("policy diff of a file with itself: exit %d; stderr: %s", code, stderr)
	}
	if !strings.Contains(stdout, "decide alike") {
		t.Errorf("stdout = %q; want it to say the policies decide alike", stdout)
	}
}

func TestPolicyDiffTable(t *testing.T) {
	code, stdout, stderr := runCLI(t, "", "policy", "diff", "testdata/policy.yaml", "testdata/policydiff_new.yaml")
	if code != 1 {
		t.Fatalf("policy diff of different policies: exit %d; want 1; stderr: %s", code, stderr)
	}
	golden(t, "policydiff", stdout)
}

func TestPolicyDiffJSON(t *testing.T) {
	code, stdout, stderr := runCLI(t, "", "policy", "diff", "--json", "testdata/policy.yaml", "testdata/policydiff_new.yaml")
	if code != 1 {
		t.Fatalf("policy diff --json: exit %d; want 1; stderr: %s", code, stderr)
	}
	var d policydiff.Report
	if err := json.Unmarshal([]byte(stdout), &d); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout)
	}
	if d.Equal || len(d.Changes) != 4 {
		t.Errorf("equal = %v, %d changes; want false, 4", d.Equal, len(d.Changes))
	}
	levels := map[string]policydiff.Level{}
	for _, l := range d.Levels {
		levels[l.Tool] = l
	}
	for _, want := range []policydiff.Level{
		// the confirm of Security Persona is gone: the skill's allow now auto-approves
		{Tool: "create_element", Old: portcullis.ConfirmSession, New: portcullis.AutoApprove, OldMode: "enforce", NewMode: "enforce", Change: "looser", InOld: true, InNew: true},
		{Tool: "edit_element", Old: portcullis.AutoApprove, New: portcullis.AutoApprove, OldMode: "enforce", NewMode: "shadow", Change: "mode", InOld: true, InNew: true},
		// denied by the persona before and after, whatever its own level
		{Tool: "delete_element", Old: portcullis.Deny, New: portcullis.Deny, OldMode: "enforce", NewMode: "enforce", InOld: true, InNew: true},
		// named only in an allow list: unclassified, never auto-approved
		{Tool: "publish", Old: portcullis.ConfirmSingleUse, New: portcullis.ConfirmSingleUse, OldMode: "enforce", NewMode: "enforce"},
	} {
		if got := levels[want.Tool]; got != want {
			t.Errorf("levels[%s] = %+v; want %+v", want.Tool, got, want)
		}
	}
	if _, ok := levels["open_console"]; ok {
		t.Errorf("levels lists the alias open_console; want only canonical names")
	}
	if _, ok := levels["confirm_operation"]; ok {
		t.Errorf("levels lists confirm_operation, which is not a tool")
	}
}

func TestPolicyDiffStricterElement(t *testing.T) {
	dir := t.TempDir()
	old := writeTemp(t, dir, "old.yaml", "version: 1\ntools:\n  send: {endpoint: CREATE}\n")
	upd := writeTemp(t, dir, "new.yaml", "version: 1\ntools:\n  send: {endpoint: CREATE}\nelements:\n  - {name: Lock, type: persona, gatekeeper: {deny: [send]}}\n")
	code, stdout, stderr := runCLI(t, "", "policy", "diff", old, upd)
	if code != 1 {
		t.Fatalf("exit %d; want 1; stderr: %s", code, stderr)
	}
	for _, want := range []string{`element "Lock" added: persona, active, deny [send]`, "send  CONFIRM_SESSION  DENY  stricter"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
}

func TestPolicyDiffErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"one file", []string{"policy", "diff", "testdata/policy.yaml"}, "two policy files"},
		{"bad policy", []string{"policy", "diff", "testdata/policy.yaml", "testdata/bad_policy.yaml"}, "bad_policy.yaml"},
		{"missing file", []string{"policy", "diff", "testdata/nope.yaml", "testdata/policy.yaml"}, "nope.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, "", tc.args...)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Errorf("%v: exit %d, stderr %q; want exit 2 naming %q", tc.args, code, stderr, tc.want)
			}
		})
	}
}

func writeTemp(t testing.TB, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
