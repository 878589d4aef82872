package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCursorHookBinary runs the real binary as Cursor runs it, by the
// documented wire format (Cursor's CLI is not in the npm registry): `hook
// install cursor` writes .cursor/hooks.json; the command it wrote, run
// through the shell with one event on stdin per call, denies a
// destructive rm -rf, lets a harmless ls run, asks for an rm -rf of a
// build directory, refuses to let the agent rewrite hooks.json, and
// answers malformed input and an event it does not know with a deny and
// exit status 2; doctor finds the project protected, and flags a
// misspelled hook name.
func TestCursorHookBinary(t *testing.T) {
	root := t.TempDir()
	tmp := filepath.Join(root, "tmp")
	home := filepath.Join(root, "home")
	project := filepath.Join(root, "project")
	for _, d := range []string{tmp, home, project} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin := buildPortcullis(t, root)
	pol, err := filepath.Abs("../../examples/default/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"HOME=" + home, "TMPDIR=" + tmp, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"PORTCULLIS_STATE=" + filepath.Join(root, "state"), "PORTCULLIS_POLICY=", "PORTCULLIS_GATEWAY="}
	code, out, errOut := runBinary(t, env, "", bin, "hook", "install", "cursor", "--dir", project, "--policy", pol, "--binary", bin)
	if code != 0 {
		t.Fatalf("hook install cursor: exit %d: %s%s", code, out, errOut)
	}
	hooksPath := filepath.Join(project, ".cursor", "hooks.json")
	var file struct {
		Version int `json:"version"`
		Hooks   map[string][]struct {
			Command    string `json:"command"`
			FailClosed bool   `json:"failClosed"`
		} `json:"hooks"`
	}
	b, err := os.ReadFile(hooksPath)
	if err != nil || json.Unmarshal(b, &file) != nil || file.Version != 1 {
		t.Fatalf("hooks.json: %s, %v", b, err)
	}
	command := ""
	for _, ev := range []string{"beforeShellExecution", "beforeMCPExecution", "beforeReadFile", "preToolUse"} {
		hs := file.Hooks[ev]
		if len(hs) != 1 || !hs[0].FailClosed || !strings.HasPrefix(hs[0].Command, bin+" hook cursor ") {
			t.Fatalf("hooks.json %s = %+v; want the portcullis hook, fail-closed", ev, hs)
		}
		command = hs[0].Command
	}

	base := map[string]any{"conversation_id": "conv-1", "generation_id": "gen-1", "model": "claude-4.5-sonnet",
		"cursor_version": "2.1.46", "workspace_roots": []string{project}, "user_email": nil}
	event := func(name string, fields map[string]any) string {
		ev := map[string]any{"hook_event_name": name}
		for k, v := range base {
			ev[k] = v
		}
		for k, v := range fields {
			ev[k] = v
		}
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	cases := []struct {
		name, input, permission string
		exit                    int
	}{
		{"ls", event("beforeShellExecution", map[string]any{"command": "ls -la", "cwd": project}), "allow", 0},
		{"rm -rf of the home directory", event("beforeShellExecution", map[string]any{"command": "rm -rf ~/", "cwd": project}), "deny", 0},
		{"rm -rf of a build directory", event("beforeShellExecution", map[string]any{"command": "rm -rf build", "cwd": ""}), "ask", 0},
		{"a read in the project", event("beforeReadFile", map[string]any{"file_path": filepath.Join(project, "main.go"), "content": "package main\n"}), "allow", 0},
		{"an unclassified MCP tool", event("beforeMCPExecution", map[string]any{"tool_name": "merge_pull_request", "tool_input": `{"pullNumber": 7}`, "command": "npx -y server-github"}), "ask", 0},
		{"a write of hooks.json", event("preToolUse", map[string]any{"tool_name": "Write", "tool_input": map[string]any{"file_path": hooksPath, "contents": "{}"}, "tool_use_id": "t1", "cwd": project}), "deny", 0},
		{"an event it does not answer", event("afterFileEdit", map[string]any{"file_path": filepath.Join(project, "main.go")}), "deny", 2},
		{"not JSON", `{"hook_event_name": "beforeShellExecution", "command": "rm -rf ~/"`, "deny", 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runShell(t, env, project, tc.input, command)
			var a struct {
				Permission   string `json:"permission"`
				AgentMessage string `json:"agent_message"`
			}
			if err := json.Unmarshal([]byte(stdout), &a); err != nil {
				t.Fatalf("answer %q (stderr %q): %v", stdout, stderr, err)
			}
			if code != tc.exit || a.Permission != tc.permission {
				t.Errorf("exit %d, %s (%s; stderr %q); want exit %d, %s", code, a.Permission, a.AgentMessage, stderr, tc.exit, tc.permission)
			}
			if a.Permission == "deny" && !strings.Contains(a.AgentMessage, "Portcullis") {
				t.Errorf("a deny without its reason: %s", stdout)
			}
		})
	}

	code, out, errOut = runBinary(t, env, "", bin, "doctor", "cursor", "--dir", project)
	if code != 0 || !strings.Contains(out, "cursor ("+hooksPath+"): protected") {
		t.Errorf("doctor: exit %d:\n%s%s", code, out, errOut)
	}
	if err := os.WriteFile(hooksPath, bytes.Replace(b, []byte(`"beforeReadFile"`), []byte(`"beforeFileRead"`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ = runBinary(t, env, "", bin, "doctor", "cursor", "--dir", project)
	if code != 1 || !strings.Contains(out, `"beforeFileRead" is not a Cursor hook (did you mean "beforeReadFile"?)`) {
		t.Errorf("doctor with a misspelled hook: exit %d:\n%s", code, out)
	}
}

// runShell runs a hook command as the clients do, `sh -c COMMAND` in dir,
// with stdin.
func runShell(t *testing.T, env []string, dir, stdin, command string) (int, string, string) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", command)
	cmd.Dir = dir
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
	t.Fatalf("sh -c %s: %v", command, err)
	return 0, "", ""
}
