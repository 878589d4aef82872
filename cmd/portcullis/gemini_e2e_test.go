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

// geminiModel is a model speaking the Gemini API (the generateContent and
// streamGenerateContent?alt=sse calls Gemini CLI makes with an API key): a
// request that offers run_shell_command and carries no function response
// yet asks for one shell command; any other request is answered with
// text. It keeps every run_shell_command response Gemini CLI sent it, as
// JSON.
type geminiModel struct {
	command string
	mu      sync.Mutex
	outputs []string
}

func (f *geminiModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	stream := strings.HasSuffix(r.URL.Path, ":streamGenerateContent")
	if r.Method != http.MethodPost || !stream && !strings.HasSuffix(r.URL.Path, ":generateContent") {
		http.NotFound(w, r)
		return
	}
	var req struct {
		Tools []struct {
			FunctionDeclarations []struct {
				Name string `json:"name"`
			} `json:"functionDeclarations"`
		} `json:"tools"`
		Contents []struct {
			Parts []struct {
				FunctionResponse *struct {
					Name     string          `json:"name"`
					Response json.RawMessage `json:"response"`
				} `json:"functionResponse"`
			} `json:"parts"`
		} `json:"contents"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	shell, answered := false, false
	for _, t := range req.Tools {
		for _, d := range t.FunctionDeclarations {
			shell = shell || d.Name == "run_shell_command"
		}
	}
	f.mu.Lock()
	for _, c := range req.Contents {
		for _, p := range c.Parts {
			if p.FunctionResponse == nil {
				continue
			}
			answered = true
			if shell && p.FunctionResponse.Name == "run_shell_command" {
				f.outputs = append(f.outputs, string(p.FunctionResponse.Response))
			}
		}
	}
	f.mu.Unlock()

	part := map[string]any{"text": "done"}
	if shell && !answered {
		part = map[string]any{"functionCall": map[string]any{"name": "run_shell_command", "args": map[string]any{"command": f.command}}}
	}
	b, _ := json.Marshal(map[string]any{
		"candidates": []any{map[string]any{"index": 0, "finishReason": "STOP",
			"content": map[string]any{"role": "model", "parts": []any{part}}}},
		"usageMetadata": map[string]any{"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2},
		"modelVersion":  "gemini-2.5-flash",
	})
	if !stream {
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprintf(w, "data: %s\r\n\r\n", b)
}

func (f *geminiModel) toolOutputs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.outputs)
}

// geminiBinary is Gemini CLI from npm: $PORTCULLIS_GEMINI, else
// e2e/node_modules/.bin/gemini (the @google/gemini-cli package).
func geminiBinary(t *testing.T, e2e string) string {
	t.Helper()
	bin := os.Getenv("PORTCULLIS_GEMINI")
	if bin == "" {
		bin = filepath.Join(e2e, "node_modules", ".bin", "gemini")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s=1 but Gemini CLI is missing: run `npm ci --prefix e2e`, or set PORTCULLIS_GEMINI (%v)", e2eEnv, err)
	}
	return bin
}

// TestGeminiEndToEnd runs the real Gemini CLI from npm (@google/gemini-cli)
// headless and in YOLO mode against a local fake Gemini API, with the
// BeforeTool hook `portcullis hook install gemini` wrote into the
// project: an `rm -r` of a directory is refused — the directory survives
// and the model receives Portcullis's reason — and an allowed `ls` runs,
// its hook run decided by Portcullis and not a failed one.
func TestGeminiEndToEnd(t *testing.T) {
	gemini := geminiBinary(t, e2eDir(t))
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
			work := filepath.Join(root, "work")
			state := filepath.Join(root, "state")
			victim := filepath.Join(work, "victim")
			if err := os.MkdirAll(victim, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(victim, "keep.txt"), []byte("keep"), 0o644); err != nil {
				t.Fatal(err)
			}
			model := &geminiModel{command: tc.command}
			srv := httptest.NewServer(model)
			defer srv.Close()
			// The user's settings: API-key authentication (its base URL
			// comes from GOOGLE_GEMINI_BASE_URL), nothing sent elsewhere.
			settings, err := json.Marshal(map[string]any{
				"security":  map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}},
				"privacy":   map[string]any{"usageStatisticsEnabled": false},
				"telemetry": map[string]any{"enabled": false},
				"general":   map[string]any{"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Join(home, ".gemini"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(home, ".gemini", "settings.json"), settings, 0o600); err != nil {
				t.Fatal(err)
			}
			env := []string{"HOME=" + home, "GEMINI_CLI_HOME=" + home,
				"GEMINI_API_KEY=fake", "GOOGLE_GEMINI_BASE_URL=" + srv.URL,
				"GOOGLE_GENAI_USE_VERTEXAI=", "GOOGLE_GENAI_USE_GCA=", "GEMINI_TELEMETRY_ENABLED=false",
				// Gemini CLI runs a project's hooks only in a folder the
				// user trusts.
				"GEMINI_CLI_TRUST_WORKSPACE=true"}
			// The binary was built into a temporary directory, which
			// install refuses: its TMPDIR here is another one.
			code, stdout, stderr := runBinary(t, append(env, "TMPDIR="+work), "", bin, "hook", "install", "gemini",
				"--dir", work, "--policy", policyPath, "--state", state)
			if code != 0 {
				t.Fatalf("hook install gemini: exit %d: %s%s", code, stdout, stderr)
			}
			if !strings.Contains(stdout, filepath.Join(work, ".gemini", "settings.json")) {
				t.Fatalf("hook install gemini wrote %s; want the project's settings", stdout)
			}

			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, gemini, "--prompt", "run the command", "--approval-mode", "yolo",
				"--model", "gemini-2.5-flash", "--output-format", "stream-json")
			cmd.Dir = work
			cmd.Env = append(os.Environ(), env...)
			cmd.Stdin = strings.NewReader("")
			var out, errb strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Run(); err != nil {
				t.Fatalf("gemini: %v\n%s%s", err, out.String(), errb.String())
			}
			log := out.String() + errb.String()
			outputs := model.toolOutputs()
			if len(outputs) != 1 {
				t.Fatalf("the model received %d shell results, want 1: %q\n%s", len(outputs), outputs, log)
			}
			if _, err := os.Stat(filepath.Join(victim, "keep.txt")); err != nil {
				t.Errorf("the directory did not survive: %v\n%s", err, log)
			}
			// A hook that fails or answers what Gemini CLI does not accept
			// is reported as a warning, and the call runs.
			for _, failed := range []string{"Hook(s) [", "Hook system message"} {
				if strings.Contains(errb.String(), failed) {
					t.Errorf("Gemini CLI reported a failed hook run (%q)\n%s", failed, log)
				}
			}
			code, audit, stderr := runBinary(t, env, "", bin, "audit", "export", "--state", state)
			if code != 0 {
				t.Fatalf("audit export: exit %d: %s", code, stderr)
			}
			if !strings.Contains(audit, `"command":`+mustJSON(t, tc.command)) {
				t.Errorf("the hook did not decide %q: the audit log holds\n%s", tc.command, audit)
			}
			if tc.refused {
				if !strings.Contains(outputs[0], "Portcullis: ") || !strings.Contains(outputs[0], "approve apr_") {
					t.Errorf("the model received %s; want Portcullis's reason and the approval to ask for\n%s", outputs[0], log)
				}
				return
			}
			if !strings.Contains(outputs[0], "victim") || strings.Contains(outputs[0], "Portcullis") {
				t.Errorf("the allowed ls did not run: the model received %s\n%s", outputs[0], log)
			}
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
