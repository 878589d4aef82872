package policy_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/policy"
)

func TestLoadFullPolicy(t *testing.T) {
	const path = "testdata/full.yaml"
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	dir, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	want := &portcullis.Policy{
		Version:      1,
		Mode:         portcullis.ModeShadow,
		UnknownTools: portcullis.UnknownDeny,
		Tools: []portcullis.ToolPolicy{
			{Name: "list_elements", Endpoint: portcullis.Read, CanBeElevated: true, Line: 6},
			{Name: "create_element", Endpoint: portcullis.Create, CanBeElevated: true, Line: 7},
			{Name: "delete_element", Endpoint: portcullis.Delete, DefaultLevel: portcullis.ConfirmSingleUse,
				Rationale: "Destructive operation, permanently removes data", Line: 8},
			{Name: "send_email", Endpoint: portcullis.Create, CanBeElevated: true, Risk: portcullis.RiskExternalWrite,
				Summary: "send to {{.to}}, subject {{.subject}}", Line: 10},
			{Name: "Bash", Endpoint: portcullis.Execute, CanBeElevated: true, ShellArg: "command", Line: 11},
			{Name: "write_file", Endpoint: portcullis.Update, CanBeElevated: true, PathArg: "path", Line: 12},
			{Name: "open_portfolio_browser", Endpoint: portcullis.Read, CanBeElevated: true, Aliases: []string{"open_console"}, Line: 13},
		},
		PolicyDocument: filepath.Join(dir, "permissions.md"),
		Elements: []portcullis.Element{
			{
				Name: "Security Persona", Type: portcullis.Persona, Active: true, Line: 16,
				Gatekeeper: portcullis.GatekeeperPolicy{
					Confirm: []string{"create_element"},
					Deny:    []string{"delete_*"},
					Scope:   portcullis.Scope{AllowedTypes: []string{"persona", "memory"}, BlockedTypes: []string{"agent"}},
				},
			},
			{
				Name: "deploy-bot", Type: portcullis.Agent, Active: false, Line: 24,
				Autonomy: &portcullis.Autonomy{
					RiskTolerance:      portcullis.Conservative,
					MaxAutonomousSteps: 25,
					RequiresApproval:   []string{"*delete*", "*production*"},
					AutoApprove:        []string{"read*", "list*"},
				},
			},
		},
		Shell: portcullis.ShellPolicy{Rules: []portcullis.ShellRule{{
			Pattern:       [][]string{{"git"}, {"push", "fetch"}},
			Decision:      portcullis.ShellConfirm,
			Justification: "pushes change shared history",
			Match:         []string{"git push origin main"},
			NotMatch:      []string{"git status"},
			Line:          34,
		}}},
		Validator: &portcullis.ValidatorConfig{
			Provider:  "command",
			Model:     "claude-haiku-4-5",
			BaseURL:   "https://api.example.com/v1",
			APIKeyEnv: "ANTHROPIC_API_KEY",
			Command:   []string{"claude", "-p", "--model", "haiku"},
			Timeout:   15 * time.Second,
			Mode:      "contextual",
			Rules:     filepath.Join(dir, "groundRules.md"),
			Scope: portcullis.ValidatorScope{
				Risks: []portcullis.Risk{portcullis.RiskExternalWrite},
				Tools: []string{"Bash"},
				Shell: true,
			},
			Budget: portcullis.ValidatorBudget{PerMinute: 30, Burst: 10, Concurrent: 4},
		},
		Migrations:       []portcullis.Migration{{Name: "add-tentative-default", Paths: []string{"/preferences/calendar.md"}}},
		Approvals:        portcullis.ApprovalsConfig{Wait: 2 * time.Minute, MaxPendingPerAgent: 20, MaxPendingPerSession: 10},
		UpstreamRequests: portcullis.UpstreamRequestsConfig{Sampling: portcullis.UpstreamDeny, Elicitation: portcullis.UpstreamAllow, Roots: portcullis.UpstreamAllow},
		Source:           path,
		Hash:             "sha256:" + hex.EncodeToString(sum[:]),
	}
	got, warns, err := policy.Load(path)
	if err != nil {
		t.Fatalf("Load(%s) error: %v", path, err)
	}
	if len(warns) != 0 {
		t.Errorf("Load(%s) warnings = %v; want none", path, warns)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Load(%s) mismatch (-want +got):\n%s", path, diff)
	}
	// What Parse returns passes Validate unchanged.
	before := *got
	if w, err := policy.Validate(got); err != nil || len(w) != 0 {
		t.Errorf("Validate(Load(%s)) = %v, %v; want no warnings, no error", path, w, err)
	}
	if diff := cmp.Diff(&before, got); diff != "" {
		t.Errorf("Validate changed a loaded policy (-before +after):\n%s", diff)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, _, err := policy.Load("testdata/no-such-file.yaml")
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load(missing) = %v; want an error wrapping fs.ErrNotExist", err)
	}
}

func TestParseRelativePathsAreCleaned(t *testing.T) {
	src := "version: 1\npolicyDocument: ./docs/../permissions.md\nvalidator: {provider: anthropic, model: m, rules: rules//ground.md}\n"
	p, _, err := policy.Parse("p.yaml", []byte(src))
	if err != nil {
		t.Fatalf("Parse = %v", err)
	}
	if p.PolicyDocument != "permissions.md" || p.Validator.Rules != filepath.Join("rules", "ground.md") {
		t.Errorf("Parse paths = %q, %q; want permissions.md, rules/ground.md", p.PolicyDocument, p.Validator.Rules)
	}
}

