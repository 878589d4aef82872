package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/internal/noticetest"
	"github.com/portcullis/portcullis/policy"
	"github.com/portcullis/portcullis/sqlite"
)

// The end-to-end tests run `portcullis mcp` (this test binary, re-executed
// as the command) in front of real MCP servers from npm, driven by the Go
// SDK's client and the TypeScript SDK's. They need Node and `npm ci` in
// e2e/; they run when PORTCULLIS_TEST_E2E=1 (CI sets it and fails if they
// skip).
const e2eEnv = "PORTCULLIS_TEST_E2E"

func e2eDir(t *testing.T) string {
	t.Helper()
	if os.Getenv(e2eEnv) != "1" {
		t.Skipf("%s is not 1: the end-to-end tests need Node and `npm ci --prefix e2e`", e2eEnv)
	}
	dir, err := filepath.Abs("../../e2e")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-filesystem")); err != nil {
		t.Fatalf("%s=1 but the npm packages are missing: run `npm ci --prefix e2e` (%v)", e2eEnv, err)
	}
	return dir
}

// wrapperCmd is `portcullis mcp ARGS` as a process.
func wrapperCmd(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	raw, err := json.Marshal(append([]string{"mcp"}, args...))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), mainArgsEnv+"="+string(raw))
	return cmd
}

