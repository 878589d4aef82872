package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/policy"
	"github.com/portcullis/portcullis/shellgate"
	"github.com/portcullis/portcullis/sqlite"
)

// buildPortcullis builds the real binary into dir.
func buildPortcullis(t testing.TB, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "portcullis")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// runBinary runs the built binary with stdin and returns its exit status
// and output.
func runBinary(t testing.TB, env []string, stdin string, bin string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String(), errb.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String(), errb.String()
	}
	t.Fatalf("run %s: %v", bin, err)
	return 0, "", ""
}

// TestBinaryEndToEnd builds the real binary once and runs it as the hosts
// run it: a Claude Code hook, a held hook, the command `hook install`
// wrote, and the portcullis-sh shell wrapper.
func TestBinaryEndToEnd(t *testing.T) {
	bin := buildPortcullis(t, t.TempDir())
	t.Run("hook", func(t *testing.T) { hookEndToEnd(t, bin) })
	t.Run("hold", func(t *testing.T) { hookHoldEndToEnd(t, bin) })
	t.Run("installed command", func(t *testing.T) { installedCommandRuns(t, bin) })
	t.Run("portcullis-sh", func(t *testing.T) { shellWrapperEndToEnd(t, bin) })
}

// hookEndToEnd runs the binary as Claude Code runs a PreToolUse hook — one
// process per tool call, the event on stdin — for Bash, Write, Edit, Read
// and an MCP tool, and checks each answer, its exit status, and the audit
// row each decision left in the SQLite store.
func hookEndToEnd(t *testing.T, bin string) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	project := filepath.Join(dir, "project")
	if err := os.MkdirAll(project, 0o755); err != nil {
		t.Fatal(err)
	}
	policyPath, err := filepath.Abs(claudePolicy)
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"PORTCULLIS_POLICY=" + policyPath, "PORTCULLIS_STATE=" + state, "CLAUDE_PROJECT_DIR=" + project}
	hookArgs := []string{"hook", "claude-code"}

	cases := []struct {
		name     string
		tool     string
		input    map[string]any
		decision string
	}{
		{"Bash, a read-only command", "Bash", map[string]any{"command": "git log --oneline -5", "description": "Recent commits"}, "allow"},
		{"Bash, an install", "Bash", map[string]any{"command": "pip install requests", "description": "Install requests"}, "ask"},
		{"Bash, touching Portcullis's state", "Bash", map[string]any{"command": "rm -f " + filepath.Join(state, "portcullis.db")}, "deny"},
		{"Write", "Write", map[string]any{"file_path": filepath.Join(project, "main.go"), "content": "package main\n"}, "allow"},
		{"Write into Claude Code's settings", "Write", map[string]any{"file_path": filepath.Join(project, ".claude", "settings.json"), "content": "{}"}, "deny"},
		{"Edit", "Edit", map[string]any{"file_path": filepath.Join(project, "main.go"), "old_string": "package main", "new_string": "package app"}, "allow"},
		{"Edit of CLAUDE.md", "Edit", map[string]any{"file_path": filepath.Join(project, "CLAUDE.md"), "old_string": "a", "new_string": "b"}, "ask"},
		{"Read", "Read", map[string]any{"file_path": filepath.Join(project, "main.go")}, "allow"},
		{"an MCP read", "mcp__github__get_issue", map[string]any{"owner": "acme", "repo": "api", "issue_number": 42}, "allow"},
		{"an MCP merge", "mcp__github__merge_pull_request", map[string]any{"owner": "acme", "repo": "api", "pullNumber": 7}, "ask"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runBinary(t, env, claudeEvent(t, tc.tool, tc.input), bin, hookArgs...)
			d, reason := preToolUse(t, stdout)
			if code != 0 || d != tc.decision {
				t.Errorf("exit %d, %s (%s; stderr %q); want exit 0, %s", code, d, reason, stderr, tc.decision)
			}
		})
	}
	// Malformed input: a deny, exit 2 — never 1.
	code, stdout, _ := runBinary(t, env, `{"hook_event_name": "PreToolUse", "tool_name": "Bash"`, bin, hookArgs...)
	if d, _ := preToolUse(t, stdout); code != 2 || d != "deny" {
		t.Errorf("truncated event: exit %d, %s; want 2, deny", code, d)
	}

	// Every decision is in the audit log, and the log verifies.
	st, err := sqlite.Open(context.Background(), filepath.Join(state, "portcullis.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := st.QueryAudit(context.Background(), portcullis.AuditQuery{Kind: portcullis.AuditDecision, Limit: 1000})
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(cases) {
		t.Errorf("audit log: %d decision rows; want %d", len(rows), len(cases))
	}
	for i, r := range rows {
		ev, err := r.Event()
		if err != nil {
			t.Fatal(err)
		}
		if want := cases[i].tool; ev.Agent != "claude-code" || ev.Session == "" || !strings.HasSuffix(want, ev.Tool) {
			t.Errorf("audit row %d: agent %q, session %q, tool %q; want claude-code, the session, %s", i, ev.Agent, ev.Session, ev.Tool, want)
		}
	}
	if code, out, errOut := runBinary(t, env, "", bin, "audit", "verify"); code != 0 {
		t.Errorf("audit verify: exit %d: %s%s", code, out, errOut)
	}
}

// hookHoldEndToEnd holds a call in the hook process until a person, in
// another process, answers it through the shared SQLite store.
func hookHoldEndToEnd(t *testing.T, bin string) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	policyPath, err := filepath.Abs(claudePolicy)
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"PORTCULLIS_POLICY=" + policyPath, "PORTCULLIS_STATE=" + state}
	// The store exists before the person's side opens it.
	if code, _, stderr := runBinary(t, env, claudeEvent(t, "Read", map[string]any{"file_path": "/x"}), bin, "hook", "claude-code"); code != 0 {
		t.Fatalf("first run: exit %d: %s", code, stderr)
	}
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(state, "portcullis.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	pol, _, err := policy.Load(policyPath)
	if err != nil {
		t.Fatal(err)
	}
	g, err := gate.New(pol, gate.WithStore(st))
	if err != nil {
		t.Fatal(err)
	}
	for _, approve := range []bool{true, false} {
		done := make(chan struct{})
		command := map[bool]string{true: "git push origin main", false: "git push origin release"}[approve]
		go func() {
			defer close(done)
			approvePending(t, g, st, approve, command)
		}()
		code, stdout, stderr := runBinary(t, env, claudeEvent(t, "Bash", map[string]any{"command": command}), bin, "hook", "claude-code", "--hold")
		<-done
		d, reason := preToolUse(t, stdout)
		want := map[bool]string{true: "allow", false: "deny"}[approve]
		if code != 0 || d != want {
			t.Errorf("held %q, approved=%v: exit %d, %s (%s; %s); want %s", command, approve, code, d, reason, stderr, want)
		}
	}
}

