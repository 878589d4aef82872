package hook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/hook"
	"github.com/portcullis/portcullis/memstore"
	"github.com/portcullis/portcullis/policy"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// The protected paths and home directory the golden tests' gate is built
// with: Portcullis's state directory stands at /var/lib/portcullis.
const (
	stateDir = "/var/lib/portcullis"
	homeDir  = "/home/dev"
)

// policyFor names the policy each host's golden cases run under: the
// Claude Code example, and a host-neutral one for the others.
var policyFor = map[string]string{
	"claude-code": "../examples/claude-code/policy.yaml",
	"codex":       "testdata/policy.yaml",
	"gemini":      "testdata/policy.yaml",
	"cursor":      "testdata/policy.yaml",
	"copilot":     "testdata/policy.yaml",
	"opencode":    "testdata/policy.yaml",
}

type fixture struct {
	g   *gate.Gate
	st  *memstore.Store
	pol *portcullis.Policy
}

// newFixture builds a real gate on a memory store, with a deterministic
// source of randomness so that approval IDs in the answers are stable.
func newFixture(t testing.TB, policyPath string, opts ...gate.Option) *fixture {
	t.Helper()
	pol, _, err := policy.Load(policyPath)
	if err != nil {
		t.Fatal(err)
	}
	st := memstore.New(nil)
	t.Cleanup(func() { st.Close() })
	opts = append([]gate.Option{
		gate.WithStore(st),
		gate.WithRandom(rand.NewChaCha8([32]byte{'p', 'c'})),
		gate.WithProtectedPaths(stateDir),
		gate.WithHomeDir(homeDir),
	}, opts...)
	g, err := gate.New(pol, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{g: g, st: st, pol: pol}
}

func (f *fixture) handler(t testing.TB, o hook.Options) *hook.Handler {
	t.Helper()
	o.Decider = f.g
	if o.Holder == nil {
		o.Holder = hook.WaitThenDecide{Waiter: f.g, Decider: f.g}
	}
	o.Policy = f.pol
	h, err := hook.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// run runs one event through the handler and returns its exit status and
// what it wrote.
func run(t *testing.T, h *hook.Handler, host hook.Host, input []byte) (int, []byte, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := h.Run(context.Background(), host, bytes.NewReader(input), &out, &errOut)
	return code, out.Bytes(), errOut.String()
}

// TestGolden runs every captured hook event under testdata/golden/<host>
// through a real gate and compares the exit status and the answer with
// the .golden file beside it (go test ./hook -run Golden -update rewrites
// them).
func TestGolden(t *testing.T) {
	for _, host := range hook.Hosts {
		dir := filepath.Join("testdata", "golden", host.Name())
		inputs, err := filepath.Glob(filepath.Join(dir, "*.json"))
		if err != nil {
			t.Fatal(err)
		}
		if len(inputs) < 8 {
			t.Fatalf("%s: %d golden inputs; want every format covered", dir, len(inputs))
		}
		for _, in := range inputs {
			name := host.Name() + "/" + strings.TrimSuffix(filepath.Base(in), ".json")
			t.Run(name, func(t *testing.T) {
				input, err := os.ReadFile(in)
				if err != nil {
					t.Fatal(err)
				}
				f := newFixture(t, policyFor[host.Name()])
				code, out, stderr := run(t, f.handler(t, hook.Options{}), host, input)
				if !json.Valid(out) {
					t.Fatalf("answer is not JSON: %q", out)
				}
				if (code != 0) != (stderr != "") {
					t.Errorf("exit %d with stderr %q: a failure must explain itself on stderr, a decision must not", code, stderr)
				}
				got := "exit " + strconv.Itoa(code) + "\n" + string(out)
				golden := strings.TrimSuffix(in, ".json") + ".golden"
				if *update {
					if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
						t.Fatal(err)
					}
					return
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatalf("%v (run with -update to write it)", err)
				}
				if diff := cmp.Diff(string(want), got); diff != "" {
					t.Errorf("answer differs from %s (-want +got):\n%s", golden, diff)
				}
			})
		}
	}
}

// answerOf decodes Claude Code's PreToolUse answer.
func answerOf(t *testing.T, out []byte) (decision, reason string, cont *bool) {
	t.Helper()
	var a struct {
		Continue           *bool `json:"continue"`
		HookSpecificOutput struct {
			HookEventName            string `json:"hookEventName"`
			PermissionDecision       string `json:"permissionDecision"`
			PermissionDecisionReason string `json:"permissionDecisionReason"`
		} `json:"hookSpecificOutput"`
	}
	if err := json.Unmarshal(out, &a); err != nil {
		t.Fatalf("answer %q: %v", out, err)
	}
	if a.HookSpecificOutput.HookEventName != "PreToolUse" {
		t.Fatalf("answer %s: hookEventName %q, want PreToolUse", out, a.HookSpecificOutput.HookEventName)
	}
	return a.HookSpecificOutput.PermissionDecision, a.HookSpecificOutput.PermissionDecisionReason, a.Continue
}

func claudeEvent(tool string, input map[string]any) []byte {
	b, err := json.Marshal(map[string]any{
		"session_id": "s-1", "transcript_path": "", "cwd": "/home/dev/project",
		"permission_mode": "default", "hook_event_name": "PreToolUse",
		"tool_name": tool, "tool_input": input, "tool_use_id": "toolu_1",
	})
	if err != nil {
		panic(err)
	}
	return b
}

// TestHoldApproved holds a call that needs a person until one approves it
// out of band; the second decision uses the grant the approval made.
func TestHoldApproved(t *testing.T) {
	f := newFixture(t, policyFor["claude-code"])
	h := f.handler(t, hook.Options{Hold: true, MaxWait: 30 * time.Second})
	go approveWhenAsked(t, f, true, "")
	code, out, _ := run(t, h, hook.ClaudeCode{}, claudeEvent("Bash", map[string]any{"command": "npm install left-pad"}))
	decision, reason, _ := answerOf(t, out)
	if code != 0 || decision != "allow" {
		t.Fatalf("held call approved out of band: exit %d, %s (%s); want exit 0, allow", code, decision, reason)
	}
	// The approval was single-use: the same call asks again.
	h2 := f.handler(t, hook.Options{})
	_, out, _ = run(t, h2, hook.ClaudeCode{}, claudeEvent("Bash", map[string]any{"command": "npm install left-pad"}))
	if decision, _, _ := answerOf(t, out); decision != "ask" {
		t.Errorf("the same call after its single-use approval was used: %s; want ask", decision)
	}
}

func TestHoldDenied(t *testing.T) {
	f := newFixture(t, policyFor["claude-code"])
	h := f.handler(t, hook.Options{Hold: true, MaxWait: 30 * time.Second})
	go approveWhenAsked(t, f, false, "not on a Friday")
	code, out, _ := run(t, h, hook.ClaudeCode{}, claudeEvent("Bash", map[string]any{"command": "git push origin main"}))
	decision, reason, _ := answerOf(t, out)
	if code != 0 || decision != "deny" || !strings.Contains(reason, "not on a Friday") {
		t.Fatalf("held call denied out of band: exit %d, %s (%q); want exit 0, deny with the person's reason", code, decision, reason)
	}
}

// TestHoldOutOfBandPolicy: a policy whose approvals are out of band
// holds a call that needs a person without Hold, rather than asking in
// the host.
func TestHoldOutOfBandPolicy(t *testing.T) {
	f := newFixture(t, policyFor["claude-code"])
	f.pol.Approvals.OutOfBand = true
	h := f.handler(t, hook.Options{MaxWait: 30 * time.Second})
	go approveWhenAsked(t, f, false, "answered out of band")
	code, out, _ := run(t, h, hook.ClaudeCode{}, claudeEvent("Bash", map[string]any{"command": "git push origin main"}))
	decision, reason, _ := answerOf(t, out)
	if code != 0 || decision != "deny" || !strings.Contains(reason, "answered out of band") {
		t.Fatalf("call under an out-of-band policy: exit %d, %s (%q); want it held and denied with the person's reason", code, decision, reason)
	}
}

func TestHoldNobodyAnswers(t *testing.T) {
	f := newFixture(t, policyFor["claude-code"])
	h := f.handler(t, hook.Options{Hold: true, MaxWait: 50 * time.Millisecond})
	code, out, _ := run(t, h, hook.ClaudeCode{}, claudeEvent("Bash", map[string]any{"command": "git push origin main"}))
	decision, reason, _ := answerOf(t, out)
	if code != 0 || decision != "deny" || !strings.Contains(reason, "nobody answered") {
		t.Fatalf("held call nobody answered: exit %d, %s (%q); want exit 0, deny", code, decision, reason)
	}
}

// approveWhenAsked waits for the pending approval request and answers it
// as a person would.
func approveWhenAsked(t *testing.T, f *fixture, approve bool, reason string) {
	ctx := context.Background()
	for range 2000 {
		as, err := f.st.Approvals(ctx, portcullis.ApprovalFilter{Status: portcullis.ApprovalPending})
		if err != nil {
			t.Error(err)
			return
		}
		if len(as) > 0 {
			if approve {
				_, err = f.g.Approve(ctx, as[0].ID, "alice", false)
			} else {
				_, err = f.g.DenyApproval(ctx, as[0].ID, "alice", reason)
			}
			if err != nil {
				t.Error(err)
			}
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Error("no approval request appeared")
}

// TestStopNeverShowsTheCode blocks the agent in the danger zone; the hook
// denies, ends the turn, and never writes the verification code that only
// the notifier (a human channel) received.
func TestStopNeverShowsTheCode(t *testing.T) {
	var notices noticeLog
	f := newFixture(t, policyFor["claude-code"], gate.WithNotifier(&notices))
	ctx := context.Background()
	if _, err := f.g.BlockAgent(ctx, "claude-code", "deleted the production database", ""); err != nil {
		t.Fatal(err)
	}
	code := notices.code(t)
	for _, host := range hook.Hosts {
		var input []byte
		switch host.Name() {
		case "gemini":
			input = []byte(`{"session_id":"s","hook_event_name":"BeforeTool","tool_name":"read_file","tool_input":{"file_path":"/x"}}`)
		case "cursor":
			input = []byte(`{"conversation_id":"c","generation_id":"g","hook_event_name":"beforeShellExecution","command":"ls","cwd":"/home/dev/project","workspace_roots":["/home/dev/project"]}`)
		case "copilot":
			input = []byte(`{"sessionId":"s","timestamp":1,"cwd":"/home/dev/project","toolName":"view","toolArgs":{"path":"/home/dev/project/go.mod"}}`)
		case "opencode":
			input = []byte(`{"session_id":"s","hook_event_name":"tool.execute.before","tool_name":"read","tool_input":{"filePath":"/x"}}`)
		default:
			input = claudeEvent("Read", map[string]any{"file_path": "/home/dev/project/go.mod"})
		}
		exit, out, stderr := run(t, f.handler(t, hook.Options{Agent: "claude-code"}), host, input)
		// Codex refuses "continue": false from a tool hook, and a refused
		// answer lets the call run: its stop is a plain deny, as is
		// Copilot CLI's, whose preToolUse has no such field, and
		// opencode's, whose plugin has no way to end the turn.
		endsTurn := host.Name() != "codex" && host.Name() != "copilot" && host.Name() != "opencode"
		if exit != 0 || bytes.Contains(out, []byte(`"continue":false`)) != endsTurn || !bytes.Contains(out, []byte("deny")) {
			t.Errorf("%s: blocked agent: exit %d, %s; want a deny (that ends the turn: %v)", host.Name(), exit, out, endsTurn)
		}
		if bytes.Contains(out, []byte(code)) || strings.Contains(stderr, code) {
			t.Errorf("%s: the verification code %s reached the agent: %s %s", host.Name(), code, out, stderr)
		}
	}
}

type noticeLog struct{ notices []portcullis.Notice }

func (n *noticeLog) Notify(_ context.Context, x portcullis.Notice) error {
	n.notices = append(n.notices, x)
	return nil
}

func (n *noticeLog) code(t *testing.T) string {
	t.Helper()
	for _, x := range n.notices {
		if x.Code != "" {
			return x.Code
		}
	}
	t.Fatal("no notice carried a code")
	return ""
}

// TestStdinNeverEnds: a host that never closes stdin gets a deny and exit
// status 2 when the deadline passes, not a hang and never an allow.
func TestStdinNeverEnds(t *testing.T) {
	f := newFixture(t, policyFor["claude-code"])
	h := f.handler(t, hook.Options{Timeout: 50 * time.Millisecond})
	r, w := io.Pipe()
	defer w.Close()
	go w.Write([]byte(`{"hook_event_name": "PreToolUse", `))
	var out, errOut bytes.Buffer
	code := h.Run(context.Background(), hook.ClaudeCode{}, r, &out, &errOut)
	decision, _, _ := answerOf(t, out.Bytes())
	if code != hook.ExitBlock || decision != "deny" || !strings.Contains(errOut.String(), "did not finish in time") {
		t.Errorf("stdin never closed: exit %d, %s, stderr %q; want exit 2, deny", code, decision, errOut.String())
	}
}

// TestRetryLoopStops: the second identical denied call with no new user
// message stops the turn; a new user message in the transcript resets it.
func TestRetryLoopStops(t *testing.T) {
	f := newFixture(t, policyFor["claude-code"])
	h := f.handler(t, hook.Options{})
	dir := t.TempDir()
	transcript := filepath.Join(dir, "t.jsonl")
	writeLines(t, transcript, `{"type":"user","message":{"role":"user","content":"publish it"}}`)
	ev := func() []byte {
		b, _ := json.Marshal(map[string]any{"session_id": "s-retry", "transcript_path": transcript, "cwd": dir,
			"permission_mode": "default", "hook_event_name": "PreToolUse", "tool_name": "Bash",
			"tool_input": map[string]any{"command": "npm publish"}, "tool_use_id": "t"})
		return b
	}
	_, out, _ := run(t, h, hook.ClaudeCode{}, ev())
	if d, _, cont := answerOf(t, out); d != "deny" || cont != nil {
		t.Fatalf("first denial: %s; want a plain deny", out)
	}
	_, out, _ = run(t, h, hook.ClaudeCode{}, ev())
	if d, _, cont := answerOf(t, out); d != "deny" || cont == nil || *cont {
		t.Fatalf("second identical denial: %s; want a deny that ends the turn", out)
	}
	writeLines(t, transcript, `{"type":"user","message":{"role":"user","content":"publish it"}}`,
		`{"type":"user","message":{"role":"user","content":"try once more please"}}`)
	_, out, _ = run(t, h, hook.ClaudeCode{}, ev())
	if d, _, cont := answerOf(t, out); d != "deny" || cont != nil {
		t.Fatalf("after a new user message: %s; want a plain deny again", out)
	}
	// The transcript was read by the hook, not stated by the agent: the
	// audit row says so.
	recs, err := f.st.QueryAudit(context.Background(), portcullis.AuditQuery{Kind: portcullis.AuditDecision, Limit: 10})
	if err != nil || len(recs) == 0 {
		t.Fatalf("audit rows: %v (%d)", err, len(recs))
	}
	for _, r := range recs {
		ev, err := r.Event()
		if err != nil {
			t.Fatal(err)
		}
		if ev.Request.ContextSource != portcullis.ContextHost {
			t.Errorf("audit row %d contextSource = %q; want host", r.Seq, ev.Request.ContextSource)
		}
	}
}

func writeLines(t *testing.T, path string, lines ...string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestMCPNames: an MCP tool is decided under its tool name, or its full
// name with MCPFullName.
func TestMCPNames(t *testing.T) {
	f := newFixture(t, policyFor["claude-code"])
	input := claudeEvent("mcp__github__get_issue", map[string]any{"owner": "a", "repo": "b", "issue_number": 1})
	_, out, _ := run(t, f.handler(t, hook.Options{}), hook.ClaudeCode{}, input)
	if d, _, _ := answerOf(t, out); d != "allow" {
		t.Errorf("get_issue by tool name: %s; want allow", out)
	}
	_, out, _ = run(t, f.handler(t, hook.Options{MCPNames: hook.MCPFullName}), hook.ClaudeCode{}, input)
	if d, _, _ := answerOf(t, out); d != "ask" {
		t.Errorf("get_issue by full name (unclassified): %s; want ask", out)
	}
}

func TestPatchFiles(t *testing.T) {
	patch := "*** Begin Patch\n*** Add File: a.txt\n+x\n*** Update File: b.go\r\n*** Move to: c.go\n@@\n-x\n+y\n*** Delete File: d.md\n*** Update File: a.txt\n*** End Patch"
	got := hook.PatchFiles(patch)
	want := []string{"a.txt", "b.go", "c.go", "d.md"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PatchFiles (-want +got):\n%s", diff)
	}
}

// TestWorkdirFromTheHost: the hook passes the host's cwd to the gate as
// the call's working directory, so a tool's outsideWorkdir applies to a
// write outside the project (here DENY, to tell it from the ask inside),
// whichever way the path is written.
func TestWorkdirFromTheHost(t *testing.T) {
	pol := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(pol, []byte("version: 1\ntools:\n  Write: {endpoint: UPDATE, pathArg: file_path, defaultLevel: CONFIRM_SESSION, outsideWorkdir: DENY}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, pol)
	h := f.handler(t, hook.Options{})
	for _, tc := range []struct {
		path, want string
	}{
		{"/home/dev/project/main.go", "ask"},
		{"main.go", "ask"},
		{"/home/dev/.bashrc", "deny"},
		{"../.bashrc", "deny"},
		{"/home/dev/project/../.bashrc", "deny"},
	} {
		_, out, _ := run(t, h, hook.ClaudeCode{}, claudeEvent("Write", map[string]any{"file_path": tc.path, "content": "x"}))
		if d, reason, _ := answerOf(t, out); d != tc.want {
			t.Errorf("Write %s from cwd /home/dev/project: %s (%s); want %s", tc.path, d, reason, tc.want)
		}
	}
}

func TestClientConfigFiles(t *testing.T) {
	got := hook.ClientConfigFiles("/h", "/p", "/c", "/u")
	for _, want := range []string{
		"/h/.claude/settings.json", "/p/.claude/settings.json", "/p/.claude/settings.local.json",
		"/h/.codex/hooks.json", "/p/.codex/config.toml", "/h/.gemini/settings.json", "/p/.gemini/settings.json", "/h/.gemini/trustedFolders.json",
		"/h/.cursor/hooks.json", "/p/.cursor/mcp.json", "/h/.copilot/hooks", "/p/.github/hooks",
		"/h/.claude.json", "/c/.claude.json", "/p/.mcp.json", "/u/Claude/claude_desktop_config.json",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("ClientConfigFiles leaves out %s: %v", want, got)
		}
	}
	for _, f := range hook.ClientConfigFiles("", "/p", "", "") {
		if !strings.HasPrefix(f, "/p/") {
			t.Errorf("with no home, config dir or user config dir: %s; want only the project's files", f)
		}
	}
}
