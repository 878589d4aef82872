package main

import (
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

// fakeChat is a model speaking OpenAI's Chat Completions API, which
// Copilot CLI uses for a custom provider (COPILOT_PROVIDER_BASE_URL): the
// first turn asks for one shell command through Copilot's bash tool; once
// Copilot sends the tool's result back, it ends the turn. It keeps every
// tool result Copilot sent it.
type fakeChat struct {
	command string
	mu      sync.Mutex
	results []string
}

func (f *fakeChat) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/models") {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"object":"list","data":[{"id":"gpt-4o","object":"model"}]}`)
		return
	}
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		http.NotFound(w, r)
		return
	}
	var req struct {
		Stream   bool `json:"stream"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	answered := false
	f.mu.Lock()
	for _, m := range req.Messages {
		if m.Role == "tool" {
			answered = true
			var s string
			if json.Unmarshal(m.Content, &s) != nil {
				s = string(m.Content)
			}
			if !slices.Contains(f.results, s) {
				f.results = append(f.results, s)
			}
		}
	}
	f.mu.Unlock()
	msg := map[string]any{"role": "assistant", "content": "done"}
	finish := "stop"
	if !answered {
		args, _ := json.Marshal(map[string]any{"command": f.command, "description": "run the command"})
		msg = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
			"index": 0, "id": "call_1", "type": "function",
			"function": map[string]any{"name": "bash", "arguments": string(args)}}}}
		finish = "tool_calls"
	}
	usage := map[string]any{"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "c1", "object": "chat.completion", "created": 1, "model": "gpt-4o",
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}, "usage": usage})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	for _, chunk := range []map[string]any{
		{"choices": []any{map[string]any{"index": 0, "delta": msg, "finish_reason": nil}}},
		{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": finish}}, "usage": usage},
	} {
		chunk["id"], chunk["object"], chunk["created"], chunk["model"] = "c1", "chat.completion.chunk", 1, "gpt-4o"
		b, _ := json.Marshal(chunk)
		fmt.Fprintf(w, "data: %s\n\n", b)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

func (f *fakeChat) toolResults() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.results)
}

// TestCopilotEndToEnd runs the real GitHub Copilot CLI from npm
// (e2e/package.json) in prompt mode against a local fake model (a custom
// provider, offline: no GitHub sign-in), with the hook `portcullis hook
// install copilot` wrote for the user: an `rm -r` of a directory is
// refused — the directory survives and the model receives Portcullis's
// reason —, an allowed `ls` runs, and a hook that cannot start (its
// policy is gone) blocks the call too.
func TestCopilotEndToEnd(t *testing.T) {
	dir := e2eDir(t)
	copilot := filepath.Join(dir, "node_modules", "@github", "copilot", "npm-loader.js")
	if _, err := os.Stat(copilot); err != nil {
		t.Fatalf("%s=1 but GitHub Copilot CLI is missing: run `npm ci --prefix e2e` (%v)", e2eEnv, err)
	}
	root := t.TempDir()
	tmp := filepath.Join(root, "tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := buildPortcullis(t, root)
	policyPath, err := filepath.Abs("../../hook/testdata/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, command, policy string
		refused               bool
		reason                string
	}{
		{"rm -r is refused", "rm -r victim", policyPath, true, "Portcullis: "},
		{"ls is allowed", "ls", policyPath, false, ""},
		{"a hook that cannot start blocks", "rm -r victim", filepath.Join(root, "gone.yaml"), true, "Portcullis denied this call"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			work := t.TempDir()
			home := filepath.Join(work, "home")
			project := filepath.Join(work, "project")
			victim := filepath.Join(project, "victim")
			if err := os.MkdirAll(victim, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(victim, "keep.txt"), []byte("keep"), 0o644); err != nil {
				t.Fatal(err)
			}
			if tc.policy != policyPath {
				// hook install checks the policy: install with one, then
				// take it away.
				if err := os.WriteFile(tc.policy, []byte("version: 1\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			env := []string{"HOME=" + home, "TMPDIR=" + tmp, "COPILOT_HOME=", "XDG_CONFIG_HOME=" + filepath.Join(home, ".config")}
			code, stdout, stderr := runBinary(t, env, "", bin, "hook", "install", "copilot",
				"--policy", tc.policy, "--state", filepath.Join(work, "state"), "--binary", bin)
			if code != 0 {
				t.Fatalf("hook install copilot: exit %d: %s%s", code, stdout, stderr)
			}
			if tc.policy != policyPath {
				if err := os.Remove(tc.policy); err != nil {
					t.Fatal(err)
				}
			}
			model := &fakeChat{command: tc.command}
			srv := httptest.NewServer(model)
			defer srv.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "node", copilot, "-p", "run the command", "--allow-all-tools", "--no-auto-update")
			cmd.Dir = project
			cmd.Env = append(os.Environ(), append(env, "COPILOT_OFFLINE=true", "COPILOT_PROVIDER_BASE_URL="+srv.URL+"/v1",
				"COPILOT_MODEL=gpt-4o", "COPILOT_ALLOW_ALL=", "COPILOT_AUTO_UPDATE=false", "NO_COLOR=1")...)
			cmd.Stdin = strings.NewReader("")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("copilot -p: %v\n%s", err, out)
			}
			results := model.toolResults()
			if len(results) != 1 {
				t.Fatalf("the model received %d tool results, want 1: %q\n%s", len(results), results, out)
			}
			t.Logf("the model received %q", results[0])
			_, statErr := os.Stat(filepath.Join(victim, "keep.txt"))
			if statErr != nil {
				t.Errorf("the directory did not survive: %v\n%s", statErr, out)
			}
			if tc.refused {
				if !strings.Contains(results[0], tc.reason) {
					t.Errorf("the model received %q; want the refusal with %q", results[0], tc.reason)
				}
				return
			}
			if !strings.Contains(results[0], "victim") {
				t.Errorf("the allowed ls did not run: the model received %q\n%s", results[0], out)
			}
		})
	}
}
