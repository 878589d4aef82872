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

// openCodeModel is a model speaking OpenAI's Chat Completions API (the SSE
// stream opencode's OpenAI-compatible provider reads): a request that
// offers the bash tool and carries no tool result yet asks for one shell
// command; any other request (opencode's title generation, or the turn
// after the tool ran) is answered with text. It keeps every tool result
// opencode sent it.
type openCodeModel struct {
	command string
	mu      sync.Mutex
	outputs []string
}

func (f *openCodeModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		http.NotFound(w, r)
		return
	}
	var req struct {
		Model string `json:"model"`
		Tools []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	bash, answered := false, false
	for _, t := range req.Tools {
		bash = bash || t.Function.Name == "bash"
	}
	f.mu.Lock()
	for _, m := range req.Messages {
		if m.Role != "tool" {
			continue
		}
		answered = true
		var s string
		if json.Unmarshal(m.Content, &s) != nil {
			s = string(m.Content)
		}
		if bash {
			f.outputs = append(f.outputs, s)
		}
	}
	f.mu.Unlock()

	w.Header().Set("Content-Type", "text/event-stream")
	send := func(delta map[string]any, finish any) {
		b, _ := json.Marshal(map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
		fmt.Fprintf(w, "data: %s\n\n", b)
	}
	if bash && !answered {
		args, _ := json.Marshal(map[string]any{"command": f.command, "description": "Run the command"})
		send(map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{"index": 0, "id": "call_1", "type": "function",
			"function": map[string]any{"name": "bash", "arguments": string(args)}}}}, nil)
		send(map[string]any{}, "tool_calls")
	} else {
		send(map[string]any{"role": "assistant", "content": "done"}, nil)
		send(map[string]any{}, "stop")
	}
	b, _ := json.Marshal(map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": req.Model,
		"choices": []any{}, "usage": map[string]any{"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
	fmt.Fprintf(w, "data: %s\n\ndata: [DONE]\n\n", b)
}

func (f *openCodeModel) toolOutputs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.outputs)
}

// openCodeBinary is the opencode CLI from npm: $PORTCULLIS_OPENCODE, else
// the binary of e2e/package.json's opencode-linux-x64, the Linux build the
// opencode-ai package installs. e2e/ names that build rather than
// opencode-ai because the npm registry CI reaches does not serve every
// platform's build that opencode-ai lists, and `npm ci` refuses a lock
// file without them. On another platform, set PORTCULLIS_OPENCODE.
func openCodeBinary(t *testing.T, e2e string) string {
	t.Helper()
	bin := os.Getenv("PORTCULLIS_OPENCODE")
	if bin == "" {
		bin = filepath.Join(e2e, "node_modules", "opencode-linux-x64", "bin", "opencode")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s=1 but opencode is missing: run `npm ci --prefix e2e`, or set PORTCULLIS_OPENCODE (%v)", e2eEnv, err)
	}
	return bin
}

// TestOpenCodeEndToEnd runs the real opencode CLI from npm (its Linux build)
// against a local fake model, with the plugin `portcullis hook install
// opencode` wrote into the project: an `rm -rf` of a directory is blocked
// — the directory survives and the model receives Portcullis's reason —
// and an allowed `ls` runs.
func TestOpenCodeEndToEnd(t *testing.T) {
	opencode := openCodeBinary(t, e2eDir(t))
	bin := buildPortcullis(t, t.TempDir())
	policyPath, err := filepath.Abs("../../hook/testdata/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, command string
		refused       bool
	}{
		{"rm -rf is refused", "rm -rf victim", true},
		{"ls is allowed", "ls", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			home := filepath.Join(root, "home")
			work := filepath.Join(root, "work")
			victim := filepath.Join(work, "victim")
			if err := os.MkdirAll(victim, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(victim, "keep.txt"), []byte("keep"), 0o644); err != nil {
				t.Fatal(err)
			}
			model := &openCodeModel{command: tc.command}
			srv := httptest.NewServer(model)
			defer srv.Close()
			config, err := json.Marshal(map[string]any{
				"model":             "fake/fake-model",
				"small_model":       "fake/fake-model",
				"enabled_providers": []string{"fake"},
				"provider": map[string]any{"fake": map[string]any{
					"npm":     "@ai-sdk/openai-compatible",
					"name":    "Fake",
					"options": map[string]any{"baseURL": srv.URL + "/v1", "apiKey": "fake"},
					"models":  map[string]any{"fake-model": map[string]any{"name": "Fake", "tool_call": true}},
				}},
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(work, "opencode.json"), config, 0o644); err != nil {
				t.Fatal(err)
			}
			env := []string{"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
				"XDG_DATA_HOME=" + filepath.Join(home, ".local", "share"), "XDG_CACHE_HOME=" + filepath.Join(home, ".cache"),
				"XDG_STATE_HOME=" + filepath.Join(home, ".local", "state"),
				"OPENCODE_DISABLE_MODELS_FETCH=1", "OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_SHARE=1",
				// opencode takes its directory from $PWD, which the test's own
				// environment holds.
				"PWD=" + work}
			// opencode installs @opencode-ai/plugin beside the plugins of
			// each configuration directory, in the background, unless a
			// package lock already lists it; Portcullis's plugin needs
			// nothing from it, and the test runs offline.
			for _, d := range []string{filepath.Join(home, ".config", "opencode"), filepath.Join(work, ".opencode")} {
				if err := os.MkdirAll(filepath.Join(d, "node_modules"), 0o755); err != nil {
					t.Fatal(err)
				}
				lock := `{"packages": {"": {"dependencies": {"@opencode-ai/plugin": "*"}}}}`
				if err := os.WriteFile(filepath.Join(d, "package-lock.json"), []byte(lock), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			// The binary was built into a temporary directory, which
			// install refuses: its TMPDIR here is another one.
			code, stdout, stderr := runBinary(t, append(env, "TMPDIR="+work), "", bin, "hook", "install", "opencode",
				"--dir", work, "--policy", policyPath, "--state", filepath.Join(root, "state"))
			if code != 0 {
				t.Fatalf("hook install opencode: exit %d: %s%s", code, stdout, stderr)
			}
			if !strings.Contains(stdout, filepath.Join(work, ".opencode", "plugin", "portcullis.js")) {
				t.Fatalf("hook install opencode wrote %s; want the project's plugin", stdout)
			}

			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, opencode, "run", "--format", "json", "run the command")
			cmd.Dir = work
			cmd.Env = append(os.Environ(), env...)
			cmd.Stdin = strings.NewReader("")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("opencode run: %v\n%s", err, out)
			}
			outputs := model.toolOutputs()
			if len(outputs) != 1 {
				t.Fatalf("the model received %d tool results, want 1: %q\n%s", len(outputs), outputs, out)
			}
			if _, err := os.Stat(filepath.Join(victim, "keep.txt")); err != nil {
				t.Errorf("the directory did not survive: %v\n%s", err, out)
			}
			if tc.refused {
				if !strings.Contains(outputs[0], "Portcullis: ") || !strings.Contains(outputs[0], "approve apr_") {
					t.Errorf("the model received %q; want Portcullis's reason and the approval to ask for\n%s", outputs[0], out)
				}
				return
			}
			if !strings.Contains(outputs[0], "victim") || strings.Contains(outputs[0], "Portcullis") {
				t.Errorf("the allowed ls did not run: the model received %q\n%s", outputs[0], out)
			}
		})
	}
}