func TestDefaults(t *testing.T) {
	src := `version: 1
tools:
  read_file: {endpoint: READ}
elements:
  - name: bot
    type: agent
    autonomy: {}
  - name: p
    type: persona
    gatekeeper: {allow: [read_file]}
validator: {provider: anthropic, model: claude-haiku-4-5}
`
	p, warns, err := policy.Parse("defaults.yaml", []byte(src))
	if err != nil {
		t.Fatalf("Parse(defaults) = %v", err)
	}
	if len(warns) != 0 {
		t.Errorf("Parse(defaults) warnings = %v; want none", warns)
	}
	tests := []struct {
		name      string
		got, want any
	}{
		{"mode", p.Mode, portcullis.ModeEnforce},
		{"unknownTools", p.UnknownTools, portcullis.UnknownConfirm},
		{"canBeElevated", p.Tools[0].CanBeElevated, true},
		{"defaultLevel", p.Tools[0].DefaultLevel, portcullis.LevelUnset},
		{"active", p.Elements[0].Active && p.Elements[1].Active, true},
		{"riskTolerance", p.Elements[0].Autonomy.RiskTolerance, portcullis.Moderate},
		{"maxAutonomousSteps", p.Elements[0].Autonomy.MaxAutonomousSteps, 10},
		{"persona autonomy", p.Elements[1].Autonomy == nil, true},
		{"validator.timeout", p.Validator.Timeout, 10 * time.Second},
		{"validator.mode", p.Validator.Mode, "stateless"},
		{"validator.scope", p.Validator.Scope, portcullis.ValidatorScope{Risks: []portcullis.Risk{portcullis.RiskExternalWrite, portcullis.RiskPolicyWrite}}},
		{"validator.budget", p.Validator.Budget, portcullis.ValidatorBudget{PerMinute: portcullis.DefaultValidatorPerMinute, Burst: portcullis.DefaultValidatorBurst, Concurrent: portcullis.DefaultValidatorConcurrent}},
		{"approvals.wait", p.Approvals.Wait, 45 * time.Second},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, tt.got); diff != "" {
			t.Errorf("Parse(defaults) %s = %v; want %v", tt.name, tt.got, tt.want)
		}
	}

	// approvals.wait defaults even when approvals is absent; an explicit
	// scope replaces the default risks.
	p, _, err = policy.Parse("scope.yaml", []byte("version: 1\nvalidator: {provider: openai, model: m, scope: {tools: [send]}}\napprovals: {}\n"))
	if err != nil {
		t.Fatalf("Parse(scope) = %v", err)
	}
	if want := (portcullis.ValidatorScope{Risks: []portcullis.Risk{}, Tools: []string{"send"}}); !cmp.Equal(p.Validator.Scope, want) {
		t.Errorf("Parse(scope) validator.scope = %+v; want %+v", p.Validator.Scope, want)
	}
	if p.Approvals.Wait != 45*time.Second {
		t.Errorf("Parse(scope) approvals.wait = %v; want 45s", p.Approvals.Wait)
	}
}

// parseErr parses src and returns the error's message, failing the test
// when there is no error or it is not an INVALID_POLICY *portcullis.Error.
func parseErr(t *testing.T, name, src string) string {
	t.Helper()
	p, _, err := policy.Parse(name, []byte(src))
	if err == nil {
		t.Fatalf("Parse(%s) = %+v, nil; want an error", name, p)
	}
	var pe *portcullis.Error
	if !errors.As(err, &pe) || pe.Code != portcullis.CodeInvalidPolicy {
		t.Fatalf("Parse(%s) error = %#v; want a *portcullis.Error with code INVALID_POLICY", name, err)
	}
	if p != nil {
		t.Errorf("Parse(%s) returned a policy with its error", name)
	}
	return pe.Message
}

