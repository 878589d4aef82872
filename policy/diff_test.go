package policy_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/policy"
)

func mustParse(t *testing.T, name, src string) *portcullis.Policy {
	t.Helper()
	pol, _, err := policy.Parse(name, []byte(src))
	if err != nil {
		t.Fatalf("Parse(%s): %v", name, err)
	}
	return pol
}

const diffBase = `
version: 1
tools:
  list_elements:  {endpoint: READ}
  create_element: {endpoint: CREATE}
  delete_element: {endpoint: DELETE, defaultLevel: CONFIRM_SINGLE_USE, canBeElevated: false}
  Bash:           {endpoint: EXECUTE, shellArg: command}
  open_portfolio_browser: {endpoint: READ, aliases: [open_console, browse]}
elements:
  - name: Security Persona
    type: persona
    gatekeeper:
      confirm: [create_element]
      deny: [delete_*, remove_*]
  - name: deploy-bot
    type: agent
    autonomy: {riskTolerance: conservative, maxAutonomousSteps: 10, requiresApproval: ["*delete*"]}
shell:
  rules:
    - {pattern: [git, [push, fetch]], decision: confirm, justification: "shared history"}
`

func TestDiffIgnoresOrderAndFormatting(t *testing.T) {
	other := `
version: 1
mode: enforce            # the default, written out
unknownTools: confirm
shell:
  rules:
    - pattern: [git, [push, fetch]]
      decision: confirm
      justification: "shared history"
elements:
  - name: deploy-bot
    type: agent
    active: true
    autonomy:
      requiresApproval: ["*delete*"]
      maxAutonomousSteps: 10
      riskTolerance: conservative
  - name: Security Persona
    type: persona
    gatekeeper: {deny: [remove_*, delete_*, delete_*], confirm: [create_element]}
tools:
  open_portfolio_browser: {endpoint: READ, aliases: [browse, open_console]}
  Bash: {shellArg: command, endpoint: EXECUTE}
  delete_element:
    endpoint: DELETE
    defaultLevel: CONFIRM_SINGLE_USE
    canBeElevated: false
  create_element: {endpoint: CREATE}
  list_elements: {endpoint: READ}
`
	a, b := mustParse(t, "a.yaml", diffBase), mustParse(t, "b.yaml", other)
	if a.Hash == b.Hash {
		t.Fatal("the two files have the same hash; the test needs different bytes")
	}
	if got := policy.Diff(a, b); len(got) != 0 {
		t.Errorf("Diff(equivalent policies) = %v; want no changes", got)
	}
}

