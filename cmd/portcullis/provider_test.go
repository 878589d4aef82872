package main

import (
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis/portcullis/validator/providers"
	"github.com/portcullis/portcullis/validator/remote/remotetest"
)

// validatorServePolicy is servePolicy with write_note judged by an
// OpenAI-compatible validator at baseURL.
func validatorServePolicy(baseURL string) string {
	pol := strings.Replace(servePolicy, "write_note: {endpoint: UPDATE}", "write_note: {endpoint: UPDATE, defaultLevel: AUTO_APPROVE}", 1)
	return strings.Replace(pol, "approvals:", `validator:
  provider: openai
  model: gpt-test
  baseURL: `+baseURL+`
  timeout: 10s
  rules: ./groundRules.md
  scope: {tools: [write_note]}
approvals:`, 1)
}

// TestGatewayAsksTheModelThroughTheProviderProgram: a gateway whose policy
// configures a model validator asks the model through the provider
// program, which it starts; and when the gateway is killed, the program
// does not outlive it.
func TestGatewayAsksTheModelThroughTheProviderProgram(t *testing.T) {
	t.Setenv(providers.ProgramEnv, remotetest.Build(t, t.TempDir()))
	fake := &fakeOpenAI{}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	cfg, token := writeServeConfig(t, "")
	if err := os.WriteFile(filepath.Join(filepath.Dir(cfg), "policy.yaml"), []byte(validatorServePolicy(srv.URL+"/v1")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(cfg), "groundRules.md"), []byte("Notes may be written.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, cfg)
	cs := connectHTTP(t, s.url, token)
	r, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "write_note", Arguments: map[string]any{"id": 7}})
	if err != nil {
		t.Fatal(err)
	}
	if r.IsError || fake.requests.Load() == 0 {
		t.Fatalf("write_note = %+v with %d model requests; want it allowed by the model's verdict", r.Content, fake.requests.Load())
	}

	children := childrenOf(t, s.cmd.Process.Pid)
	if len(children) != 2 {
		// The notes upstream and the provider program.
		t.Fatalf("the gateway runs %d processes (%v); want the upstream and the provider program", len(children), children)
	}
	var provider int
	for _, pid := range children {
		if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); filepath.Base(exe) == "portcullis-provider" {
			provider = pid
		}
	}
	if provider == 0 {
		t.Fatalf("none of the gateway's processes %v is portcullis-provider", children)
	}
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); alive(provider); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("portcullis-provider (pid %d) still runs a minute after its gateway was killed", provider)
		}
	}
}

// childrenOf lists the processes whose parent is pid.
func childrenOf(t *testing.T, pid int) []int {
	t.Helper()
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, task.Name()))
		if err != nil {
			continue // the thread has exited
		}
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				pids = append(pids, n)
			}
		}
	}
	return pids
}

// alive reports whether pid runs: not gone, and not a zombie waiting to
// be reaped.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name's closing parenthesis.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// TestValidatorProgramMissing: with a model validator configured and no
// provider program to be found, every command that gates calls refuses
// to start, saying what to install.
func TestValidatorProgramMissing(t *testing.T) {
	t.Setenv(providers.ProgramEnv, "")
	t.Setenv("PATH", t.TempDir())
	t.Setenv("PORTCULLIS_TEST_PROVIDER_KEY", "sk-ant-api03-test")
	cfg, _ := writeServeConfig(t, "")
	dir := filepath.Dir(cfg)
	pol := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(pol, []byte(strings.Replace(servePolicy, "approvals:", `validator:
  provider: anthropic
  model: claude-haiku-4-5
  apiKeyEnv: PORTCULLIS_TEST_PROVIDER_KEY
  rules: ./groundRules.md
approvals:`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "groundRules.md"), []byte("Notes may be written.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
	}{
		{"serve", "", []string{"serve", "--config", cfg, "--listen", "127.0.0.1:0"}},
		{"mcp", "", []string{"mcp", "--policy", pol, "--state", filepath.Join(dir, "mcp-state"), "--", os.Args[0], "-test.run=^$"}},
		{"hook", claudeEvent(t, "Bash", map[string]any{"command": "ls"}), []string{"hook", "claude-code", "--policy", pol, "--state", filepath.Join(dir, "hook-state")}},
		{"decide", `{"tool":"write_note"}`, []string{"decide", "--policy", pol}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tc.stdin, tc.args...)
			out := stdout + stderr
			for _, want := range []string{
				"portcullis-provider is not installed",
				"go install github.com/portcullis/portcullis/cmd/portcullis-provider@latest",
				"go install ./cmd/portcullis-provider",
			} {
				if !strings.Contains(out, want) {
					t.Errorf("%s without the provider program: exit %d, output %q; want it to say %q", tc.name, code, out, want)
				}
			}
			if code == 0 {
				t.Errorf("%s without the provider program: exit 0; want it to refuse", tc.name)
			}
		})
	}
}

// TestProviderProgramIsProtected: the provider program answers for the
// validator, so an agent's command that would replace it is blocked, as
// one that touches Portcullis's own binary is.
func TestProviderProgramIsProtected(t *testing.T) {
	prog := filepath.Join(t.TempDir(), "portcullis-provider")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(providers.ProgramEnv, prog)
	t.Setenv("PORTCULLIS_POLICY", "")
	in := `{"tool":"Bash","args":{"command":"cp /tmp/evil ` + prog + `"}}` + "\n" +
		`{"tool":"Bash","args":{"command":"cp /tmp/evil ` + prog + `.txt"}}`
	code, stdout, stderr := runCLI(t, in, "decide")
	if code != 0 {
		t.Fatalf("decide exit %d: %s", code, stderr)
	}
	ds := decisions(t, stdout)
	if len(ds) != 2 || ds[0].Code != "BLOCKED_COMMAND" || ds[1].Code == "BLOCKED_COMMAND" {
		t.Fatalf("decide(cp over the provider program, cp beside it) = %+v; want the first blocked, the second not", ds)
	}
}

// Found in PATH through a link, the program is protected where the link
// leads too, and so is where a program would be found first next time (an
// earlier PATH directory): an agent that put one there would answer for
// the validator after the next start.
func TestProviderProgramLookupIsProtected(t *testing.T) {
	earlier, linked, real := t.TempDir(), t.TempDir(), t.TempDir()
	target := filepath.Join(real, "provider-build")
	if err := os.WriteFile(target, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(linked, "portcullis-provider")); err != nil {
		t.Fatal(err)
	}
	t.Setenv(providers.ProgramEnv, "")
	t.Setenv("PATH", earlier+string(os.PathListSeparator)+linked+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("PORTCULLIS_POLICY", "")
	var in strings.Builder
	for _, p := range []string{target, filepath.Join(earlier, "portcullis-provider"), filepath.Join(linked, "portcullis-provider"), filepath.Join(real, "notes.txt")} {
		in.WriteString(`{"tool":"Bash","args":{"command":"cp /tmp/evil ` + p + `"}}` + "\n")
	}
	code, stdout, stderr := runCLI(t, in.String(), "decide")
	if code != 0 {
		t.Fatalf("decide exit %d: %s", code, stderr)
	}
	ds := decisions(t, stdout)
	if len(ds) != 4 {
		t.Fatalf("decide gave %d decisions; want 4", len(ds))
	}
	for i, want := range []bool{true, true, true, false} {
		if got := ds[i].Code == "BLOCKED_COMMAND"; got != want {
			t.Errorf("decision %d: code %q; want blocked: %v", i, ds[i].Code, want)
		}
	}
}