// installedCommandRuns installs the hook with the built binary and runs
// the command Claude Code would run, through the shell, as Claude Code
// runs it.
func installedCommandRuns(t *testing.T, bin string) {
	dir := t.TempDir()
	project := filepath.Join(dir, "my project") // a space, to prove the quoting
	if err := os.MkdirAll(project, 0o755); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	// The binary was built into a temporary directory, which install
	// refuses: its TMPDIR here is another one.
	installEnv := []string{"TMPDIR=" + project}
	code, out, errOut := runBinary(t, installEnv, "", bin, "hook", "install", "claude-code", "--dir", project, "--policy", claudePolicy, "--state", state)
	if code != 0 {
		t.Fatalf("install: exit %d: %s%s", code, out, errOut)
	}
	b, err := os.ReadFile(filepath.Join(project, ".claude", "settings.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Hooks struct {
			PreToolUse []struct {
				Hooks []struct{ Command string } `json:"hooks"`
			} `json:"PreToolUse"`
		} `json:"hooks"`
	}
	if err := json.Unmarshal(b, &s); err != nil || len(s.Hooks.PreToolUse) != 1 {
		t.Fatalf("settings: %v\n%s", err, b)
	}
	command := s.Hooks.PreToolUse[0].Hooks[0].Command
	code, stdout, stderr := runBinary(t, nil, claudeEvent(t, "Bash", map[string]any{"command": "ls"}), "/bin/sh", "-c", command)
	if d, _ := preToolUse(t, stdout); code != 0 || d != "allow" {
		t.Errorf("installed command %q: exit %d, %s (%s)", command, code, stdout, stderr)
	}
}

// shellWrapperEndToEnd runs the binary as portcullis-sh, the login-shell
// wrapper an agent's $SHELL can name.
func shellWrapperEndToEnd(t *testing.T, bin string) {
	dir := t.TempDir()
	sh := filepath.Join(dir, "portcullis-sh")
	if err := os.Symlink(bin, sh); err != nil {
		t.Fatal(err)
	}
	e := newExecEnv(t, execPolicy)
	env := []string{"PORTCULLIS_POLICY=" + e.policy, "PORTCULLIS_STATE=" + e.state, "SHELL=" + sh}
	code, stdout, stderr := runBinary(t, env, "piped", sh, "-lc", "cat; echo; printf '%s' \"$0\"")
	if code != 0 || !strings.HasPrefix(stdout, "piped\n") {
		t.Errorf("portcullis-sh -lc: exit %d, %q (%s)", code, stdout, stderr)
	}
	marker := filepath.Join(e.dir, "marker")
	code, _, stderr = runBinary(t, env, "", sh, "-c", "touch "+marker+" && reboot")
	if code != shellgate.ExitDenied || exists(marker) || !strings.Contains(stderr, "takes the machine down") {
		t.Errorf("portcullis-sh -c with a denied part: exit %d, ran %v, stderr %q; want %d, never run", code, exists(marker), stderr, shellgate.ExitDenied)
	}
	code, _, stderr = runBinary(t, env, "", sh, "-c", "exit 7")
	if code != 7 {
		t.Errorf("portcullis-sh -c 'exit 7': exit %d (%s)", code, stderr)
	}
	code, _, stderr = runBinary(t, env, "", sh)
	if code != 2 || !strings.Contains(stderr, "only commands given with -c") {
		t.Errorf("portcullis-sh without -c: exit %d, %q; want 2 and why", code, stderr)
	}
}
