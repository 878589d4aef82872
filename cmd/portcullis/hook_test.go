package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/httpapi"
	"github.com/portcullis/portcullis/policy"
	"github.com/portcullis/portcullis/sqlite"
)

const claudePolicy = "../../examples/claude-code/policy.yaml"

// claudeEvent is a Claude Code PreToolUse event.
func claudeEvent(t testing.TB, tool string, input map[string]any) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"session_id":      "2b7c1f7e-0d1a-4c3e-9f5b-6a8d2e4c1b90",
		"transcript_path": "",
		"cwd":             "/home/dev/project",
		"permission_mode": "default",
		"hook_event_name": "PreToolUse",
		"tool_name":       tool,
		"tool_input":      input,
		"tool_use_id":     "toolu_01",
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// preToolUse decodes Claude Code's PreToolUse answer.
func preToolUse(t testing.TB, out string) (decision, reason string) {
	t.Helper()
	var a struct {
		HookSpecificOutput struct {
			HookEventName            string `json:"hookEventName"`
			PermissionDecision       string `json:"permissionDecision"`
			PermissionDecisionReason string `json:"permissionDecisionReason"`
		} `json:"hookSpecificOutput"`
	}
	if err := json.Unmarshal([]byte(out), &a); err != nil || a.HookSpecificOutput.HookEventName != "PreToolUse" {
		t.Fatalf("answer %q is not a PreToolUse answer (%v)", out, err)
	}
	return a.HookSpecificOutput.PermissionDecision, a.HookSpecificOutput.PermissionDecisionReason
}

// TestHookRefuses: whatever stops the hook from deciding — flags, policy,
// store, gateway — the answer is a deny in the host's format and exit
// status 2, never 1.
func TestHookRefuses(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("version: 1\ntools:\n  x: {endpoint: NOPE}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("some-agent-token-123456\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PORTCULLIS_POLICY", "")
	t.Setenv("PORTCULLIS_GATEWAY", "")
	t.Setenv("PORTCULLIS_AGENT_TOKEN", "")
	state := filepath.Join(dir, "state")
	event := claudeEvent(t, "Read", map[string]any{"file_path": "/etc/hosts"})
	for _, tc := range []struct {
		name string
		args []string
		why  string
	}{
		{"a policy that does not load", []string{"hook", "claude-code", "--state", state, "--policy", bad}, "NOPE"},
		{"a missing policy", []string{"hook", "claude-code", "--state", state, "--policy", filepath.Join(dir, "missing.yaml")}, "missing.yaml"},
		{"a bad flag", []string{"hook", "claude-code", "--no-such-flag"}, "bad arguments"},
		{"a store that does not open", []string{"hook", "claude-code", "--policy", claudePolicy, "--store", "sqlite://" + bad}, "sqlite"},
		{"an unknown MCP naming", []string{"hook", "claude-code", "--state", state, "--policy", claudePolicy, "--mcp-names", "short"}, "MCP naming"},
		{"a gateway without a token", []string{"hook", "claude-code", "--gateway", "http://127.0.0.1:1"}, "token"},
		{"a gateway that does not answer", []string{"hook", "claude-code", "--gateway", "http://127.0.0.1:1", "--token-file", token, "--timeout", "2s"}, "decide Read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, event, tc.args...)
			if code != 2 {
				t.Errorf("exit %d; want 2", code)
			}
			decision, reason := preToolUse(t, stdout)
			if decision != "deny" || !strings.Contains(reason, tc.why) || !strings.Contains(stderr, tc.why) {
				t.Errorf("answer %s (stderr %q); want a deny naming %q on stdout and stderr", stdout, stderr, tc.why)
			}
		})
	}
	// Gemini gets its own shape.
	code, stdout, _ := runCLI(t, `{}`, "hook", "gemini", "--state", state, "--policy", bad)
	if code != 2 || !strings.Contains(stdout, `"decision":"deny"`) {
		t.Errorf("gemini with a policy that does not load: exit %d, %s; want 2 and a Gemini deny", code, stdout)
	}
	if code, _, _ := runCLI(t, event, "hook", "windsurf"); code != 2 {
		t.Errorf("unknown host: exit %d; want 2", code)
	}
}