func openE2EGate(t *testing.T, state string, n portcullis.Notifier) (*gate.Gate, portcullis.Store) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(state, "portcullis.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	pol, _, err := policy.Load("testdata/e2e/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	opts := []gate.Option{gate.WithStore(st)}
	if n != nil {
		opts = append(opts, gate.WithNotifier(n))
	}
	g, err := gate.New(pol, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return g, st
}

func resultText(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func TestE2EFilesystemThroughTheWrapper(t *testing.T) {
	e2e := e2eDir(t)
	work := t.TempDir()
	state := filepath.Join(t.TempDir(), "state")
	if err := os.WriteFile(filepath.Join(work, "a.txt"), []byte("hello from a"), 0o600); err != nil {
		t.Fatal(err)
	}
	server := []string{"node", filepath.Join(e2e, "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"), work}
	args := append([]string{"--policy", "testdata/e2e/policy.yaml", "--state", state, "--agent", "e2e-bot", "--"}, server...)
	ctx := context.Background()
	var responses bytes.Buffer // everything the client was sent, to look for codes
	connect := func() *mcp.ClientSession {
		t.Helper()
		cmd := wrapperCmd(t, args...)
		cmd.Stderr = os.Stderr
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-go", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	callTool := func(cs *mcp.ClientSession, name string, a map[string]any) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: a})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		raw, _ := json.Marshal(res)
		responses.Write(raw)
		return res
	}

	cs := connect()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	listed := strings.Join(names, ",")
	if strings.Contains(listed, "move_file") || !strings.Contains(listed, "read_text_file") || !strings.Contains(listed, "write_file") {
		t.Fatalf("tools/list = %s; want move_file (DENY) hidden, read_text_file and write_file listed", listed)
	}

	// Reads pass.
	res := callTool(cs, "read_text_file", map[string]any{"path": filepath.Join(work, "a.txt")})
	if res.IsError || !strings.Contains(resultText(res), "hello from a") {
		t.Fatalf("read_text_file = %q (isError %v)", resultText(res), res.IsError)
	}

	// A write is held until a person approves it, then passes.
	catcher := &noticetest.Recorder{}
	g, st := openE2EGate(t, state, catcher)
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "write_file", Arguments: map[string]any{"path": filepath.Join(work, "b.txt"), "content": "written after approval"}})
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	var pending portcullis.Approval
	deadline := time.Now().Add(30 * time.Second)
	for pending.ID == "" {
		as, err := st.Approvals(ctx, portcullis.ApprovalFilter{Status: portcullis.ApprovalPending})
		if err != nil {
			t.Fatal(err)
		}
		if len(as) > 0 {
			pending = as[0]
		} else if time.Now().After(deadline) {
			t.Fatal("the write was not held for approval")
		} else {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if _, err := os.Stat(filepath.Join(work, "b.txt")); err == nil {
		t.Fatal("the write reached the filesystem before it was approved")
	}
	if _, err := g.Approve(ctx, pending.ID, "e2e-person", false); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r == nil || r.IsError {
			t.Fatalf("approved write failed: %+v", r)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the approved write did not complete")
	}
	if b, err := os.ReadFile(filepath.Join(work, "b.txt")); err != nil || string(b) != "written after approval" {
		t.Fatalf("b.txt = %q, %v", b, err)
	}

	// A denied move never reaches the server.
	res = callTool(cs, "move_file", map[string]any{"source": filepath.Join(work, "a.txt"), "destination": filepath.Join(work, "c.txt")})
	if !res.IsError {
		t.Fatalf("move_file was not denied: %q", resultText(res))
	}
	if _, err := os.Stat(filepath.Join(work, "a.txt")); err != nil {
		t.Fatal("a.txt was moved by a denied call")
	}
	if _, err := os.Stat(filepath.Join(work, "c.txt")); err == nil {
		t.Fatal("c.txt exists after a denied move")
	}

	// The tools were pinned.
	pins, err := st.ToolPins(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pinned := map[string]bool{}
	for _, p := range pins {
		pinned[p.Upstream+"/"+p.Tool] = true
	}
	if !pinned["server-filesystem/read_text_file"] || !pinned["server-filesystem/move_file"] {
		t.Fatalf("pins = %v; want every tool of server-filesystem pinned", pinned)
	}
	cs.Close()

	// A blocked agent stays blocked across a restart of the wrapper, and
	// never sees its code.
	if _, err := g.BlockAgent(ctx, "e2e-bot", "e2e: stop", "d-e2e"); err != nil {
		t.Fatal(err)
	}
	cs = connect()
	defer cs.Close()
	res = callTool(cs, "read_text_file", map[string]any{"path": filepath.Join(work, "a.txt")})
	if !res.IsError || !strings.Contains(resultText(res), "blocked") {
		t.Fatalf("a blocked agent's read after restart = %q (isError %v)", resultText(res), res.IsError)
	}
	codes := catcher.Codes()
	if len(codes) != 1 {
		t.Fatalf("the person was shown %d codes; want 1", len(codes))
	}
	if strings.Contains(responses.String(), codes[0]) {
		t.Fatal("a verification code reached the MCP client")
	}
}

func TestE2EEverythingWithTheTypeScriptClient(t *testing.T) {
	e2e := e2eDir(t)
	state := filepath.Join(t.TempDir(), "state")
	raw, err := json.Marshal([]string{"mcp", "--policy", "testdata/e2e/policy.yaml", "--state", state, "--agent", "ts-bot", "--",
		"node", filepath.Join(e2e, "node_modules/@modelcontextprotocol/server-everything/dist/index.js")})
	if err != nil {
		t.Fatal(err)
	}
	steps := `[{"list":true},{"call":"echo","args":{"message":"hello through the gate"}},{"call":"get-env"},{"call":"get-sum","args":{"a":1,"b":2}}]`
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(e2e, "client.mjs"), steps, "--", os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), mainArgsEnv+"="+string(raw))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("TypeScript client: %v\n%s", err, out)
	}
	var lines []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("client output %q: %v", sc.Text(), err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 4 {
		t.Fatalf("client printed %d results; want 4:\n%s", len(lines), out)
	}
	listed, _ := json.Marshal(lines[0]["tools"])
	if strings.Contains(string(listed), "get-env") || !strings.Contains(string(listed), `"echo"`) {
		t.Fatalf("tools = %s; want get-env (DENY) hidden and echo listed", listed)
	}
	echo, _ := json.Marshal(lines[1])
	if lines[1]["isError"] == true || !strings.Contains(string(echo), "hello through the gate") {
		t.Fatalf("echo = %s", echo)
	}
	if lines[2]["isError"] != true {
		t.Fatalf("get-env was not denied: %v", lines[2])
	}
	meta, _ := lines[2]["_meta"].(map[string]any)
	sc2, _ := meta["portcullis/decision"].(map[string]any)
	if sc2["outcome"] != "deny" || sc2["permissionLevel"] != "DENY" || lines[2]["structuredContent"] != nil {
		t.Fatalf("get-env _meta = %v, structuredContent = %v; want the deny decision in _meta only", lines[2]["_meta"], lines[2]["structuredContent"])
	}
	// get-sum is unclassified by the policy and annotated by the server:
	// it is decided from its annotations, never auto-approved blindly.
	sum, _ := json.Marshal(lines[3])
	if lines[3]["error"] != nil {
		t.Fatalf("get-sum failed in the client: %s", sum)
	}
}