func TestParseErrors(t *testing.T) {
	long := strings.Repeat("x", 501)
	tests := []struct {
		name string
		src  string
		want []string // each must appear in the message
	}{
		{"malformed yaml", "version: 1\ntools:\n  a: {endpoint: READ\n", []string{"bad.yaml:3: malformed YAML"}},
		{"malformed yaml on line 1", "version: 1: 2\n", []string{"bad.yaml:1: malformed YAML: mapping values are not allowed"}},
		{"tab indentation", "version: 1\ntools:\n\ta: {endpoint: READ}\n", []string{"bad.yaml:3: malformed YAML: found character that cannot start any token"}},
		{"control character", "version: 1\nmode: \x01\n", []string{"bad.yaml:2: malformed YAML: control characters"}},
		{"unknown anchor", "version: 1\n\nmode: *m\n", []string{"bad.yaml:3: malformed YAML: unknown anchor 'm'"}},
		{"empty file", "", []string{"bad.yaml: empty file"}},
		{"only comments", "# nothing\n", []string{"bad.yaml: empty file"}},
		{"empty document", "---\n", []string{"empty document"}},
		{"not a mapping", "- version: 1\n", []string{"bad.yaml:1: the policy is a list; want a mapping"}},
		{"scalar file", "hello\n", []string{`bad.yaml:1: the policy is string "hello"; want a mapping`}},
		{"two documents", "version: 1\n---\nversion: 1\n", []string{"bad.yaml:3: a second YAML document"}},
		{"version missing", "mode: enforce\n", []string{"bad.yaml:1: version: missing (want version: 1)"}},
		{"version 2", "version: 2\n", []string{"bad.yaml:1: version: unsupported version 2 (want 1)"}},
		{"version string", "version: \"1\"\n", []string{`bad.yaml:1: version: got string "1", want an integer`}},
		{"unknown top-level key", "version: 1\ntool: {}\n", []string{`bad.yaml:2: unknown key "tool" (did you mean "tools"?)`}},
		{"unknown key no suggestion", "version: 1\nfrobnicate: 3\n", []string{`bad.yaml:2: unknown key "frobnicate"`}},
		{"snake case key", "version: 1\nunknown_tools: deny\n", []string{`bad.yaml:2: unknown key "unknown_tools" (did you mean "unknownTools"?)`}},
		{"duplicate key", "version: 1\nmode: off\nmode: enforce\n", []string{`bad.yaml:3: duplicate key "mode" (first at line 2)`}},
		{"unknown mode", "version: 1\nmode: strict\n", []string{`bad.yaml:2: mode: unknown mode "strict" (want enforce, shadow or off)`}},
		{"unknown unknownTools", "version: 1\nunknownTools: allow\n", []string{`bad.yaml:2: unknownTools: unknown setting "allow" (want confirm or deny)`}},
		{"unknown upstream rule", "version: 1\nupstreamRequests:\n  sampling: ask\n", []string{`bad.yaml:3: upstreamRequests.sampling: unknown rule "ask" (want allow, confirm or deny)`}},
		{"unknown upstream request", "version: 1\nupstreamRequests: {tasks: deny}\n", []string{`bad.yaml:2: upstreamRequests: unknown key "tasks"`}},
		{"tools is a list", "version: 1\ntools: [a, b]\n", []string{"bad.yaml:2: tools: got a list, want a mapping of tool name to entry"}},
		{"unknown tool key", "version: 1\ntools:\n  x: {endpoint: READ, canBeElevate: false}\n",
			[]string{`bad.yaml:3: tool "x": unknown key "canBeElevate" (did you mean "canBeElevated"?)`}},
		{"unknown level", "version: 1\ntools:\n  x:\n    endpoint: DELETE\n    defaultLevel: CONFIRM\n",
			[]string{`bad.yaml:5: tool "x": defaultLevel: unknown level "CONFIRM" (want AUTO_APPROVE, CONFIRM_SESSION, CONFIRM_SINGLE_USE or DENY)`}},
		{"unknown endpoint", "version: 1\ntools:\n  x: {endpoint: WRITE}\n", []string{`bad.yaml:3: tool "x": endpoint: unknown endpoint "WRITE" (want READ, CREATE, UPDATE, DELETE or EXECUTE)`}},
		{"missing endpoint", "version: 1\ntools:\n  x: {rationale: why}\n", []string{`bad.yaml:3: tool "x": endpoint: missing (want READ`}},
		{"tool entry not a mapping", "version: 1\ntools:\n  x: READ\n", []string{`bad.yaml:3: tool "x": got string "READ", want a mapping`}},
		{"unknown risk", "version: 1\ntools:\n  x: {endpoint: CREATE, risk: dangerous}\n", []string{`bad.yaml:3: tool "x": risk: unknown risk "dangerous" (want external-write or policy-write)`}},
		{"bad summary template", "version: 1\ntools:\n  x: {endpoint: CREATE, summary: \"send {{.to\"}\n", []string{`bad.yaml:3: tool "x": summary: not a valid template:`}},
		{"empty shellArg", "version: 1\ntools:\n  x: {endpoint: EXECUTE, shellArg: \"\"}\n", []string{`bad.yaml:3: tool "x": shellArg: empty`}},
		{"outsideWorkdir without pathArg", "version: 1\ntools:\n  x: {endpoint: UPDATE, outsideWorkdir: DENY}\n", []string{`bad.yaml:3: tool "x": outsideWorkdir: needs pathArg`}},
		{"outsideWorkdir on a read", "version: 1\ntools:\n  x: {endpoint: READ, pathArg: p, outsideWorkdir: DENY}\n", []string{`bad.yaml:3: tool "x": outsideWorkdir: applies to writes`}},
		{"outsideWorkdir not a level", "version: 1\ntools:\n  x: {endpoint: UPDATE, pathArg: p, outsideWorkdir: ask}\n", []string{`bad.yaml:3: tool "x": outsideWorkdir: unknown level "ask"`}},
		{"non-boolean canBeElevated", "version: 1\ntools:\n  x: {endpoint: READ, canBeElevated: \"yes\"}\n",
			[]string{`bad.yaml:3: tool "x": canBeElevated: got string "yes", want true or false`}},
		{"capitalised boolean", "version: 1\ntools:\n  x: {endpoint: READ, canBeElevated: True}\n",
			[]string{`bad.yaml:3: tool "x": canBeElevated: got boolean True, want true or false`}},
		{"duplicate tool", "version: 1\ntools:\n  x: {endpoint: READ}\n  y: {endpoint: READ}\n  x: {endpoint: DELETE}\n",
			[]string{`bad.yaml:5: tool "x": duplicate tool (first at line 3)`}},
		{"tool name with whitespace", "version: 1\ntools:\n  \"read file\": {endpoint: READ}\n", []string{`bad.yaml:3: tool "read file": name "read file" contains whitespace`}},
		{"tool name too long", "version: 1\ntools:\n  " + long + ": {endpoint: READ}\n", []string{"bad.yaml:3: tool", "name is 501 bytes long, more than the limit of 500"}},
		{"alias is a tool name", "version: 1\ntools:\n  a: {endpoint: READ, aliases: [b]}\n  b: {endpoint: READ}\n",
			[]string{`bad.yaml:3: tool "a": aliases[0]: alias "b" is also the name of tool "b" (line 4)`}},
		{"alias of two tools", "version: 1\ntools:\n  a: {endpoint: READ, aliases: [x]}\n  b:\n    endpoint: READ\n    aliases:\n      - y\n      - x\n",
			[]string{`bad.yaml:8: tool "b": aliases[1]: alias "x" is also an alias of tool "a" (aliases[0] at line 3)`}},
		{"alias is own name", "version: 1\ntools:\n  a: {endpoint: READ, aliases: [a]}\n", []string{`bad.yaml:3: tool "a": aliases[0]: alias "a" is the tool's own name`}},
		{"elements is a mapping", "version: 1\nelements: {name: x}\n", []string{"bad.yaml:2: elements: got a mapping, want a list of elements"}},
		{"unknown element key", "version: 1\nelements:\n  - name: E\n    type: persona\n    gatekeper: {deny: [x]}\n",
			[]string{`bad.yaml:5: element "E": unknown key "gatekeper" (did you mean "gatekeeper"?)`}},
		{"unknown gatekeeper key", "version: 1\nelements:\n  - name: E\n    type: persona\n    gatekeeper: {alow: [x]}\n",
			[]string{`bad.yaml:5: element "E": gatekeeper: unknown key "alow" (did you mean "allow"?)`}},
		{"gatekeeper list is a string", "version: 1\nelements:\n  - name: E\n    type: persona\n    gatekeeper:\n      deny: delete_element\n",
			[]string{`bad.yaml:6: element "E": gatekeeper.deny: got string "delete_element", want a list of strings (write [delete_element])`}},
		{"element name missing", "version: 1\nelements:\n  - type: persona\n    gatekeeper: {deny: [x]}\n", []string{"bad.yaml:3: elements[0].name: missing (want a unique name)"}},
		{"element type missing", "version: 1\nelements:\n  - name: E\n    gatekeeper: {deny: [x]}\n", []string{`bad.yaml:3: element "E": type: missing (want persona, skill, ensemble or agent)`}},
		{"unknown element type", "version: 1\nelements:\n  - name: E\n    type: robot\n", []string{`bad.yaml:4: element "E": type: unknown element type "robot"`}},
		{"duplicate element", "version: 1\nelements:\n  - {name: E, type: persona, gatekeeper: {deny: [x]}}\n  - {name: E, type: skill, gatekeeper: {deny: [y]}}\n",
			[]string{`bad.yaml:4: element "E": duplicate name (first at line 3)`}},
		{"element names differing in case", "version: 1\nelements:\n  - {name: Security Persona, type: persona, gatekeeper: {deny: [x]}}\n  - {name: security persona, type: skill, gatekeeper: {deny: [y]}}\n",
			[]string{`bad.yaml:4: element "security persona": name differs only in case from element "Security Persona" (line 3)`}},
		{"non-boolean active", "version: 1\nelements:\n  - name: E\n    type: persona\n    active: yes\n", []string{`bad.yaml:5: element "E": active: got string "yes", want true or false`}},
		{"empty pattern", "version: 1\nelements:\n  - name: E\n    type: persona\n    gatekeeper:\n      deny: [x, \"\"]\n",
			[]string{`bad.yaml:6: element "E": gatekeeper.deny[1]: empty pattern`}},
		{"blank pattern", "version: 1\nelements:\n  - name: E\n    type: persona\n    gatekeeper:\n      allow:\n        - \"  \"\n",
			[]string{`bad.yaml:7: element "E": gatekeeper.allow[0]: empty pattern`}},
		{"null pattern", "version: 1\nelements:\n  - name: E\n    type: persona\n    gatekeeper:\n      confirm:\n        -\n",
			[]string{`bad.yaml:7: element "E": gatekeeper.confirm[0]: empty pattern`}},
		{"pattern too long", "version: 1\nelements:\n  - name: E\n    type: persona\n    gatekeeper:\n      deny: [" + long + "]\n",
			[]string{`bad.yaml:6: element "E": gatekeeper.deny[0]: pattern is 501 bytes long, more than the limit of 500`}},
		{"pattern not a string", "version: 1\nelements:\n  - name: E\n    type: persona\n    gatekeeper:\n      deny: [[x]]\n",
			[]string{`bad.yaml:6: element "E": gatekeeper.deny[0]: got a list, want a string`}},
		{"unknown scope type", "version: 1\nelements:\n  - name: E\n    type: persona\n    gatekeeper:\n      scope: {blockedTypes: [memory, memories]}\n",
			[]string{`bad.yaml:6: element "E": gatekeeper.scope.blockedTypes[1]: unknown element type "memories" (want persona, skill, ensemble, agent, memory or template)`}},
		{"unknown scope key", "version: 1\nelements:\n  - name: E\n    type: persona\n    gatekeeper:\n      scope: {allowed: [persona]}\n",
			[]string{`bad.yaml:6: element "E": gatekeeper.scope: unknown key "allowed"`}},
		{"autonomy on a persona", "version: 1\nelements:\n  - name: P\n    type: persona\n    autonomy: {maxAutonomousSteps: 3}\n",
			[]string{`bad.yaml:5: element "P": autonomy: only elements of type agent have autonomy; this one is a persona`}},
		{"unknown autonomy key", "version: 1\nelements:\n  - name: A\n    type: agent\n    autonomy:\n      maxAutonomousStep: 3\n",
			[]string{`bad.yaml:6: element "A": autonomy: unknown key "maxAutonomousStep" (did you mean "maxAutonomousSteps"?)`}},
		{"maxAutonomousSteps over range", "version: 1\nelements:\n  - name: A\n    type: agent\n    autonomy:\n      maxAutonomousSteps: 10001\n",
			[]string{`bad.yaml:6: element "A": autonomy.maxAutonomousSteps: 10001 is out of range (want 0 to 10000; 0 means unlimited)`}},
		{"maxAutonomousSteps negative", "version: 1\nelements:\n  - name: A\n    type: agent\n    autonomy: {maxAutonomousSteps: -1}\n",
			[]string{`bad.yaml:5: element "A": autonomy.maxAutonomousSteps: -1 is out of range`}},
		{"maxAutonomousSteps not an integer", "version: 1\nelements:\n  - name: A\n    type: agent\n    autonomy: {maxAutonomousSteps: 2.5}\n",
			[]string{`bad.yaml:5: element "A": autonomy.maxAutonomousSteps: got number 2.5, want an integer`}},
		{"unknown risk tolerance", "version: 1\nelements:\n  - name: A\n    type: agent\n    autonomy: {riskTolerance: reckless}\n",
			[]string{`bad.yaml:5: element "A": autonomy.riskTolerance: unknown risk tolerance "reckless" (want conservative, moderate or aggressive)`}},
		{"empty autonomy pattern", "version: 1\nelements:\n  - name: A\n    type: agent\n    autonomy: {requiresApproval: [\"\"]}\n",
			[]string{`bad.yaml:5: element "A": autonomy.requiresApproval[0]: empty pattern`}},
		{"wait is a number", "version: 1\napprovals: {wait: 45}\n", []string{"bad.yaml:2: approvals.wait: got number 45, want a duration with a unit, such as 45s"}},
		{"wait is not a duration", "version: 1\napprovals:\n  wait: soon\n", []string{`bad.yaml:3: approvals.wait: invalid duration "soon" (want a Go duration such as 45s, 2m or 1h30m)`}},
		{"wait is zero", "version: 1\napprovals: {wait: 0s}\n", []string{`bad.yaml:2: approvals.wait: duration "0s" is not more than 0`}},
		{"negative timeout", "version: 1\nvalidator: {provider: anthropic, model: m, timeout: -1s}\n", []string{`bad.yaml:2: validator.timeout: duration "-1s" is not more than 0`}},
		{"unknown validator key", "version: 1\nvalidator:\n  provider: anthropic\n  model: m\n  modell: n\n", []string{`bad.yaml:5: validator: unknown key "modell" (did you mean "model"?)`}},
		{"api key in the file", "version: 1\nvalidator:\n  provider: anthropic\n  model: m\n  apiKey: sk-123\n",
			[]string{`bad.yaml:5: validator: unknown key "apiKey": the API key never lives in the policy file; put the name of the environment variable that holds it in apiKeyEnv`}},
		{"provider missing", "version: 1\nvalidator: {model: m}\n", []string{"bad.yaml:2: validator.provider: missing (want anthropic, openai or command)"}},
		{"unknown provider", "version: 1\nvalidator: {provider: gemini, model: m}\n", []string{`bad.yaml:2: validator.provider: unknown provider "gemini"`}},
		{"model missing", "version: 1\nvalidator:\n  provider: openai\n", []string{"bad.yaml:2: validator.model: missing (provider openai needs a model"}},
		{"command missing", "version: 1\nvalidator:\n  provider: command\n", []string{"bad.yaml:2: validator.command: missing (provider command needs the command to run"}},
		{"bad apiKeyEnv", "version: 1\nvalidator: {provider: anthropic, model: m, apiKeyEnv: sk-ant-123}\n", []string{`bad.yaml:2: validator.apiKeyEnv: "sk-ant-123" is not an environment variable name`}},
		{"bad baseURL", "version: 1\nvalidator: {provider: openai, model: m, baseURL: localhost:8080}\n", []string{`bad.yaml:2: validator.baseURL: invalid URL "localhost:8080"`}},
		{"bad validator mode", "version: 1\nvalidator: {provider: openai, model: m, mode: stateful}\n", []string{`bad.yaml:2: validator.mode: unknown mode "stateful" (want stateless or contextual)`}},
		{"bad validator scope", "version: 1\nvalidator:\n  provider: openai\n  model: m\n  scope:\n    risks: [read]\n    shell: 1\n",
			[]string{`bad.yaml:6: validator.scope.risks[0]: unknown risk "read"`, "bad.yaml:7: validator.scope.shell: got number 1, want true or false"}},
		{"shell rule without pattern", "version: 1\nshell:\n  rules:\n    - decision: deny\n", []string{"bad.yaml:4: shell.rules[0].pattern: missing"}},
		{"shell rule bad decision", "version: 1\nshell:\n  rules:\n    - {pattern: [rm], decision: block}\n", []string{`bad.yaml:4: shell.rules[0].decision: unknown decision "block" (want allow, confirm or deny)`}},
		{"shell rule empty alternatives", "version: 1\nshell:\n  rules:\n    - {pattern: [git, []], decision: deny}\n", []string{"bad.yaml:4: shell.rules[0].pattern[1]: no tokens"}},
		{"shell rule pattern string", "version: 1\nshell:\n  rules:\n    - {pattern: git, decision: deny}\n", []string{`bad.yaml:4: shell.rules[0].pattern: got string "git", want a list of tokens (write [git])`}},
		{"shell rule unknown key", "version: 1\nshell:\n  rules:\n    - {pattern: [git], decision: deny, matches: [git]}\n", []string{`bad.yaml:4: shell.rules[0]: unknown key "matches" (did you mean "match"?)`}},
		{"migration without paths", "version: 1\nmigrations:\n  - name: m1\n", []string{`bad.yaml:3: migration "m1": paths: missing`}},
		{"duplicate migration", "version: 1\nmigrations:\n  - {name: m1, paths: [/a]}\n  - {name: m1, paths: [/b]}\n", []string{`bad.yaml:4: migration "m1": duplicate name (first at line 3)`}},
		{"migration empty path", "version: 1\nmigrations:\n  - {name: m1, paths: [\"\"]}\n", []string{`bad.yaml:3: migration "m1": paths[0]: empty path`}},
		{"alias bomb", aliasBomb(), []string{"YAML aliases expand to more than"}},
		{"self-containing anchor", "version: 1\nelements: &e\n  - *e\n", []string{"YAML aliases expand to more than 1000000 nodes, or an anchor contains itself"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := parseErr(t, "bad.yaml", tt.src)
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("Parse(%s) error =\n%s\nwant it to contain\n%s", tt.name, msg, w)
				}
			}
		})
	}
}

