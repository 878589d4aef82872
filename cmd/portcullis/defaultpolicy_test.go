package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/portcullis/portcullis/internal/cmd/cmdutil"
)

// TestHookDefaultPolicy: with neither --policy nor $PORTCULLIS_POLICY, the
// Claude Code hook decides under the built-in default policy, says so on
// stderr, lets `ls` and a read of a project file through, refuses
// `rm -rf ~` and a write to its own settings, and asks for a write.
func TestHookDefaultPolicy(t *testing.T) {
	home, project := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("PORTCULLIS_POLICY", "")
	t.Setenv("PORTCULLIS_GATEWAY", "")
	t.Setenv("CLAUDE_PROJECT_DIR", project)
	state := filepath.Join(t.TempDir(), "state")
	for _, tc := range []struct {
		name, tool string
		input      map[string]any
		want       string
	}{
		{"ls", "Bash", map[string]any{"command": "ls"}, "allow"},
		{"a read of a project file", "Read", map[string]any{"file_path": filepath.Join(project, "main.go")}, "allow"},
		{"rm -rf ~", "Bash", map[string]any{"command": "rm -rf ~"}, "deny"},
		{"rm -fr /", "Bash", map[string]any{"command": "rm -fr /"}, "deny"},
		{"rm -r -f ~", "Bash", map[string]any{"command": "rm -r -f ~"}, "deny"},
		{"a moderate command", "Bash", map[string]any{"command": "git push origin main"}, "ask"},
		{"a write", "Write", map[string]any{"file_path": filepath.Join(project, "main.go"), "content": "package main\n"}, "ask"},
		{"a write to the hook's settings", "Write", map[string]any{"file_path": filepath.Join(project, ".claude", "settings.json"), "content": "{}"}, "deny"},
		{"an MCP tool it does not name", "mcp__github__create_issue", map[string]any{"title": "x"}, "ask"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, claudeEvent(t, tc.tool, tc.input), "hook", "claude-code", "--state", state)
			if code != 0 {
				t.Fatalf("exit %d; stderr %s", code, stderr)
			}
			if decision, reason := preToolUse(t, stdout); decision != tc.want {
				t.Errorf("%s: %s (%s); want %s", tc.name, decision, reason, tc.want)
			}
			if strings.Count(stderr, cmdutil.DefaultPolicyNotice) != 1 {
				t.Errorf("stderr %q; want the built-in policy named once", stderr)
			}
		})
	}
}

// TestDecideDefaultPolicy: decide without a policy decides under the
// built-in one and says so on stderr.
func TestDecideDefaultPolicy(t *testing.T) {
	t.Setenv("PORTCULLIS_POLICY", "")
	in := `{"tool":"Bash","args":{"command":"ls"}}
{"tool":"Bash","args":{"command":"rm -rf ~"}}
{"tool":"Write","args":{"file_path":"main.go","content":"x"}}
`
	code, stdout, stderr := runCLI(t, in, "decide")
	if code != 0 {
		t.Fatalf("exit %d; stderr %s", code, stderr)
	}
	if strings.Count(stderr, cmdutil.DefaultPolicyNotice) != 1 {
		t.Errorf("stderr %q; want the built-in policy named once", stderr)
	}
	var outcomes []string
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var d struct {
			Outcome string `json:"outcome"`
		}
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		outcomes = append(outcomes, d.Outcome)
	}
	if got := strings.Join(outcomes, " "); got != "allow deny confirm" {
		t.Errorf("outcomes %q; want allow deny confirm", got)
	}
}

