package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/portcullis/portcullis"
)

// validatorPolicy writes a policy whose validator is a command: a shell
// script that answers with the given verdict JSON, as `claude -p` would.
func validatorPolicy(t *testing.T, answer string) string {
	t.Helper()
	dir := t.TempDir()
	script := filepath.Join(dir, "judge.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\ncat > /dev/null\nprintf '%s\\n' '"+answer+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "groundRules.md"), []byte("Never send email outside acme.com.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pol := `version: 1
tools:
  list_elements: {endpoint: READ}
  send_email: {endpoint: CREATE, risk: external-write, summary: "send to {{.to}}"}
validator:
  provider: command
  command: [` + script + `]
  rules: ./groundRules.md
  timeout: 5s
`
	path := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(path, []byte(pol), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestDecideConsultsTheValidator(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answer  string
		outcome portcullis.Outcome
		code    portcullis.Code
		fail    bool
	}{
		{"deny", `{"verdict":"deny","reasoning":"outside acme.com","whatWouldAuthorize":"the user asking for it","confidence":0.9}`, portcullis.OutcomeDeny, portcullis.CodeValidatorDenied, false},
		{"allow keeps the level", `{"verdict":"allow","reasoning":"inside acme.com","whatWouldAuthorize":"","confidence":0.9}`, portcullis.OutcomeConfirm, portcullis.CodeConfirmationRequired, false},
		{"prose is not a verdict", `ALLOWED, but DENY if unsure`, portcullis.OutcomeDeny, portcullis.CodeFailClosed, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := validatorPolicy(t, tc.answer)
			code, stdout, stderr := runCLI(t, `{"tool": "send_email", "args": {"to": "jane@acme.com"}}`+"\n"+`{"tool": "list_elements"}`, "decide", "--policy", path)
			if code != 0 {
				t.Fatalf("decide exit %d: %s", code, stderr)
			}
			ds := decisions(t, stdout)
			if len(ds) != 2 {
				t.Fatalf("decide wrote %d decisions", len(ds))
			}
			d := ds[0]
			if d.Outcome != tc.outcome || d.Code != tc.code || d.FailClosed != tc.fail {
				t.Fatalf("send_email = %s/%s failClosed=%v (%s); want %s/%s failClosed=%v", d.Outcome, d.Code, d.FailClosed, d.Reason, tc.outcome, tc.code, tc.fail)
			}
			if ds[1].Outcome != portcullis.OutcomeAllow {
				t.Fatalf("list_elements (outside the validator's scope) = %s; want allow", ds[1].Outcome)
			}
		})
	}
}

func TestValidatorNeedsItsKey(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "policy.yaml")
	pol := "version: 1\nvalidator:\n  provider: anthropic\n  model: claude-haiku-4-5\n  apiKeyEnv: PORTCULLIS_TEST_NO_SUCH_KEY\n  rules: ./rules.md\n"
	if err := os.WriteFile(path, []byte(pol), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PORTCULLIS_TEST_NO_SUCH_KEY", "")
	code, stdout, stderr := runCLI(t, `{"tool":"x"}`, "decide", "--policy", path)
	if code != 2 || stdout != "" || !strings.Contains(stderr, "PORTCULLIS_TEST_NO_SUCH_KEY") {
		t.Fatalf("decide without the validator's key = exit %d, stdout %q, stderr %q; want 2 naming the variable", code, stdout, stderr)
	}
}
