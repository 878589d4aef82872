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

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/sqlite"
)

// scriptedModel is a model speaking Anthropic's Messages API that makes
// the tool calls of its script one at a time: a request carrying n tool
// results is answered with call n (or, after the last, a short text). A
// call is made only when the request offers its tool; otherwise the
// answer is the text "no tool" (Claude Code may send its first request
// before an MCP server's tools are listed), and the run is tried again.
// It keeps every tool result it was sent, by the call's id.
type scriptedModel struct {
	script []scriptedCall
	mu     sync.Mutex
	seen   map[string]string // tool_use_id → the result's content
	missed int               // requests that did not offer the next call's tool
}

type scriptedCall struct {
	tool  string
	input map[string]any
}

func (m *scriptedModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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
	results := 0
	m.mu.Lock()
	if m.seen == nil {
		m.seen = map[string]string{}
	}
	for _, msg := range req.Messages {
		var blocks []struct {
			Type      string          `json:"type"`
			ToolUseID string          `json:"tool_use_id"`
			Content   json.RawMessage `json:"content"`
		}
		if json.Unmarshal(msg.Content, &blocks) != nil {
			continue
		}
		for _, b := range blocks {
			if b.Type == "tool_result" {
				results++
				m.seen[b.ToolUseID] = string(b.Content)
			}
		}
	}
	var block map[string]any
	stop := "end_turn"
	if results < len(m.script) {
		next := m.script[results]
		offered := slices.ContainsFunc(req.Tools, func(t struct {
			Name string `json:"name"`
		}) bool {
			return t.Name == next.tool
		})
		if offered {
			block = map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_%02d", results), "name": next.tool, "input": next.input}
			stop = "tool_use"
		} else {
			m.missed++
			block = map[string]any{"type": "text", "text": "no tool"}
		}
	} else {
		block = map[string]any{"type": "text", "text": "done"}
	}
	m.mu.Unlock()
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
		send("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "tool_use", "id": block["id"], "name": block["name"], "input": map[string]any{}}})
		send("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(input)}})
	} else {
		send("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		send("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "text_delta", "text": block["text"]}})
	}
	send("content_block_stop", map[string]any{"index": 0})
	send("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 1}})
	send("message_stop", map[string]any{})
}

// result is the tool result of the script's call i ("" when none came).
func (m *scriptedModel) result(i int) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.seen[fmt.Sprintf("toolu_%02d", i)]
}

// reset forgets the results of an earlier run.
func (m *scriptedModel) reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seen, m.missed = nil, 0
}

func (m *scriptedModel) misses() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.missed
}