func TestDiff(t *testing.T) {
	changed := `
version: 1
mode: shadow
unknownTools: deny
policyDocument: /etc/portcullis/permissions.md
tools:
  list_elements:  {endpoint: READ, mode: enforce}
  create_element: {endpoint: UPDATE}
  delete_element: {endpoint: DELETE, defaultLevel: DENY, canBeElevated: false, rationale: "never"}
  Bash:           {endpoint: EXECUTE, shellArg: cmd, risk: external-write}
  open_portfolio_browser: {endpoint: READ, aliases: [open_console, open_ui]}
  send_email:     {endpoint: CREATE, risk: external-write}
elements:
  - name: Security Persona
    type: persona
    active: false
    gatekeeper:
      confirm: [create_element]
      deny: [delete_*, drop_*]
      scope: {blockedTypes: [agent]}
  - name: deploy-bot
    type: agent
    autonomy: {riskTolerance: moderate, maxAutonomousSteps: 0, requiresApproval: ["*delete*"], autoApprove: ["list*"]}
  - name: Reader
    type: skill
    gatekeeper: {allow: [list_*]}
shell:
  rules:
    - {pattern: [git, [push, fetch]], decision: deny, justification: "shared history"}
    - {pattern: [terraform, apply], decision: confirm}
validator:
  provider: command
  command: [claude, -p]
  timeout: 5s
  scope: {shell: true}
migrations:
  - {name: m1, paths: [/a.md]}
approvals: {wait: 2m}
upstreamRequests: {sampling: confirm, roots: deny}
audit:
  redact: [password]
  retention: {maxAge: 720h, maxRows: 1000}
`
	got := policy.Diff(mustParse(t, "old.yaml", diffBase), mustParse(t, "new.yaml", changed))
	want := []policy.Change{
		{Kind: policy.Changed, Section: "policy", Field: "mode", Old: "enforce", New: "shadow"},
		{Kind: policy.Changed, Section: "policy", Field: "unknownTools", Old: "confirm", New: "deny"},
		{Kind: policy.Changed, Section: "policy", Field: "policyDocument", Old: "", New: "/etc/portcullis/permissions.md"},
		{Kind: policy.Changed, Section: "tool", Name: "Bash", Field: "risk", Old: "", New: "external-write"},
		{Kind: policy.Changed, Section: "tool", Name: "Bash", Field: "shellArg", Old: "command", New: "cmd"},
		{Kind: policy.Changed, Section: "tool", Name: "create_element", Field: "endpoint", Old: "CREATE", New: "UPDATE"},
		{Kind: policy.Changed, Section: "tool", Name: "create_element", Field: "level", Old: "CONFIRM_SESSION (endpoint default)", New: "CONFIRM_SINGLE_USE (endpoint default)"},
		{Kind: policy.Changed, Section: "tool", Name: "delete_element", Field: "level", Old: "CONFIRM_SINGLE_USE", New: "DENY"},
		{Kind: policy.Changed, Section: "tool", Name: "delete_element", Field: "rationale", Old: "", New: "never"},
		{Kind: policy.Changed, Section: "tool", Name: "list_elements", Field: "mode", Old: "", New: "enforce"},
		{Kind: policy.Changed, Section: "tool", Name: "open_portfolio_browser", Field: "aliases", Old: "[open_console, browse]", New: "[open_console, open_ui]",
			AddedItems: []string{"open_ui"}, RemovedItems: []string{"browse"}},
		{Kind: policy.Added, Section: "tool", Name: "send_email", New: "CREATE, CONFIRM_SESSION, risk external-write"},
		{Kind: policy.Added, Section: "element", Name: "Reader", New: "skill, active, allow [list_*]"},
		{Kind: policy.Changed, Section: "element", Name: "Security Persona", Field: "active", Old: "true", New: "false"},
		{Kind: policy.Changed, Section: "element", Name: "Security Persona", Field: "gatekeeper.deny", Old: "[delete_*, remove_*]", New: "[delete_*, drop_*]",
			AddedItems: []string{"drop_*"}, RemovedItems: []string{"remove_*"}},
		{Kind: policy.Changed, Section: "element", Name: "Security Persona", Field: "gatekeeper.scope.blockedTypes", Old: "", New: "[agent]", AddedItems: []string{"agent"}},
		{Kind: policy.Changed, Section: "element", Name: "deploy-bot", Field: "autonomy.riskTolerance", Old: "conservative", New: "moderate"},
		{Kind: policy.Changed, Section: "element", Name: "deploy-bot", Field: "autonomy.maxAutonomousSteps", Old: "10 steps", New: "unlimited steps"},
		{Kind: policy.Changed, Section: "element", Name: "deploy-bot", Field: "autonomy.autoApprove", Old: "", New: "[list*]", AddedItems: []string{"list*"}},
		{Kind: policy.Changed, Section: "shell", Name: "git [push, fetch]", Field: "decision", Old: "confirm", New: "deny"},
		{Kind: policy.Added, Section: "shell", Name: "terraform apply", New: "confirm"},
		{Kind: policy.Added, Section: "validator", New: "command, scope [every shell command]"},
		{Kind: policy.Added, Section: "migration", Name: "m1", New: "paths [/a.md]"},
		{Kind: policy.Changed, Section: "approvals", Field: "wait", Old: "45s", New: "2m0s"},
		{Kind: policy.Changed, Section: "upstreamRequests", Field: "sampling", Old: "deny", New: "confirm"},
		{Kind: policy.Changed, Section: "upstreamRequests", Field: "roots", Old: "allow", New: "deny"},
		{Kind: policy.Changed, Section: "audit", Field: "redact", Old: "", New: "[password]", AddedItems: []string{"password"}},
		{Kind: policy.Changed, Section: "audit", Field: "retention.maxAge", Old: "", New: "720h0m0s"},
		{Kind: policy.Changed, Section: "audit", Field: "retention.maxRows", Old: "", New: "1000"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Diff mismatch (-want +got):\n%s", diff)
	}
}

func TestDiffRemovals(t *testing.T) {
	before := mustParse(t, "old.yaml", diffBase+`
validator: {provider: anthropic, model: claude-haiku-4-5, apiKeyEnv: K}
migrations: [{name: m1, paths: [/a.md, /b.md]}]
`)
	after := mustParse(t, "new.yaml", `
version: 1
tools:
  list_elements:  {endpoint: READ}
elements:
  - name: Security Persona
    type: persona
    gatekeeper: {confirm: [create_element], deny: [delete_*, remove_*]}
migrations: [{name: m1, paths: [/a.md]}]
`)
	got := policy.Diff(before, after)
	want := []policy.Change{
		{Kind: policy.Removed, Section: "tool", Name: "Bash", Old: "EXECUTE, CONFIRM_SINGLE_USE, shellArg command"},
		{Kind: policy.Removed, Section: "tool", Name: "create_element", Old: "CREATE, CONFIRM_SESSION"},
		{Kind: policy.Removed, Section: "tool", Name: "delete_element", Old: "DELETE, CONFIRM_SINGLE_USE, not elevatable"},
		{Kind: policy.Removed, Section: "tool", Name: "open_portfolio_browser", Old: "READ, AUTO_APPROVE, aliases [open_console, browse]"},
		{Kind: policy.Removed, Section: "element", Name: "deploy-bot", Old: "agent, active, autonomy conservative, 10 steps, requiresApproval [*delete*]"},
		{Kind: policy.Removed, Section: "shell", Name: "git [push, fetch]", Old: "confirm: shared history"},
		{Kind: policy.Removed, Section: "validator", Old: "anthropic claude-haiku-4-5, scope [external-write, policy-write]"},
		{Kind: policy.Changed, Section: "migration", Name: "m1", Field: "paths", Old: "[/a.md, /b.md]", New: "[/a.md]", RemovedItems: []string{"/b.md"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Diff mismatch (-want +got):\n%s", diff)
	}
}

func TestDiffValidatorFields(t *testing.T) {
	a := &portcullis.Policy{Version: 1, Validator: &portcullis.ValidatorConfig{Provider: "openai", Model: "m", Timeout: 10 * time.Second,
		Scope: portcullis.ValidatorScope{Risks: []portcullis.Risk{portcullis.RiskExternalWrite}}}}
	b := &portcullis.Policy{Version: 1, Validator: &portcullis.ValidatorConfig{Provider: "openai", Model: "m2", BaseURL: "http://127.0.0.1:1", Timeout: 3 * time.Second, Mode: "contextual",
		Scope:          portcullis.ValidatorScope{Risks: []portcullis.Risk{portcullis.RiskPolicyWrite}, Tools: []string{"send"}},
		TrustedContext: []string{"hook-bot"}, Budget: portcullis.ValidatorBudget{PerMinute: 5}}}
	got := policy.Diff(a, b)
	want := []policy.Change{
		{Kind: policy.Changed, Section: "validator", Field: "model", Old: "m", New: "m2"},
		{Kind: policy.Changed, Section: "validator", Field: "baseURL", Old: "", New: "http://127.0.0.1:1"},
		{Kind: policy.Changed, Section: "validator", Field: "timeout", Old: "10s", New: "3s"},
		{Kind: policy.Changed, Section: "validator", Field: "mode", Old: "", New: "contextual"},
		{Kind: policy.Changed, Section: "validator", Field: "scope.risks", Old: "[external-write]", New: "[policy-write]",
			AddedItems: []string{"policy-write"}, RemovedItems: []string{"external-write"}},
		{Kind: policy.Changed, Section: "validator", Field: "scope.tools", Old: "", New: "[send]", AddedItems: []string{"send"}},
		{Kind: policy.Changed, Section: "validator", Field: "trustedContext", Old: "", New: "[hook-bot]", AddedItems: []string{"hook-bot"}},
		{Kind: policy.Changed, Section: "validator", Field: "budget.perMinute", Old: "0", New: "5"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Diff mismatch (-want +got):\n%s", diff)
	}
}

func TestChangeString(t *testing.T) {
	for _, tc := range []struct {
		c    policy.Change
		want string
	}{
		{policy.Change{Kind: policy.Changed, Section: "policy", Field: "mode", Old: "enforce", New: "shadow"}, `policy: mode enforce → shadow`},
		{policy.Change{Kind: policy.Changed, Section: "tool", Name: "x", Field: "risk", New: "external-write"}, `tool "x": risk (none) → external-write`},
		{policy.Change{Kind: policy.Added, Section: "tool", Name: "send", New: "CREATE, CONFIRM_SESSION"}, `tool "send" added: CREATE, CONFIRM_SESSION`},
		{policy.Change{Kind: policy.Removed, Section: "validator", Old: "anthropic"}, `validator removed: anthropic`},
		{policy.Change{Kind: policy.Changed, Section: "element", Name: "P", Field: "gatekeeper.deny", AddedItems: []string{"a", "b"}, RemovedItems: []string{"c"}},
			`element "P": gatekeeper.deny: added a, b; removed c`},
		{policy.Change{Kind: policy.Changed, Section: "element", Name: "P", Field: "gatekeeper.allow", RemovedItems: []string{"c"}}, `element "P": gatekeeper.allow: removed c`},
	} {
		if got := tc.c.String(); got != tc.want {
			t.Errorf("%#v.String() = %q; want %q", tc.c, got, tc.want)
		}
	}
}