// aliasBomb is a "billion laughs" policy: each shell rule's pattern holds
// ten aliases of the one before.
func aliasBomb() string {
	var b strings.Builder
	b.WriteString("version: 1\nshell:\n  rules:\n    - {decision: deny, pattern: &a0 [x, x, x, x, x, x, x, x, x, x]}\n")
	for i := 1; i < 9; i++ {
		p := fmt.Sprintf("*a%d", i-1)
		fmt.Fprintf(&b, "    - {decision: deny, pattern: &a%d [%s]}\n", i, strings.Repeat(p+", ", 9)+p)
	}
	return b.String()
}

func TestParseTooLarge(t *testing.T) {
	msg := parseErr(t, "big.yaml", "version: 1\n#"+strings.Repeat("x", policy.MaxFileBytes))
	if !strings.Contains(msg, "big.yaml: file is") || !strings.Contains(msg, "8 MiB") {
		t.Errorf("Parse(big) error = %s; want it to name the 8 MiB limit", msg)
	}
}

func TestParseReportsEveryProblemInLineOrder(t *testing.T) {
	src := `version: 1
mode: strict
tools:
  x: {endpoint: WRITE}
elements:
  - name: E
    type: robot
    gatekeeper:
      deny: [""]
      allw: [y]
`
	msg := parseErr(t, "many.yaml", src)
	want := strings.Join([]string{
		`many.yaml:2: mode: unknown mode "strict" (want enforce, shadow or off)`,
		`many.yaml:4: tool "x": endpoint: unknown endpoint "WRITE" (want READ, CREATE, UPDATE, DELETE or EXECUTE)`,
		`many.yaml:7: element "E": type: unknown element type "robot" (want persona, skill, ensemble or agent)`,
		`many.yaml:9: element "E": gatekeeper.deny[0]: empty pattern`,
		`many.yaml:10: element "E": gatekeeper: unknown key "allw" (did you mean "allow"?)`,
	}, "\n")
	if msg != want {
		t.Errorf("Parse(many) error =\n%s\nwant\n%s", msg, want)
	}
}