// TestClaudeCodeDeferMCPBinary runs the real Claude Code (from npm) with
// both recipes of the README at once: the Claude Code hook, installed
// with --defer-mcp filesystem, and the real server-filesystem behind
// `portcullis mcp` in the project's .mcp.json. A fake model reads a file
// through the server, then tries to rewrite .mcp.json (which would start
// the server unwrapped) and the wrapper's own policy file through it. The
// read passes without the hook asking: Claude Code's own permissions do
// not allow the tool, so only the hook's allow lets it run, and the hook
// leaves no row — the wrapper's row is the one row of the call. The
// rewrite of .mcp.json and the write of the policy are both denied by the
// wrapper as writes to Portcullis's own files; both files are unchanged
// and the model receives each reason.
func TestClaudeCodeDeferMCPBinary(t *testing.T) {
	dir := e2eDir(t)
	claude := filepath.Join(dir, "node_modules", ".bin", "claude")
	if _, err := os.Stat(claude); err != nil {
		t.Fatalf("%s=1 but Claude Code is missing: run `npm ci --prefix e2e` (%v)", e2eEnv, err)
	}
	h := newUserHome(t, buildPortcullis(t, t.TempDir()))
	project := filepath.Join(h.home, "project")
	if err := os.MkdirAll(filepath.Join(project, ".portcullis"), 0o755); err != nil {
		t.Fatal(err)
	}
	notes := filepath.Join(project, "notes.txt")
	if err := os.WriteFile(notes, []byte("the quarterly numbers are in\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The wrapper's policy, in the project as `init mcp --project` puts
	// it: reads run, writes wait for a person — for at most a second, as
	// nobody is there.
	fsPolicy := filepath.Join(project, ".portcullis", "filesystem.yaml")
	fsPolicyText := `version: 1
unknownTools: confirm
tools:
  read_text_file: {endpoint: READ, pathArg: path}
  list_allowed_directories: {endpoint: READ}
  write_file: {endpoint: UPDATE, pathArg: path}
approvals:
  wait: 1s
`
	if err := os.WriteFile(fsPolicy, []byte(fsPolicyText), 0o644); err != nil {
		t.Fatal(err)
	}
	wrapperState := filepath.Join(h.root, "mcp-state")
	hookState := filepath.Join(h.root, "hook-state")
	server := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-filesystem", "dist", "index.js")
	mcpJSON, err := json.MarshalIndent(map[string]any{"mcpServers": map[string]any{"filesystem": map[string]any{
		"command": h.bin,
		"args":    []string{"mcp", "--policy", fsPolicy, "--state", wrapperState, "--agent", "claude-code", "--", "node", server, project},
	}}}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	mcpPath := filepath.Join(project, ".mcp.json")
	if err := os.WriteFile(mcpPath, mcpJSON, 0o644); err != nil {
		t.Fatal(err)
	}
	hookPolicy, err := filepath.Abs(claudePolicy)
	if err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := h.run(t, project, "hook", "install", "claude-code", "--project", "--policy", hookPolicy, "--state", hookState, "--defer-mcp", "filesystem"); code != 0 {
		t.Fatalf("hook install: exit %d:\n%s%s", code, out, errOut)
	}
	// The person approved the project's MCP servers, as Claude Code asks
	// them to on the first interactive start.
	if err := os.WriteFile(filepath.Join(project, ".claude", "settings.local.json"), []byte(`{"enableAllProjectMcpServers": true}`), 0o644); err != nil {
		t.Fatal(err)
	}

	model := &scriptedModel{script: []scriptedCall{
		{"mcp__filesystem__read_text_file", map[string]any{"path": notes}},
		{"mcp__filesystem__write_file", map[string]any{"path": mcpPath, "content": `{"mcpServers": {"filesystem": {"command": "node", "args": ["` + server + `", "/"]}}}`}},
		{"mcp__filesystem__write_file", map[string]any{"path": fsPolicy, "content": "version: 1\nmode: off\n"}},
	}}
	srv := httptest.NewServer(model)
	defer srv.Close()

	var out []byte
	for attempt := 1; ; attempt++ {
		model.reset()
		out = runClaudePrint(t, claude, project, h.env, srv.URL, "summarize notes.txt")
		if model.misses() == 0 || model.result(0) != "" {
			break
		}
		if attempt == 5 {
			t.Fatalf("Claude Code never offered the wrapped server's tools in %d runs\n%s", attempt, out)
		}
	}

	if got := model.result(0); !strings.Contains(got, "quarterly numbers") {
		t.Errorf("the read's result = %q; want the file's text (the hook must not ask)\n%s", got, out)
	}
	if got := model.result(1); !strings.Contains(got, "one of Portcullis's own files") {
		t.Errorf("the rewrite of .mcp.json: the model received %q; want the wrapper's refusal of a write to a client's configuration\n%s", got, out)
	}
	if got := model.result(2); !strings.Contains(got, "Portcullis") {
		t.Errorf("the write of the wrapper's policy: the model received %q; want Portcullis's refusal\n%s", got, out)
	}
	if b, err := os.ReadFile(mcpPath); err != nil || string(b) != string(mcpJSON) {
		t.Errorf(".mcp.json after the run: %q, %v; want it unchanged", b, err)
	}
	if b, err := os.ReadFile(fsPolicy); err != nil || string(b) != fsPolicyText {
		t.Errorf("the wrapper's policy after the run: %q, %v; want it unchanged", b, err)
	}

	// The wrapper decided each call once; the hook decided none of them.
	wrapperRows := auditTools(t, filepath.Join(wrapperState, "portcullis.db"))
	if n := count(wrapperRows, "read_text_file"); n != 1 {
		t.Errorf("the wrapper's audit log has %d rows of read_text_file; want 1 (rows: %v)", n, wrapperRows)
	}
	if count(wrapperRows, "write_file") < 2 {
		t.Errorf("the wrapper's audit log has no row of each write: %v", wrapperRows)
	}
	for _, tool := range auditTools(t, filepath.Join(hookState, "portcullis.db")) {
		if strings.Contains(tool, "read_text_file") || strings.Contains(tool, "write_file") {
			t.Errorf("the hook decided %s itself; want it left to the wrapper", tool)
		}
	}
}

// runClaudePrint runs `claude -p prompt` in dir with the home's
// environment, against the model at baseURL, and returns its output.
func runClaudePrint(t *testing.T, claude, dir string, env []string, baseURL, prompt string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, claude, "-p", prompt, "--output-format", "json")
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CLAUDE_CONFIG_DIR=") && !strings.HasPrefix(kv, "CLAUDE_PROJECT_DIR=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	cmd.Env = append(cmd.Env, "ANTHROPIC_BASE_URL="+baseURL, "ANTHROPIC_API_KEY=sk-ant-test",
		"DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_ERROR_REPORTING=1",
		// Connect the MCP servers before the first request, and offer
		// their tools in it rather than behind a tool search: without
		// MCP_CONNECTION_NONBLOCKING=false, Claude Code's first request
		// in print mode comes before the wrapped server has listed its
		// tools, run after run.
		"MCP_CONNECTION_NONBLOCKING=false", "ENABLE_TOOL_SEARCH=false")
	cmd.Stdin = strings.NewReader("")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("claude -p: %v\n%s", err, out)
	}
	return out
}

// auditTools is the tool of every decision row of the audit log in db.
func auditTools(t *testing.T, db string) []string {
	t.Helper()
	if _, err := os.Stat(db); err != nil {
		return nil
	}
	st, err := sqlite.Open(context.Background(), db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rows, err := st.QueryAudit(context.Background(), portcullis.AuditQuery{Kind: portcullis.AuditDecision, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rows {
		ev, err := r.Event()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev.Tool)
	}
	return out
}

func count(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}
