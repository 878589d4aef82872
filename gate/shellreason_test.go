package gate_test

import (
	"strings"
	"testing"

	"github.com/portcullis/portcullis"
)

const shellReasonPolicy = `
version: 1
tools:
  Bash: {endpoint: EXECUTE, shellArg: command}
`

// TestShellReasonNamesTheFinding checks that the reason the agent and the
// person read says what the classifier found, not only that a person must
// confirm.
func TestShellReasonNamesTheFinding(t *testing.T) {
	g := mustGate(t, shellReasonPolicy)
	for _, tc := range []struct {
		command string
		want    string
	}{
		{"rm -rf ~", "(dangerous: rm with -r and -f on ~)"},
		{"taskset -c 1 rm -rf /", "rm with -r and -f on /"},
		{"echo $AWS_SECRET_ACCESS_KEY", "(dangerous: echo prints the secret environment variable $AWS_SECRET_ACCESS_KEY)"},
		{"rm -rf node_modules", "(moderate: rm with -r and -f deletes regenerated files inside the working directory (node_modules))"},
	} {
		d := decide(t, g, portcullis.Call{Tool: "Bash", Args: map[string]any{"command": tc.command}})
		if d.Outcome != portcullis.OutcomeConfirm {
			t.Errorf("Decide(%s) = %s; want confirm", tc.command, d.Outcome)
		}
		if !strings.Contains(d.Reason, tc.want) {
			t.Errorf("Decide(%s) reason = %q; want it to name the finding %q", tc.command, d.Reason, tc.want)
		}
	}
	if d := decide(t, g, portcullis.Call{Tool: "Bash", Args: map[string]any{"command": "git status"}}); d.Outcome != portcullis.OutcomeAllow {
		t.Errorf("Decide(git status) = %s (%s); want allow", d.Outcome, d.Reason)
	}
}
