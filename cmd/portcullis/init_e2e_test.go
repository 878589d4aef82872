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
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/portcullis/portcullis/hostconfig"
	"github.com/portcullis/portcullis/policy"
)

// userHome is a temporary home for the built binary: HOME, its config and
// state directories, and a TMPDIR of its own, so that the binary (built
// beside the home, outside that TMPDIR) is one init accepts.
type userHome struct {
	root, home, bin string
	env             []string
}

func newUserHome(t *testing.T, bin string) userHome {
	t.Helper()
	root := t.TempDir()
	h := userHome{root: root, home: filepath.Join(root, "home")}
	tmp := filepath.Join(root, "tmp")
	for _, d := range []string{h.home, tmp, filepath.Join(root, "bin")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The binary lives in the home's own bin directory, as `go install`
	// would put it.
	h.bin = filepath.Join(root, "bin", "portcullis")
	if err := os.Link(bin, h.bin); err != nil {
		data, err := os.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(h.bin, data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	h.env = []string{"HOME=" + h.home, "TMPDIR=" + tmp, "XDG_CONFIG_HOME=", "XDG_STATE_HOME=", "CODEX_HOME=", "COPILOT_HOME=", "PORTCULLIS_POLICY=", "PORTCULLIS_STATE=", "PORTCULLIS_STORE="}
	return h
}

func (h userHome) run(t *testing.T, dir string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(h.bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), h.env...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	return code, out.String(), errb.String()
}

// TestInitDoctorBinary builds the binary once and runs init and doctor as
// a person would, in a temporary home: doctor on a protected Claude Code,
// an untrusted Codex hook, a hook command in the Go build cache and a
// policy that no longer exists; init's refusals; and, with the npm
// packages, init claude-code followed by a real Claude Code run and init
// mcp against the real server-filesystem.
func TestInitDoctorBinary(t *testing.T) {
	bin := buildPortcullis(t, t.TempDir())
	t.Run("doctor", func(t *testing.T) { doctorEndToEnd(t, bin) })
	t.Run("init refuses a binary that will not last", func(t *testing.T) { initRefusesTransient(t, bin) })
	t.Run("init keeps an edited policy", func(t *testing.T) { initKeepsEdits(t, bin) })
	t.Run("claude code", func(t *testing.T) { initClaudeCodeEndToEnd(t, bin) })
	t.Run("init mcp", func(t *testing.T) { initMCPEndToEnd(t, bin) })
}

func doctorEndToEnd(t *testing.T, bin string) {
	h := newUserHome(t, bin)
	// Nothing installed: nothing to protect.
	code, out, errOut := h.run(t, h.home, "doctor")
	if code != 0 || !strings.Contains(out, "no agent client found") {
		t.Errorf("doctor in an empty home: exit %d: %s%s", code, out, errOut)
	}

	// Protected: init claude-code ends with doctor's verdict.
	code, out, errOut = h.run(t, h.home, "init", "claude-code")
	policyPath := filepath.Join(h.home, ".config", "portcullis", "policy.yaml")
	if code != 0 || !strings.Contains(out, "wrote "+policyPath) || !strings.Contains(out, "claude-code ("+filepath.Join(h.home, ".claude", "settings.json")+"): protected") {
		t.Fatalf("init claude-code: exit %d:\n%s%s", code, out, errOut)
	}
	if _, _, err := policy.Load(policyPath); err != nil {
		t.Errorf("the starter policy does not load: %v", err)
	}
	if !strings.Contains(out, "answered: allow") {
		t.Errorf("init's doctor did not probe the hook:\n%s", out)
	}

	// Codex: installed and trusted, then the trust is lost.
	code, out, errOut = h.run(t, h.home, "init", "codex")
	if code != 0 || !strings.Contains(out, "Codex trusts the hook") {
		t.Fatalf("init codex: exit %d:\n%s%s", code, out, errOut)
	}
	config := filepath.Join(h.home, ".codex", "config.toml")
	if err := os.WriteFile(config, []byte("model = \"o3\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, _ = h.run(t, h.home, "doctor", "codex")
	if code != 1 || !strings.Contains(out, "NOT PROTECTED") || !strings.Contains(out, "does not trust the hook") || !strings.Contains(out, "fix: portcullis init codex") {
		t.Errorf("doctor with an untrusted Codex hook: exit %d:\n%s", code, out)
	}

	// A hook command in the Go build cache.
	cache := filepath.Join(h.root, "gocache")
	cached := filepath.Join(cache, "0a", "portcullis")
	if err := os.MkdirAll(filepath.Dir(cached), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(h.bin, cached); err != nil {
		t.Fatal(err)
	}
	settings := filepath.Join(h.home, ".claude", "settings.json")
	writeSettings := func(command string) {
		t.Helper()
		b, err := json.Marshal(map[string]any{"hooks": map[string]any{"PreToolUse": []any{map[string]any{"matcher": "*",
			"hooks": []any{map[string]any{"type": "command", "command": command, "timeout": 60}}}}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(settings, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeSettings(cached + " hook claude-code --policy " + policyPath)
	h.env = append(h.env, "GOCACHE="+cache)
	code, out, _ = h.run(t, h.home, "doctor", "claude-code")
	if code != 1 || !strings.Contains(out, "Go build cache") || !strings.Contains(out, "go install ./cmd/portcullis") {
		t.Errorf("doctor with a hook in the build cache: exit %d:\n%s", code, out)
	}

	// A policy file that no longer exists: the hook refuses every call.
	writeSettings(h.bin + " hook claude-code --policy " + filepath.Join(h.home, "gone.yaml"))
	code, out, _ = h.run(t, h.home, "doctor", "claude-code", "--json")
	var findings []hostconfig.Finding
	if err := json.Unmarshal([]byte(out), &findings); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, out)
	}
	if code != 1 || len(findings) != 1 || findings[0].Status != "refusing every call" || !strings.Contains(strings.Join(findings[0].Why, "\n"), "no longer exists") {
		t.Errorf("doctor with a missing policy: exit %d: %+v", code, findings)
	}

	// No --policy: the built-in default policy, and doctor says so.
	writeSettings(h.bin + " hook claude-code")
	code, out, _ = h.run(t, h.home, "doctor", "claude-code")
	if code != 0 || !strings.Contains(out, "the built-in default policy") {
		t.Errorf("doctor with the default policy: exit %d:\n%s", code, out)
	}
}

func initRefusesTransient(t *testing.T, bin string) {
	h := newUserHome(t, bin)
	// The binary as `go build` left it, in a temporary directory.
	h.env = append(h.env, "TMPDIR="+filepath.Dir(filepath.Dir(bin)))
	code, _, errOut := h.run(t, h.home, "init", "claude-code", "--binary", bin)
	if code != 2 || !strings.Contains(errOut, "temporary directory") || !strings.Contains(errOut, "go install ./cmd/portcullis") {
		t.Errorf("init with a binary in a temporary directory: exit %d: %s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(h.home, ".claude")); err == nil {
		t.Error("a refused init wrote Claude Code's settings")
	}
	code, _, errOut = h.run(t, h.home, "hook", "install", "claude-code", "--user", "--binary", bin, "--policy", filepath.Join(h.home))
	if code != 2 {
		t.Errorf("hook install with a binary in a temporary directory: exit %d: %s", code, errOut)
	}
}

func initKeepsEdits(t *testing.T, bin string) {
	h := newUserHome(t, bin)
	project := filepath.Join(h.home, "repo")
	if err := os.MkdirAll(project, 0o755); err != nil {
		t.Fatal(err)
	}
	// Gemini CLI runs a project's hooks only in a folder it trusts: until
	// the person trusts it, doctor (at the end of init) says not protected.
	if code, out, _ := h.run(t, project, "init", "gemini", "--project"); code != 1 || !strings.Contains(out, "Gemini CLI does not trust") {
		t.Fatalf("init gemini --project in a folder Gemini CLI does not trust: exit %d; want 1 and why:\n%s", code, out)
	}
	trusted, err := json.Marshal(map[string]string{project: "TRUST_FOLDER"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(h.home, ".gemini"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h.home, ".gemini", "trustedFolders.json"), trusted, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := h.run(t, project, "init", "gemini", "--project"); code != 0 {
		t.Fatalf("init gemini --project: exit %d:\n%s%s", code, out, errOut)
	}
	pol := filepath.Join(project, ".portcullis", "policy.yaml")
	b, err := os.ReadFile(pol)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := os.ReadFile(filepath.Join(project, ".gemini", "settings.json")); err != nil || !strings.Contains(string(s), "hook gemini --policy "+pol) {
		t.Fatalf("gemini settings: %s, %v", s, err)
	}
	edited := strings.Replace(string(b), "\nunknownTools: confirm\n", "\nunknownTools: deny\n", 1)
	if err := os.WriteFile(pol, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, _ := h.run(t, project, "init", "gemini", "--project")
	if code != 0 || !strings.Contains(out, "kept "+pol) || !strings.Contains(out, "-unknownTools: deny") || !strings.Contains(out, "--force") {
		t.Errorf("init again over an edited policy: exit %d:\n%s", code, out)
	}
	if got, _ := os.ReadFile(pol); string(got) != edited {
		t.Error("init overwrote an edited policy")
	}
	if code, out, _ := h.run(t, project, "init", "gemini", "--project", "--force"); code != 0 || !strings.Contains(out, "replaced "+pol) {
		t.Errorf("init --force: exit %d:\n%s", code, out)
	}
	if got, _ := os.ReadFile(pol + ".bak"); string(got) != edited {
		t.Error("init --force did not keep the edited policy as .bak")
	}
}

// fakeMessages is a model speaking Anthropic's Messages API (the stream
// Claude Code reads): a request that offers the Bash tool and carries no
// tool result is answered with one Bash call of command; every other
// request with a short text. It keeps the tool results it was sent.
type fakeMessages struct {
	command string
	mu      sync.Mutex
	results []string
}

func (f *fakeMessages) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/v1/messages") {
		http.NotFound(w, r)
		return
	}
	var req struct {
		Stream bool `json:"stream"`
		Tools  []struct {
			Name string `json:"name"`
		} `json:"tools"`
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	bash := false
	for _, tl := range req.Tools {
		bash = bash || tl.Name == "Bash"
	}
	answered := false
	for _, m := range req.Messages {
		var blocks []struct {
			Type    string          `json:"type"`
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(m.Content, &blocks) != nil {
			continue
		}
		for _, b := range blocks {
			if b.Type == "tool_result" {
				answered = true
				f.mu.Lock()
				f.results = append(f.results, string(b.Content))
				f.mu.Unlock()
			}
		}
	}
	var block map[string]any
	stop := "end_turn"
	if bash && !answered {
		block = map[string]any{"type": "tool_use", "id": "toolu_01", "name": "Bash", "input": map[string]any{"command": f.command, "description": "clean up"}}
		stop = "tool_use"
	} else {
		block = map[string]any{"type": "text", "text": "done"}
	}
	usage := map[string]any{"input_tokens": 1, "output_tokens": 1}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": "msg_01", "type": "message", "role": "assistant", "model": "claude-fake",
			"content": []any{block}, "stop_reason": stop, "stop_sequence": nil, "usage": usage})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(typ string, data map[string]any) {
		data["type"] = typ
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
	}
	send("message_start", map[string]any{"message": map[string]any{"id": "msg_01", "type": "message", "role": "assistant", "model": "claude-fake",
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": usage}})
	if block["type"] == "tool_use" {
		input, _ := json.Marshal(block["input"])
		send("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "tool_use", "id": block["id"], "name": "Bash", "input": map[string]any{}}})
		send("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(input)}})
	} else {
		send("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		send("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "text_delta", "text": "done"}})
	}
	send("content_block_stop", map[string]any{"index": 0})
	send("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 1}})
	send("message_stop", map[string]any{})
}

func (f *fakeMessages) toolResults() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.results...)
}

// initClaudeCodeEndToEnd: `portcullis init claude-code` into a temporary
// home, then the real Claude Code (from npm), driven by a fake model that
// asks to delete Portcullis's audit log: the hook init installed is in
// front — the command is refused, the file is still there, and the model
// receives Portcullis's reason.
func initClaudeCodeEndToEnd(t *testing.T, bin string) {
	dir := e2eDir(t)
	claude := filepath.Join(dir, "node_modules", ".bin", "claude")
	if _, err := os.Stat(claude); err != nil {
		t.Fatalf("%s=1 but Claude Code is missing: run `npm ci --prefix e2e` (%v)", e2eEnv, err)
	}
	h := newUserHome(t, bin)
	work := filepath.Join(h.home, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := h.run(t, h.home, "init", "claude-code"); code != 0 {
		t.Fatalf("init claude-code: exit %d:\n%s%s", code, out, errOut)
	}
	// init's doctor probed the hook, so the audit log exists. The model
	// asks to delete it: Portcullis's own state, which the hook denies
	// whatever the policy says (and which Claude Code's own checks let
	// through).
	db := filepath.Join(h.home, ".local", "state", "portcullis", "portcullis.db")
	if _, err := os.Stat(db); err != nil {
		t.Fatalf("no audit log after init: %v", err)
	}
	model := &fakeMessages{command: "rm -rf ~/.local/state/portcullis"}
	srv := httptest.NewServer(model)
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// Claude Code's own permissions allow Bash, so only the hook can stop
	// the command.
	cmd := exec.CommandContext(ctx, claude, "-p", "clean up my home directory", "--output-format", "json", "--allowedTools", "Bash")
	cmd.Dir = work
	// Claude Code reads the settings init wrote from $HOME/.claude, unless
	// CLAUDE_CONFIG_DIR names another directory (even an empty one).
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CLAUDE_CONFIG_DIR=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, h.env...)
	cmd.Env = append(cmd.Env, "ANTHROPIC_BASE_URL="+srv.URL, "ANTHROPIC_API_KEY=sk-ant-test",
		"DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_ERROR_REPORTING=1")
	cmd.Stdin = strings.NewReader("")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("claude -p: %v\n%s", err, out)
	}
	if _, err := os.Stat(db); err != nil {
		t.Fatalf("the audit log is gone after Claude Code ran the command: %v\n%s", err, out)
	}
	results := model.toolResults()
	if all := strings.Join(results, "\n"); !strings.Contains(all, "Portcullis:") {
		t.Errorf("the model received %q; want the hook's refusal with its reason\n%s", results, out)
	}
}

// initMCPEndToEnd: `portcullis init mcp` against the real
// server-filesystem: its tools are listed and classified into a policy
// that loads, with a comment on each; Cursor's configuration gets the
// server behind the wrapper; doctor finds Cursor protected (after init
// cursor installed its hooks).
func initMCPEndToEnd(t *testing.T, bin string) {
	dir := e2eDir(t)
	h := newUserHome(t, bin)
	served := filepath.Join(h.home, "served")
	if err := os.MkdirAll(served, 0o755); err != nil {
		t.Fatal(err)
	}
	server := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-filesystem", "dist", "index.js")
	// Cursor's own tools (its terminal, file reads and edits) are behind
	// Portcullis only through its hooks: init cursor installs them, and
	// doctor finds them answering.
	hooks := filepath.Join(h.home, ".cursor", "hooks.json")
	code, out, errOut := h.run(t, h.home, "init", "cursor")
	if code != 0 || !strings.Contains(out, "cursor ("+hooks+"): protected") {
		t.Fatalf("init cursor: exit %d:\n%s%s", code, out, errOut)
	}
	code, out, errOut = h.run(t, h.home, "init", "mcp", "--client", "cursor", "--name", "filesystem", "--", "node", server, served)
	if code != 0 {
		t.Fatalf("init mcp: exit %d:\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, "cursor: MCP wrapper installed in "+filepath.Join(h.home, ".cursor", "mcp.json")) {
		t.Errorf("init mcp --client cursor does not say it put the server behind the wrapper:\n%s", out)
	}
	polPath := filepath.Join(h.home, ".config", "portcullis", "filesystem.yaml")
	pol, _, err := policy.Load(polPath)
	if err != nil {
		t.Fatalf("the policy init mcp wrote does not load: %v", err)
	}
	text, err := os.ReadFile(polPath)
	if err != nil {
		t.Fatal(err)
	}
	endpoints := map[string]string{}
	for _, tp := range pol.Tools {
		endpoints[tp.Name] = string(tp.Endpoint)
	}
	for tool, want := range map[string]string{"read_text_file": "READ", "list_directory": "READ", "write_file": "UPDATE", "create_directory": "CREATE", "move_file": "UPDATE"} {
		tc, ok := endpoints[tool]
		if !ok || tc != want {
			t.Errorf("policy tool %s: endpoint %q (present %v); want %s", tool, tc, ok, want)
		}
		if !strings.Contains(string(text), "\n  "+tool+": {") {
			t.Errorf("the policy has no entry line for %s", tool)
		}
	}
	if !strings.Contains(string(text), "REVIEW") || !strings.Contains(string(text), `from its name ("read")`) {
		t.Errorf("the policy lacks the review note or the comments on where levels came from:\n%s", text)
	}
	var cfg struct {
		MCPServers map[string]struct {
			Command string   `json:"command"`
			Args    []string `json:"args"`
		} `json:"mcpServers"`
	}
	b, err := os.ReadFile(filepath.Join(h.home, ".cursor", "mcp.json"))
	if err != nil || json.Unmarshal(b, &cfg) != nil {
		t.Fatalf("cursor mcp.json: %s, %v", b, err)
	}
	fsrv := cfg.MCPServers["filesystem"]
	if fsrv.Command != h.bin || len(fsrv.Args) < 2 || fsrv.Args[0] != "mcp" || fsrv.Args[len(fsrv.Args)-1] != served {
		t.Errorf("cursor's filesystem server = %+v; want it behind %s mcp", fsrv, h.bin)
	}
	if !strings.Contains(out, "cursor ("+filepath.Join(h.home, ".cursor", "mcp.json")+"): protected") {
		t.Errorf("init mcp's doctor:\n%s", out)
	}
}