func TestParseCapsTheProblemList(t *testing.T) {
	var b strings.Builder
	b.WriteString("version: 1\ntools:\n")
	for i := range 25 {
		fmt.Fprintf(&b, "  t%d: {endpoint: NOPE}\n", i)
	}
	msg := parseErr(t, "capped.yaml", b.String())
	lines := strings.Split(msg, "\n")
	if len(lines) != 21 || lines[20] != "... and 5 more problems" {
		t.Errorf("Parse(capped) error has %d lines ending %q; want 20 problems and \"... and 5 more problems\"", len(lines), lines[len(lines)-1])
	}
}

func TestParseDoesNotRepeatProblems(t *testing.T) {
	// A value the parser could not read is reported once, not again by the
	// semantic checks as missing.
	tests := []struct{ name, src string }{
		{"tool entry", "version: 1\ntools:\n  x: [READ]\n"},
		{"element entry", "version: 1\nelements:\n  - persona\n"},
		{"element type", "version: 1\nelements:\n  - {name: E, type: [persona], gatekeeper: {deny: [x]}}\n"},
		{"version", "version: one\n"},
		{"alias", "version: 1\ntools:\n  x: {endpoint: READ, aliases: [{a: b}]}\n"},
		{"tool name", "version: 1\ntools:\n  true: {endpoint: READ}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := parseErr(t, "once.yaml", tt.src)
			if n := strings.Count(msg, "\n") + 1; n != 1 {
				t.Errorf("Parse(%s) error =\n%s\nwant exactly one problem", tt.name, msg)
			}
		})
	}
}