// gatewayEnv is a real decision API (package httpapi, as `portcullis
// serve` mounts it) over HTTP on 127.0.0.1, with a gate on a SQLite store.
type gatewayEnv struct {
	url, tokenFile string
	g              *gate.Gate
	st             *sqlite.Store
}

const gatewayToken = "claude-agent-token-0123456789"

func newGatewayEnv(t testing.TB) *gatewayEnv {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "portcullis.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	pol, _, err := policy.Load(claudePolicy)
	if err != nil {
		t.Fatal(err)
	}
	g, err := gate.New(pol, gate.WithStore(st))
	if err != nil {
		t.Fatal(err)
	}
	h, err := httpapi.New(httpapi.Options{Gate: g, Store: st, AgentToken: func(tok string) (string, bool) {
		return "claude-code", tok == gatewayToken
	}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	tokenFile := filepath.Join(dir, "agent.token")
	if err := os.WriteFile(tokenFile, []byte(gatewayToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return &gatewayEnv{url: srv.URL, tokenFile: tokenFile, g: g, st: st}
}

// TestHookThroughGateway decides through a running gateway's decision
// API: the same answers, the gateway's audit log, and a held call answered
// by a person on the gateway.
func TestHookThroughGateway(t *testing.T) {
	e := newGatewayEnv(t)
	args := []string{"hook", "claude-code", "--gateway", e.url, "--token-file", e.tokenFile, "--policy", claudePolicy}
	for _, tc := range []struct {
		tool     string
		input    map[string]any
		decision string
	}{
		{"Bash", map[string]any{"command": "git status"}, "allow"},
		{"Bash", map[string]any{"command": "npm publish"}, "deny"},
		{"Bash", map[string]any{"command": "npm install left-pad"}, "ask"},
		{"Write", map[string]any{"file_path": "/home/dev/project/a.go", "content": "package a\n"}, "allow"},
		{"mcp__github__merge_pull_request", map[string]any{"owner": "a", "repo": "b", "pullNumber": 1}, "ask"},
	} {
		code, stdout, stderr := runCLI(t, claudeEvent(t, tc.tool, tc.input), args...)
		if d, reason := preToolUse(t, stdout); code != 0 || d != tc.decision {
			t.Errorf("%s %v through the gateway: exit %d, %s (%s; %s); want %s", tc.tool, tc.input, code, d, reason, stderr, tc.decision)
		}
	}
	rows, err := e.st.QueryAudit(context.Background(), portcullis.AuditQuery{Kind: portcullis.AuditDecision, Agent: "claude-code"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 5 {
		t.Errorf("the gateway's audit log has %d decisions of claude-code; want 5", len(rows))
	}

	// Held: the gateway waits for the person, decides again, answers.
	done := make(chan struct{})
	go func() {
		defer close(done)
		approvePending(t, e.g, e.st, true, "npm install is-odd")
	}()
	code, stdout, stderr := runCLI(t, claudeEvent(t, "Bash", map[string]any{"command": "npm install is-odd"}), append(args, "--hold")...)
	<-done
	if d, reason := preToolUse(t, stdout); code != 0 || d != "allow" {
		t.Errorf("held through the gateway and approved: exit %d, %s (%s; %s); want allow", code, d, reason, stderr)
	}

	// A wrong token is refused by the gateway: deny, exit 2.
	bad := filepath.Join(t.TempDir(), "bad.token")
	if err := os.WriteFile(bad, []byte("not-the-token-0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, _ = runCLI(t, claudeEvent(t, "Read", map[string]any{"file_path": "/x"}), "hook", "claude-code", "--gateway", e.url, "--token-file", bad)
	if d, _ := preToolUse(t, stdout); code != 2 || d != "deny" {
		t.Errorf("wrong token: exit %d, %s; want 2, deny", code, d)
	}
}

// approvePending answers, as a person, the pending approval request of the
// shell command (or the first one, when command is empty).
func approvePending(t *testing.T, g *gate.Gate, st portcullis.Store, approve bool, command string) {
	ctx := context.Background()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		as, err := st.Approvals(ctx, portcullis.ApprovalFilter{Status: portcullis.ApprovalPending})
		if err != nil {
			t.Error(err)
			return
		}
		for _, a := range as {
			if command != "" && a.Call.Args["command"] != command {
				continue
			}
			if approve {
				_, err = g.Approve(ctx, a.ID, "alice", false)
			} else {
				_, err = g.DenyApproval(ctx, a.ID, "alice", "no")
			}
			if err != nil {
				t.Error(err)
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Error("no approval request appeared")
}

// lastingBinary is a stand-in portcullis binary outside every directory
// install refuses: it sets TMPDIR to a directory of its own, and the
// binary lives beside it.
func lastingBinary(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	tmp := filepath.Join(root, "tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", tmp)
	bin := filepath.Join(root, "portcullis")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestHookInstall wires `hook install` to hostconfig (whose tests cover
// the merge): the project's or the user's settings, Gemini's as well as
// Claude Code's; the test binary itself, built by `go test` into a
// directory Go deletes, is refused with the way to install one; bad
// arguments are exit status 2.
func TestHookInstall(t *testing.T) {
	bin := lastingBinary(t)
	project := t.TempDir()
	code, out, errOut := runCLI(t, "", "hook", "install", "claude-code", "--dir", project, "--policy", claudePolicy, "--binary", bin)
	settings := filepath.Join(project, ".claude", "settings.json")
	if code != 0 || !strings.Contains(out, settings+": PreToolUse hook installed") {
		t.Fatalf("install: exit %d: %s%s", code, out, errOut)
	}
	abs, _ := filepath.Abs(claudePolicy)
	if b, err := os.ReadFile(settings); err != nil || !bytes.Contains(b, []byte(bin+" hook claude-code --policy "+abs)) {
		t.Errorf("settings = %s, %v", b, err)
	}
	if code, out, _ := runCLI(t, "", "hook", "install", "claude-code", "--dir", project, "--policy", claudePolicy, "--binary", bin); code != 0 || !strings.Contains(out, "already installed") {
		t.Errorf("second install: exit %d: %s", code, out)
	}
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("COPILOT_HOME", "")
	if code, out, errOut := runCLI(t, "", "hook", "install", "gemini", "--user", "--policy", claudePolicy, "--binary", bin); code != 0 || !strings.Contains(out, "BeforeTool hook installed") {
		t.Errorf("install gemini --user: exit %d: %s%s", code, out, errOut)
	}
	if b, err := os.ReadFile(filepath.Join(home, ".gemini", "settings.json")); err != nil || !bytes.Contains(b, []byte("hook gemini")) {
		t.Errorf("gemini settings = %s, %v", b, err)
	}
	if code, out, errOut := runCLI(t, "", "hook", "install", "cursor", "--dir", project, "--policy", claudePolicy, "--binary", bin); code != 0 || !strings.Contains(out, filepath.Join(project, ".cursor", "hooks.json")+": beforeShellExecution, beforeMCPExecution, beforeReadFile and preToolUse") {
		t.Errorf("install cursor: exit %d: %s%s", code, out, errOut)
	}
	if code, out, errOut := runCLI(t, "", "hook", "install", "copilot", "--policy", claudePolicy, "--binary", bin); code != 0 || !strings.Contains(out, filepath.Join(home, ".copilot", "hooks", "portcullis.json")+": preToolUse hook installed") {
		t.Errorf("install copilot (for the user, by default): exit %d: %s%s", code, out, errOut)
	}
	if code, out, errOut := runCLI(t, "", "hook", "install", "copilot", "--dir", project, "--policy", claudePolicy, "--binary", bin); code != 0 || !strings.Contains(out, "only in a folder you trust") {
		t.Errorf("install copilot --dir: exit %d: %s%s; want the note on trust", code, out, errOut)
	}
	code, _, errOut = runCLI(t, "", "hook", "install", "claude-code", "--dir", t.TempDir(), "--policy", claudePolicy)
	if code != 2 || !strings.Contains(errOut, "go install ./cmd/portcullis") {
		t.Errorf("install of the test binary (in go test's build directory): exit %d: %s; want 2 and how to install", code, errOut)
	}
	t.Setenv("CODEX_HOME", t.TempDir())
	for _, args := range [][]string{{"claude-desktop"}, {"codex", "--dir", project}, {"claude-code", "--project", "--user"}, {}} {
		if code, _, _ := runCLI(t, "", append([]string{"hook", "install"}, append(args, "--policy", claudePolicy, "--binary", bin)...)...); code != 2 {
			t.Errorf("hook install %q: exit %d; want 2", args, code)
		}
	}
}
