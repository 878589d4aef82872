package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/policy"
	"github.com/portcullis/portcullis/sqlite"
)

// refusalPolicy is the policy of the refusal tests, its tool names
// prefixed as the client sees them: move_file is denied (and shown, with
// showDenied), create_directory goes to a validator that always fails,
// writes and edits wait two seconds for a person.
func refusalPolicy(fs, ev string) string {
	return fmt.Sprintf(`version: 1
tools:
  %[1]sread_text_file:   {endpoint: READ}
  %[1]slist_allowed_directories: {endpoint: READ}
  %[1]swrite_file:       {endpoint: UPDATE, pathArg: path}
  %[1]sedit_file:        {endpoint: UPDATE, pathArg: path}
  %[1]screate_directory: {endpoint: CREATE, risk: external-write}
  %[1]smove_file:        {endpoint: DELETE, defaultLevel: DENY}
  %[2]secho:             {endpoint: READ}
  %[2]sget-env:          {endpoint: READ, defaultLevel: DENY}
  %[2]sget-structured-content: {endpoint: UPDATE}
validator:
  provider: command
  command: ["false"]
  rules: rules.md
  timeout: 5s
approvals:
  wait: 2s
`, fs, ev)
}

// refusalState is the state directory, policy and store of a refusal test.
type refusalState struct {
	dir, state, policy, work string
	st                       portcullis.Store
	g                        *gate.Gate
	// stderr keeps what the processes the tests ran wrote to stderr
	// (the client's, the gateway's and the upstream's).
	stderr lockedBuffer
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newRefusalState(t *testing.T, fs, ev string) *refusalState {
	t.Helper()
	return newE2EState(t, refusalPolicy(fs, ev))
}

// newE2EState makes a state directory, a work directory with a.txt, and
// the policy; the store is opened (and migrated) first.
func newE2EState(t *testing.T, policyText string) *refusalState {
	t.Helper()
	dir := t.TempDir()
	r := &refusalState{dir: dir, state: filepath.Join(dir, "state"), policy: filepath.Join(dir, "policy.yaml"), work: filepath.Join(dir, "work")}
	for _, d := range []string{r.state, r.work} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for name, body := range map[string]string{r.policy: policyText, filepath.Join(dir, "rules.md"): "Allow nothing.\n", filepath.Join(r.work, "a.txt"): "hello from a"} {
		if err := os.WriteFile(name, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The test opens the store first, so the gateway finds it migrated.
	st, err := sqlite.Open(context.Background(), filepath.Join(r.state, "portcullis.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	pol, _, err := policy.Load(r.policy)
	if err != nil {
		t.Fatal(err)
	}
	g, err := gate.New(pol, gate.WithStore(st))
	if err != nil {
		t.Fatal(err)
	}
	r.st, r.g = st, g
	return r
}

// runTSClient runs e2e/client.mjs with the steps against target (a command
// or a URL) and returns the JSON lines it printed. While it runs, every
// approval request for a tool in deny is denied by a person with the
// reason "not this file"; the others are left unanswered.
func runTSClient(t *testing.T, e2e string, r *refusalState, steps string, env []string, deny map[string]bool, target ...string) []map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{filepath.Join(e2e, "client.mjs"), steps, "--"}, target...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = io.MultiWriter(os.Stderr, &r.stderr)
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	for waiting := true; waiting; {
		select {
		case err = <-done:
			waiting = false
		case <-time.After(50 * time.Millisecond):
			as, aerr := r.st.Approvals(ctx, portcullis.ApprovalFilter{Status: portcullis.ApprovalPending})
			if aerr != nil {
				t.Error(aerr)
				continue
			}
			for _, a := range as {
				if deny[a.Tool] {
					if _, derr := r.g.DenyApproval(ctx, a.ID, "e2e-person", "not this file"); derr != nil {
						t.Error(derr)
					}
				}
			}
		}
	}
	if err != nil {
		t.Fatalf("TypeScript client: %v\n%s", err, out.String())
	}
	var lines []map[string]any
	sc := bufio.NewScanner(&out)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("client output %q: %v", sc.Text(), err)
		}
		lines = append(lines, m)
	}
	return lines
}

// stepResults are the lines of the steps' results (a list step prints
// tools; a call step prints its result or an error).
func stepResults(lines []map[string]any) []map[string]any {
	var out []map[string]any
	for _, l := range lines {
		if l["sampled"] == nil && l["elicited"] == nil {
			out = append(out, l)
		}
	}
	return out
}

// wantRefusal checks that a TypeScript client received a refusal as a
// valid result: no exception, isError, the reason in the text, no
// structuredContent, and the decision in _meta["portcullis/decision"].
func wantRefusal(t *testing.T, what string, line map[string]any, outcome portcullis.Outcome, says string) {
	t.Helper()
	raw, _ := json.Marshal(line)
	if line["error"] != nil {
		t.Fatalf("%s: the client threw instead of showing the refusal: %s", what, raw)
	}
	if line["isError"] != true || line["structuredContent"] != nil {
		t.Fatalf("%s: %s; want isError and no structuredContent", what, raw)
	}
	var text strings.Builder
	content, _ := line["content"].([]any)
	for _, c := range content {
		if m, ok := c.(map[string]any); ok && m["type"] == "text" {
			text.WriteString(fmt.Sprint(m["text"]))
		}
	}
	if !strings.Contains(text.String(), says) {
		t.Fatalf("%s: text %q does not say %q", what, text.String(), says)
	}
	meta, _ := line["_meta"].(map[string]any)
	d, _ := meta["portcullis/decision"].(map[string]any)
	if d == nil || d["outcome"] != string(outcome) {
		t.Fatalf("%s: _meta = %v; want the decision with outcome %s", what, line["_meta"], outcome)
	}
}

func TestE2ERefusalsReachTheTypeScriptClientThroughTheWrapper(t *testing.T) {
	e2e := e2eDir(t)
	r := newRefusalState(t, "", "")
	fsCmd := []string{"node", filepath.Join(e2e, "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"), r.work}
	wrap := func(agent string, server []string) []string {
		raw, err := json.Marshal(append([]string{"mcp", "--policy", r.policy, "--state", r.state, "--agent", agent, "--show-denied", "--"}, server...))
		if err != nil {
			t.Fatal(err)
		}
		return []string{"env", mainArgsEnv + "=" + string(raw), os.Args[0], "-test.run=^$"}
	}
	file := func(n string) string { return filepath.Join(r.work, n) }
	steps, _ := json.Marshal([]map[string]any{
		{"list": true},
		{"call": "move_file", "args": map[string]any{"source": file("a.txt"), "destination": file("c.txt")}},
		{"call": "create_directory", "args": map[string]any{"path": file("d")}},
		{"call": "write_file", "args": map[string]any{"path": file("b.txt"), "content": "never written"}},
		{"call": "edit_file", "args": map[string]any{"path": file("a.txt"), "edits": []any{map[string]any{"oldText": "hello", "newText": "bye"}}}},
	})
	lines := stepResults(runTSClient(t, e2e, r, string(steps), nil, map[string]bool{"write_file": true}, wrap("fs-bot", fsCmd)...))
	if len(lines) != 5 {
		t.Fatalf("client printed %d results; want 5: %v", len(lines), lines)
	}
	wantRefusal(t, "policy deny", lines[1], portcullis.OutcomeDeny, "denied")
	wantRefusal(t, "validator", lines[2], portcullis.OutcomeDeny, "validator")
	wantRefusal(t, "person deny", lines[3], portcullis.OutcomeDeny, "not this file")
	wantRefusal(t, "unanswered", lines[4], portcullis.OutcomeConfirm, "No person answered")
	for _, f := range []string{"b.txt", "c.txt", "d"} {
		if _, err := os.Stat(file(f)); err == nil {
			t.Fatalf("%s exists after a refused call", f)
		}
	}
	if b, err := os.ReadFile(file("a.txt")); err != nil || string(b) != "hello from a" {
		t.Fatalf("a.txt = %q, %v after a refused edit", b, err)
	}

	// A blocked agent (the danger zone), and server-everything's tool with
	// an outputSchema waiting in vain.
	if _, err := r.g.BlockAgent(context.Background(), "fs-bot", "e2e: stop", "d-e2e"); err != nil {
		t.Fatal(err)
	}
	steps, _ = json.Marshal([]map[string]any{{"list": true}, {"call": "read_text_file", "args": map[string]any{"path": file("a.txt")}}})
	lines = stepResults(runTSClient(t, e2e, r, string(steps), nil, nil, wrap("fs-bot", fsCmd)...))
	wantRefusal(t, "danger zone", lines[1], portcullis.OutcomeStop, "blocked")

	evCmd := []string{"node", filepath.Join(e2e, "node_modules/@modelcontextprotocol/server-everything/dist/index.js")}
	steps, _ = json.Marshal([]map[string]any{{"list": true}, {"call": "get-env"}, {"call": "get-structured-content", "args": map[string]any{"location": "Chicago"}}})
	lines = stepResults(runTSClient(t, e2e, r, string(steps), nil, nil, wrap("ev-bot", evCmd)...))
	wantRefusal(t, "policy deny without outputSchema", lines[1], portcullis.OutcomeDeny, "denied")
	wantRefusal(t, "unanswered with outputSchema", lines[2], portcullis.OutcomeConfirm, "No person answered")
}

func TestE2ERefusalsReachTheTypeScriptClientThroughServe(t *testing.T) {
	e2e := e2eDir(t)
	r := newRefusalState(t, "fs__", "ev__")
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	token := hex.EncodeToString(b[:])
	if err := os.WriteFile(filepath.Join(r.dir, "bot.token"), []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fsCmd, _ := json.Marshal([]string{"node", filepath.Join(e2e, "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"), r.work})
	evCmd, _ := json.Marshal([]string{"node", filepath.Join(e2e, "node_modules/@modelcontextprotocol/server-everything/dist/index.js")})
	cfg := filepath.Join(r.dir, "portcullis.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`policy: policy.yaml
state: state
showDenied: true
agents:
  - name: bot
    tokenFile: bot.token
upstreams:
  - name: fs
    command: %s
  - name: ev
    command: %s
`, fsCmd, evCmd)), 0o600); err != nil {
		t.Fatal(err)
	}
	sp := startServe(t, cfg)
	file := func(n string) string { return filepath.Join(r.work, n) }
	steps, _ := json.Marshal([]map[string]any{
		{"list": true},
		{"call": "fs__move_file", "args": map[string]any{"source": file("a.txt"), "destination": file("c.txt")}},
		{"call": "fs__create_directory", "args": map[string]any{"path": file("d")}},
		{"call": "fs__write_file", "args": map[string]any{"path": file("b.txt"), "content": "never written"}},
		{"call": "ev__get-structured-content", "args": map[string]any{"location": "Chicago"}},
		{"call": "ev__get-env"},
	})
	lines := stepResults(runTSClient(t, e2e, r, string(steps), []string{"PORTCULLIS_E2E_TOKEN=" + token}, map[string]bool{"fs__write_file": true}, sp.url+"/mcp"))
	if len(lines) != 6 {
		t.Fatalf("client printed %d results; want 6: %v", len(lines), lines)
	}
	wantRefusal(t, "policy deny", lines[1], portcullis.OutcomeDeny, "denied")
	wantRefusal(t, "validator", lines[2], portcullis.OutcomeDeny, "validator")
	wantRefusal(t, "person deny", lines[3], portcullis.OutcomeDeny, "not this file")
	wantRefusal(t, "unanswered", lines[4], portcullis.OutcomeConfirm, "No person answered")
	wantRefusal(t, "policy deny without outputSchema", lines[5], portcullis.OutcomeDeny, "denied")

	// The Go SDK's client, after listing the tools, reads the same.
	cs := connectHTTP(t, sp.url, token)
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fs__move_file", Arguments: map[string]any{"source": file("a.txt"), "destination": file("c.txt")}})
	if err != nil {
		t.Fatalf("Go client: %v", err)
	}
	raw, _ := json.Marshal(res)
	var line map[string]any
	if err := json.Unmarshal(raw, &line); err != nil {
		t.Fatal(err)
	}
	wantRefusal(t, "Go client, policy deny", line, portcullis.OutcomeDeny, "denied")
	if _, err := os.Stat(file("c.txt")); err == nil {
		t.Fatal("c.txt exists after a refused move")
	}
}