// TestPolicyShowDefault: show-default prints the built-in policy, and the
// printed file passes lint --strict.
func TestPolicyShowDefault(t *testing.T) {
	code, stdout, stderr := runCLI(t, "", "policy", "show-default")
	if code != 0 {
		t.Fatalf("exit %d; stderr %s", code, stderr)
	}
	golden(t, "policy_show_default", stdout)
	file := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(file, []byte(stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runCLI(t, "", "policy", "lint", "--strict", file); code != 0 {
		t.Errorf("lint --strict of the printed policy: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, _ := runCLI(t, "", "policy", "show-default", "extra"); code != 2 {
		t.Errorf("show-default with an argument: exit %d; want 2", code)
	}
}

// TestHookDefaultPolicyOtherHosts: Codex's and Gemini CLI's tools map onto
// the built-in policy's Bash and Read as Claude Code's do.
func TestHookDefaultPolicyOtherHosts(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("PORTCULLIS_POLICY", "")
	t.Setenv("PORTCULLIS_GATEWAY", "")
	event := func(name, tool string, input map[string]any) string {
		b, err := json.Marshal(map[string]any{"session_id": "s1", "hook_event_name": name, "cwd": home, "tool_name": tool, "tool_input": input})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, tc := range []struct {
		host, event, tool string
		input             map[string]any
		want              string
	}{
		{"codex", "PreToolUse", "Bash", map[string]any{"command": "ls"}, "{}"},
		{"codex", "PreToolUse", "Bash", map[string]any{"command": "rm -rf ~"}, `"permissionDecision":"deny"`},
		{"gemini", "BeforeTool", "run_shell_command", map[string]any{"command": "ls"}, `"decision":"allow"`},
		{"gemini", "BeforeTool", "read_file", map[string]any{"file_path": filepath.Join(home, "main.go")}, `"decision":"allow"`},
		{"gemini", "BeforeTool", "run_shell_command", map[string]any{"command": "rm -rf ~"}, `"decision":"deny"`},
	} {
		state := filepath.Join(t.TempDir(), "state")
		code, stdout, stderr := runCLI(t, event(tc.event, tc.tool, tc.input), "hook", tc.host, "--state", state)
		if code != 0 || !strings.Contains(stdout, tc.want) || !strings.Contains(stderr, cmdutil.DefaultPolicyNotice) {
			t.Errorf("%s %s %v: exit %d, %s (stderr %q); want %s", tc.host, tc.tool, tc.input, code, stdout, stderr, tc.want)
		}
	}
	// Copilot CLI's own bookkeeping tools are named by the built-in
	// policy: they do not ask every time.
	for _, tc := range []struct {
		tool  string
		input map[string]any
		want  string
	}{
		{"report_intent", map[string]any{"intent": "Exploring the code"}, "allow"},
		{"read_bash", map[string]any{"shellId": "1"}, "allow"},
		{"view", map[string]any{"path": filepath.Join(home, "main.go")}, "allow"},
		{"bash", map[string]any{"command": "ls", "description": "list"}, "allow"},
		{"bash", map[string]any{"command": "rm -rf ~", "description": "clean"}, "deny"},
	} {
		b, err := json.Marshal(map[string]any{"sessionId": "s1", "timestamp": 1, "cwd": home, "toolName": tc.tool, "toolArgs": tc.input})
		if err != nil {
			t.Fatal(err)
		}
		state := filepath.Join(t.TempDir(), "state")
		code, stdout, stderr := runCLI(t, string(b), "hook", "copilot", "--state", state)
		if code != 0 || !strings.Contains(stdout, `"permissionDecision":"`+tc.want+`"`) {
			t.Errorf("copilot %s %v: exit %d, %s (stderr %q); want %s", tc.tool, tc.input, code, stdout, stderr, tc.want)
		}
	}
}

// TestExecDefaultPolicy: exec without a policy runs a safe command and
// refuses `rm -r -f ~` under the built-in policy.
func TestExecDefaultPolicy(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("PORTCULLIS_POLICY", "")
	state := filepath.Join(t.TempDir(), "state")
	code, _, stderr := runCLI(t, "", "exec", "--state", state, "--", "true")
	if code != 0 || strings.Count(stderr, cmdutil.DefaultPolicyNotice) != 1 {
		t.Errorf("exec true: exit %d, stderr %q; want 0 and the built-in policy named once", code, stderr)
	}
	code, _, stderr = runCLI(t, "", "exec", "--state", state, "--no-wait", "--", "rm", "-r", "-f", "~")
	if code != 126 || !strings.Contains(stderr, "blocked") {
		t.Errorf("exec rm -r -f ~: exit %d, stderr %q; want 126, blocked", code, stderr)
	}
}

// TestMCPDefaultPolicy: the stdio wrapper starts without a policy, says so
// on stderr, and offers the upstream's tools, which the built-in policy
// does not name: each asks a person.
func TestMCPDefaultPolicy(t *testing.T) {
	t.Setenv("PORTCULLIS_POLICY", "")
	state := filepath.Join(t.TempDir(), "state")
	cmd := wrapperCmd(t, "--state", state, "--", "env", upstreamEnv+"=1", os.Args[0], "-test.run=^$")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "default-policy-test", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("%v; stderr %s", err, stderr.String())
	}
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	cs.Close()
	if !strings.Contains(strings.Join(names, " "), "read_note") {
		t.Errorf("tools %v; want the upstream's read_note", names)
	}
	if strings.Count(stderr.String(), cmdutil.DefaultPolicyNotice) != 1 {
		t.Errorf("stderr %q; want the built-in policy named once", stderr.String())
	}
}