// A lowered defaultLevel that comes with a rationale is deliberate and
// explained: no warning. Without one, it is warned about.
func TestLintLoweredLevelWithRationale(t *testing.T) {
	src := `version: 1
tools:
  complete_execution: {endpoint: EXECUTE, defaultLevel: CONFIRM_SESSION, rationale: "Completes an already approved run"}
  prepare_handoff: {endpoint: EXECUTE, defaultLevel: CONFIRM_SESSION}
`
	_, warns, err := policy.Parse("lower.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range warns {
		got = append(got, w.String())
	}
	want := []string{`lower.yaml:4: tool "prepare_handoff": defaultLevel: CONFIRM_SESSION is less strict than the default for EXECUTE operations (CONFIRM_SINGLE_USE)`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("Parse(lower) warnings (-want +got):\n%s", diff)
	}
}

func TestLint(t *testing.T) {
	src := `version: 1
tools:
  list_elements: {endpoint: READ}
  delete_element: {endpoint: DELETE, defaultLevel: AUTO_APPROVE}
  open_browser: {endpoint: READ, aliases: [open_console]}
  verify_challenge: {endpoint: CREATE, defaultLevel: AUTO_APPROVE}
elements:
  - name: Sandbox
    type: persona
    gatekeeper:
      allow: [verify_challenge, confirm_operation, list_elements, list_elements, open_console, "list *"]
      confirm: [confirm_operation, release_deadlock, list_elements]
      deny: [confirm_operation, permission_prompt, delete_*, list_elements, nothing_*, no_such_tool]
  - name: Idle
    type: skill
  - name: bot
    type: agent
    autonomy:
      requiresApproval: ["*delete user*", "*delete user*"]
validator:
  provider: anthropic
  model: m
  command: [x]
  scope: {}
`
	p, warns, err := policy.Parse("lint.yaml", []byte(src))
	if err != nil {
		t.Fatalf("Parse(lint) = %v", err)
	}
	wantWarns := []string{
		`lint.yaml:4: tool "delete_element": defaultLevel: AUTO_APPROVE is less strict than the default for DELETE operations (CONFIRM_SINGLE_USE)`,
		`lint.yaml:11: element "Sandbox": gatekeeper.allow[0]: "verify_challenge" cannot be gated (a recovery operation that must stay open to people); removed`,
		`lint.yaml:11: element "Sandbox": gatekeeper.allow[1]: "confirm_operation" cannot be allowed (an element cannot allow confirming; it may only confirm or deny it); removed`,
		`lint.yaml:11: element "Sandbox": gatekeeper.allow[3]: "list_elements" is listed twice (first as allow[2]); removed`,
		`lint.yaml:11: element "Sandbox": gatekeeper.allow[5]: pattern "list *" contains whitespace; operation names never do`,
		`lint.yaml:11: element "Sandbox": gatekeeper.allow[5]: "list *" matches no tool in tools, and allow never auto-approves a tool the policy does not classify: classify it in tools (an upstream's MCP annotations classify it only if its upstream has trustAnnotations)`,
		`lint.yaml:12: element "Sandbox": gatekeeper.confirm[1]: "release_deadlock" cannot be gated (a recovery operation that must stay open to people); removed`,
		`lint.yaml:12: element "Sandbox": gatekeeper.confirm[2]: "list_elements" is also in allow; confirm wins`,
		`lint.yaml:13: element "Sandbox": gatekeeper.deny[1]: "permission_prompt" cannot be gated (a recovery operation that must stay open to people); removed`,
		`lint.yaml:13: element "Sandbox": gatekeeper.deny[3]: "list_elements" is also in allow; deny wins`,
		`lint.yaml:13: element "Sandbox": gatekeeper.deny[4]: "nothing_*" matches no tool in tools; an upstream MCP server may still offer one`,
		`lint.yaml:13: element "Sandbox": gatekeeper.deny[5]: "no_such_tool" matches no tool in tools; an upstream MCP server may still offer one`,
		`lint.yaml:14: element "Idle": has no policy (no gatekeeper lists, scope or autonomy): it changes nothing while active`,
		`lint.yaml:19: element "bot": autonomy.requiresApproval[1]: "*delete user*" is listed twice (first as requiresApproval[0]); removed`,
		`lint.yaml:23: validator.command: used only with provider command; ignored`,
		`lint.yaml:24: validator.scope: selects no calls, so the validator never runs (list risks or tools, or set shell: true)`,
	}
	got := make([]string, len(warns))
	for i, w := range warns {
		got[i] = w.String()
	}
	if diff := cmp.Diff(wantWarns, got); diff != "" {
		t.Errorf("Parse(lint) warnings mismatch (-want +got):\n%s", diff)
	}
	wantGK := portcullis.GatekeeperPolicy{
		Allow:   []string{"list_elements", "open_console", "list *"},
		Confirm: []string{"confirm_operation", "list_elements"},
		Deny:    []string{"confirm_operation", "delete_*", "list_elements", "nothing_*", "no_such_tool"},
	}
	if diff := cmp.Diff(wantGK, p.Elements[0].Gatekeeper); diff != "" {
		t.Errorf("Parse(lint) cleaned gatekeeper mismatch (-want +got):\n%s", diff)
	}
	if want := []string{"*delete user*"}; !cmp.Equal(p.Elements[2].Autonomy.RequiresApproval, want) {
		t.Errorf("Parse(lint) requiresApproval = %q; want %q", p.Elements[2].Autonomy.RequiresApproval, want)
	}
}

