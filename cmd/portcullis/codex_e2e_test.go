package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeResponses is a model speaking OpenAI's Responses API (the SSE stream
// Codex reads): the first turn asks for one shell command through the
// shell tool Codex offers; once Codex sends the tool's output back, it
// ends the turn. It keeps every tool output Codex sent it.
type fakeResponses struct {
	command string
	mu      sync.Mutex
	outputs []string
	tools   []string
}

func (f *fakeResponses) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/responses") {
		http.NotFound(w, r)
		return
	}
	var req struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
		Input []struct {
			Type   string          `json:"type"`
			Output json.RawMessage `json:"output"`
		} `json:"input"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	answered := false
	f.mu.Lock()
	f.tools = f.tools[:0]
	for _, t := range req.Tools {
		f.tools = append(f.tools, t.Name)
	}
	for _, in := range req.Input {
		if in.Type == "function_call_output" {
			answered = true
			var s string
			if json.Unmarshal(in.Output, &s) != nil {
				s = string(in.Output)
			}
			f.outputs = append(f.outputs, s)
		}
	}
	tools := slices.Clone(f.tools)
	f.mu.Unlock()

	w.Header().Set("Content-Type", "text/event-stream")
	send := func(typ string, data map[string]any) {
		data["type"] = typ
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
	}
	send("response.created", map[string]any{"response": map[string]any{"id": "resp_1"}})
	var item map[string]any
	switch {
	case answered:
		item = map[string]any{"type": "message", "role": "assistant", "id": "msg_1",
			"content": []any{map[string]any{"type": "output_text", "text": "done"}}}
	case slices.Contains(tools, "exec_command"):
		args, _ := json.Marshal(map[string]any{"cmd": f.command})
		item = map[string]any{"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "exec_command", "arguments": string(args)}
	default:
		args, _ := json.Marshal(map[string]any{"command": []string{"bash", "-lc", f.command}})
		item = map[string]any{"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "shell", "arguments": string(args)}
	}
	send("response.output_item.done", map[string]any{"item": item})
	send("response.completed", map[string]any{"response": map[string]any{"id": "resp_1",
		"usage": map[string]any{"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}}})
}

func (f *fakeResponses) toolOutputs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.outputs)
}

// TestCodexEndToEnd runs the real Codex CLI from npm (e2e/package.json)
// against a local fake model, with the hooks `portcullis hook install
// codex` wrote and trusted: an `rm -r` of a directory is refused — the
// directory survives and the model receives Portcullis's reason — and an
// allowed command runs, its hook run completed, not failed.
func TestCodexEndToEnd(t *testing.T) {
	dir := e2eDir(t)
	codex := filepath.Join(dir, "node_modules", ".bin", "codex")
	if _, err := os.Stat(codex); err != nil {
		t.Fatalf("%s=1 but Codex is missing: run `npm ci --prefix e2e` (%v)", e2eEnv, err)
	}
	bin := buildPortcullis(t, t.TempDir())
	policyPath, err := filepath.Abs("../../hook/testdata/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, command string
		refused       bool
	}{
		{"rm -r is refused", "rm -r victim", true},
		{"ls is allowed", "ls", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			home := filepath.Join(root, "home")
			codexHome := filepath.Join(home, ".codex")
			work := filepath.Join(root, "work")
			victim := filepath.Join(work, "victim")
			if err := os.MkdirAll(victim, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(codexHome, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(victim, "keep.txt"), []byte("keep"), 0o644); err != nil {
				t.Fatal(err)
			}
			model := &fakeResponses{command: tc.command}
			srv := httptest.NewServer(model)
			defer srv.Close()
			config := fmt.Sprintf(`model = "fake-model"
model_provider = "fake"
approval_policy = "never"
sandbox_mode = "danger-full-access"

[model_providers.fake]
name = "fake"
base_url = %q
wire_api = "responses"
`, srv.URL+"/v1")
			if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(config), 0o600); err != nil {
				t.Fatal(err)
			}
			env := []string{"HOME=" + home, "CODEX_HOME=" + codexHome}
			// The binary was built into a temporary directory, which
			// install refuses: its TMPDIR here is another one.
			code, stdout, stderr := runBinary(t, append(env, "TMPDIR="+work), "", bin, "hook", "install", "codex",
				"--policy", policyPath, "--state", filepath.Join(root, "state"))
			if code != 0 {
				t.Fatalf("hook install codex: exit %d: %s%s", code, stdout, stderr)
			}

			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, codex, "exec", "--skip-git-repo-check", "run the command")
			cmd.Dir = work
			cmd.Env = append(os.Environ(), env...)
			cmd.Stdin = strings.NewReader("")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("codex exec: %v\n%s", err, out)
			}
			var hookRuns []string
			sc := bufio.NewScanner(strings.NewReader(string(out)))
			for sc.Scan() {
				if line := strings.TrimSpace(sc.Text()); strings.HasPrefix(line, "hook: PreToolUse ") {
					hookRuns = append(hookRuns, line)
				}
			}
			outputs := model.toolOutputs()
			if len(outputs) != 1 {
				t.Fatalf("the model received %d tool outputs, want 1: %q\n%s", len(outputs), outputs, out)
			}
			if _, err := os.Stat(filepath.Join(victim, "keep.txt")); err != nil {
				t.Errorf("the directory did not survive: %v\n%s", err, out)
			}
			if tc.refused {
				if !strings.Contains(outputs[0], "Portcullis: ") || !strings.Contains(outputs[0], "approve apr_") {
					t.Errorf("the model received %q; want Portcullis's reason and the approval to ask for", outputs[0])
				}
				if !slices.Contains(hookRuns, "hook: PreToolUse Blocked") {
					t.Errorf("hook runs %q; want Blocked\n%s", hookRuns, out)
				}
				return
			}
			if !strings.Contains(outputs[0], "victim") {
				t.Errorf("the allowed ls did not run: the model received %q", outputs[0])
			}
			if len(hookRuns) == 0 || slices.ContainsFunc(hookRuns, func(s string) bool { return !strings.HasSuffix(s, " Completed") }) {
				t.Errorf("hook runs %q; want every one Completed (an allowed call is not a failed hook run)\n%s", hookRuns, out)
			}
		})
	}
}