func TestLintMatchesToolsLikeTheGate(t *testing.T) {
	// The gate matches deny and confirm patterns ignoring case, allow
	// patterns exactly (docs/ARCHITECTURE.md); the lint must agree.
	src := `version: 1
tools:
  delete_element: {endpoint: DELETE}
  list_elements: {endpoint: READ, aliases: [ls]}
elements:
  - name: E
    type: persona
    gatekeeper:
      allow: [List_Elements, LS, "list_*", "l?"]
      confirm: [LIST_ELEMENTS, Ls]
      deny: [Delete_*, DELETE_ELEMENT]
`
	_, warns, err := policy.Parse("case.yaml", []byte(src))
	if err != nil {
		t.Fatalf("Parse(case) = %v", err)
	}
	var got []string
	for _, w := range warns {
		got = append(got, w.String())
	}
	want := []string{
		`case.yaml:9: element "E": gatekeeper.allow[0]: "List_Elements" matches no tool in tools, and allow never auto-approves a tool the policy does not classify: classify it in tools (an upstream's MCP annotations classify it only if its upstream has trustAnnotations)`,
		`case.yaml:9: element "E": gatekeeper.allow[1]: "LS" matches no tool in tools, and allow never auto-approves a tool the policy does not classify: classify it in tools (an upstream's MCP annotations classify it only if its upstream has trustAnnotations)`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Parse(case) warnings mismatch (-want +got):\n%s", diff)
	}
}

// An allow entry for a tool the policy does not classify did something
// only while an upstream's own annotations classified unnamed tools:
// the lint says so, with or without a tools section.
func TestLintAllowOfUnclassifiedTool(t *testing.T) {
	for name, src := range map[string]string{
		"no tools":    "version: 1\nelements:\n  - {name: E, type: persona, gatekeeper: {allow: [edit_file]}}\n",
		"other tools": "version: 1\ntools: {read_file: {endpoint: READ}}\nelements:\n  - {name: E, type: persona, gatekeeper: {allow: [edit_file, read_file]}}\n",
	} {
		_, warns, err := policy.Parse("allow.yaml", []byte(src))
		if err != nil || len(warns) != 1 || !strings.Contains(warns[0].String(), `"edit_file" matches no tool in tools, and allow never auto-approves`) {
			t.Errorf("Parse(%s) = %v, %v; want one warning that allow of edit_file does nothing", name, warns, err)
		}
	}
}

func TestLintNoToolsNoMatchWarnings(t *testing.T) {
	// With no tools in the file, patterns cannot be checked against them.
	src := "version: 1\nelements:\n  - {name: E, type: persona, gatekeeper: {deny: [anything, any_*]}}\n"
	_, warns, err := policy.Parse("notools.yaml", []byte(src))
	if err != nil || len(warns) != 0 {
		t.Errorf("Parse(notools) = %v, %v; want no warnings, no error", warns, err)
	}
}

func TestLintSkipsGlobsWhenTooMany(t *testing.T) {
	// 10,000 tools × 600 distinct globs is over the lint's budget: globs are
	// not checked, exact names still are.
	var b strings.Builder
	b.WriteString("version: 1\ntools:\n")
	for i := range 10000 {
		fmt.Fprintf(&b, "  tool_%d: {endpoint: READ}\n", i)
	}
	b.WriteString("elements:\n  - name: E\n    type: persona\n    gatekeeper:\n      deny: [missing_tool")
	for i := range 600 {
		fmt.Fprintf(&b, ", nomatch_%d_*", i)
	}
	b.WriteString("]\n")
	_, warns, err := policy.Parse("many.yaml", []byte(b.String()))
	if err != nil {
		t.Fatalf("Parse(many) = %v", err)
	}
	if len(warns) != 1 || !strings.Contains(warns[0].Message, `"missing_tool" matches no tool`) {
		t.Errorf("Parse(many) warnings = %v; want only the exact name missing_tool", warns)
	}
}

func TestValidate(t *testing.T) {
	p := &portcullis.Policy{
		Version: 1,
		Tools:   []portcullis.ToolPolicy{{Name: "list_elements", Endpoint: portcullis.Read, CanBeElevated: true}},
		Elements: []portcullis.Element{{
			Name: "E", Type: portcullis.Agent, Active: true,
			Gatekeeper: portcullis.GatekeeperPolicy{Allow: []string{"list_elements", "verify_challenge"}},
			Autonomy:   &portcullis.Autonomy{MaxAutonomousSteps: 0},
		}},
		Validator: &portcullis.ValidatorConfig{Provider: "anthropic", Model: "m"},
	}
	warns, err := policy.Validate(p)
	if err != nil {
		t.Fatalf("Validate = %v", err)
	}
	wantWarns := []policy.Warning{{Message: `element "E": gatekeeper.allow[1]: "verify_challenge" cannot be gated (a recovery operation that must stay open to people); removed`}}
	if diff := cmp.Diff(wantWarns, warns); diff != "" {
		t.Errorf("Validate warnings mismatch (-want +got):\n%s", diff)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"allow", p.Elements[0].Gatekeeper.Allow, []string{"list_elements"}},
		{"mode", p.Mode, portcullis.ModeEnforce},
		{"unknownTools", p.UnknownTools, portcullis.UnknownConfirm},
		{"riskTolerance", p.Elements[0].Autonomy.RiskTolerance, portcullis.Moderate},
		{"maxAutonomousSteps", p.Elements[0].Autonomy.MaxAutonomousSteps, 0},
		{"validator.timeout", p.Validator.Timeout, 10 * time.Second},
		{"validator.mode", p.Validator.Mode, "stateless"},
		{"validator.scope.risks", p.Validator.Scope.Risks, []portcullis.Risk{portcullis.RiskExternalWrite, portcullis.RiskPolicyWrite}},
		{"approvals.wait", p.Approvals.Wait, 45 * time.Second},
	}
	for _, c := range checks {
		if !cmp.Equal(c.got, c.want) {
			t.Errorf("Validate %s = %v; want %v", c.name, c.got, c.want)
		}
	}

	bad := &portcullis.Policy{
		Version:  2,
		Mode:     "loud",
		Tools:    []portcullis.ToolPolicy{{Name: "a", Endpoint: "READ", DefaultLevel: 9}, {Name: "a"}},
		Elements: []portcullis.Element{{Name: "P", Type: portcullis.Persona, Autonomy: &portcullis.Autonomy{MaxAutonomousSteps: 20000}}},
	}
	_, err = policy.Validate(bad)
	want := strings.Join([]string{
		"version: unsupported version 2 (want 1)",
		`mode: unknown mode "loud" (want enforce, shadow or off)`,
		`tool "a": defaultLevel: invalid level Level(9) (want AUTO_APPROVE, CONFIRM_SESSION, CONFIRM_SINGLE_USE or DENY)`,
		`tool "a": duplicate tool (first)`,
		`tool "a": endpoint: missing (want READ, CREATE, UPDATE, DELETE or EXECUTE)`,
		`element "P": autonomy: only elements of type agent have autonomy; this one is a persona`,
		`element "P": autonomy.maxAutonomousSteps: 20000 is out of range (want 0 to 10000; 0 means unlimited)`,
	}, "\n")
	if err == nil || err.Error() != want || portcullis.ErrorCode(err) != portcullis.CodeInvalidPolicy {
		t.Errorf("Validate(bad) = %v; want INVALID_POLICY\n%s", err, want)
	}

	if _, err := policy.Validate(nil); portcullis.ErrorCode(err) != portcullis.CodeInvalidPolicy {
		t.Errorf("Validate(nil) = %v; want an INVALID_POLICY error", err)
	}
}

func TestWarningString(t *testing.T) {
	tests := []struct {
		w    policy.Warning
		want string
	}{
		{policy.Warning{File: "p.yaml", Line: 3, Message: "m"}, "p.yaml:3: m"},
		{policy.Warning{File: "p.yaml", Message: "m"}, "p.yaml: m"},
		{policy.Warning{Message: "m"}, "m"},
	}
	for _, tt := range tests {
		if got := tt.w.String(); got != tt.want {
			t.Errorf("%#v.String() = %q; want %q", tt.w, got, tt.want)
		}
	}
}

func TestMatch(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"delete_element", "delete_element", true},
		{"delete_element", "delete_elements", false},
		{"delete_*", "delete_element", true},
		{"delete_*", "delete_", true},
		{"delete_*", "undelete_x", false},
		{"*_file", "write_file", true},
		{"*_file", "write_files", false},
		{"*delete*", "soft delete of users", true},
		{"read?", "reads", true},
		{"read?", "read", false},
		{"read?", "readé", true},
		{"*", "", true},
		{"", "", true},
		{"", "x", false},
		{"a*b*c", "aXbYbZc", true},
		{"a*b*c", "aXbYbZ", false},
		{"[a]", "[a]", true},
		{"[a]", "a", false},
		{`a\*`, `a\xyz`, true},
		{"Delete_*", "delete_x", false},
	}
	for _, tt := range tests {
		if got := policy.Match(tt.pattern, tt.name); got != tt.want {
			t.Errorf("Match(%q, %q) = %v; want %v", tt.pattern, tt.name, got, tt.want)
		}
	}
}

func TestApprovalsOutOfBand(t *testing.T) {
	p, _, err := policy.Parse("p.yaml", []byte("version: 1\napprovals: {outOfBand: true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !p.Approvals.OutOfBand {
		t.Fatal("approvals.outOfBand: true was not read")
	}
	if _, _, err := policy.Parse("p.yaml", []byte("version: 1\napprovals: {outOfBand: maybe}\n")); err == nil || !strings.Contains(err.Error(), "outOfBand") {
		t.Fatalf("approvals.outOfBand: maybe: err = %v; want an error naming the key", err)
	}
	q, _, err := policy.Parse("p.yaml", []byte("version: 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	changes := policy.Diff(q, p)
	found := false
	for _, c := range changes {
		if strings.Contains(fmt.Sprint(c), "outOfBand") {
			found = true
		}
	}
	if !found {
		t.Fatalf("policy diff does not show outOfBand: %v", changes)
	}
}

func TestApprovalsPendingCaps(t *testing.T) {
	p, warns, err := policy.Parse("p.yaml", []byte("version: 1\napprovals: {maxPendingPerAgent: 20, maxPendingPerSession: 5}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(warns) != 0 {
		t.Errorf("Parse(caps 20 and 5) warnings = %v; want none", warns)
	}
	if got := p.Approvals.PendingLimit(); got != (portcullis.PendingLimit{PerAgent: 20, PerSession: 5}) {
		t.Errorf("Parse(caps 20 and 5).PendingLimit() = %+v; want 20 and 5", got)
	}
	q, _, err := policy.Parse("p.yaml", []byte("version: 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if q.Approvals.MaxPendingPerAgent != portcullis.DefaultMaxPending || q.Approvals.MaxPendingPerSession != portcullis.DefaultMaxPending {
		t.Errorf("default caps = %d and %d; want %d each", q.Approvals.MaxPendingPerAgent, q.Approvals.MaxPendingPerSession, portcullis.DefaultMaxPending)
	}
	// A lower agent cap alone draws no warning: the session's default is
	// simply never reached.
	if _, warns, err := policy.Parse("p.yaml", []byte("version: 1\napprovals: {maxPendingPerAgent: 10}\n")); err != nil || len(warns) != 0 {
		t.Errorf("Parse(maxPendingPerAgent: 10) = %v, warnings %v; want no error or warning", err, warns)
	}
	_, warns, err = policy.Parse("p.yaml", []byte("version: 1\napprovals:\n  maxPendingPerAgent: 10\n  maxPendingPerSession: 30\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(warns) != 1 || !strings.Contains(warns[0].String(), "p.yaml:4") || !strings.Contains(warns[0].String(), "maxPendingPerSession") {
		t.Errorf("Parse(session cap over the agent's) warnings = %v; want one at p.yaml:4 naming maxPendingPerSession", warns)
	}
	for _, bad := range []string{"0", "-1", "10001", "many", "1.5", "[1]"} {
		src := "version: 1\napprovals: {maxPendingPerAgent: " + bad + "}\n"
		if _, _, err := policy.Parse("p.yaml", []byte(src)); err == nil || !strings.Contains(err.Error(), "maxPendingPerAgent") {
			t.Errorf("Parse(maxPendingPerAgent: %s) = %v; want an error naming the key", bad, err)
		}
	}
	built := &portcullis.Policy{Version: 1, Approvals: portcullis.ApprovalsConfig{MaxPendingPerSession: -3}}
	if _, err := policy.Validate(built); err == nil || !strings.Contains(err.Error(), "maxPendingPerSession") {
		t.Errorf("Validate(maxPendingPerSession: -3) = %v; want an error naming the key", err)
	}
	changes := policy.Diff(q, p)
	var got []string
	for _, c := range changes {
		got = append(got, fmt.Sprint(c))
	}
	if s := strings.Join(got, "\n"); !strings.Contains(s, "maxPendingPerAgent") || !strings.Contains(s, "maxPendingPerSession") {
		t.Errorf("Diff(default, caps) = %s; want both caps", s)
	}
	if changes := policy.Diff(q, q); len(changes) != 0 {
		t.Errorf("Diff(default, itself) = %v; want none", changes)
	}
}
