package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/httpapi"
	"github.com/portcullis/portcullis/internal/secret"
	"github.com/portcullis/portcullis/policy"
	"github.com/portcullis/portcullis/sqlite"
)

var approvalID = regexp.MustCompile(`apr_[a-z0-9]+`)

// pendingIDs returns the IDs `approvals` lists, newest first.
func pendingIDs(t *testing.T, args ...string) []string {
	t.Helper()
	code, stdout, stderr := runCLI(t, "", append([]string{"approvals"}, args...)...)
	if code != 0 {
		t.Fatalf("approvals %v: exit %d: %s", args, code, stderr)
	}
	return approvalID.FindAllString(stdout, -1)
}

func auditActors(t *testing.T, dir string, kind portcullis.AuditKind) []string {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "portcullis.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	recs, err := st.QueryAudit(context.Background(), portcullis.AuditQuery{Kind: kind})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range recs {
		ev, err := r.Event()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev.Actor)
	}
	return out
}

// Without a gateway, the commands act on the store, audited with who acted.
func TestApprovalsOnTheStore(t *testing.T) {
	dir := decideWithState(t) // two pending requests, in session s2
	ids := pendingIDs(t, "--state", dir)
	if len(ids) != 2 {
		t.Fatalf("approvals listed %v; want 2 pending requests", ids)
	}
	code, stdout, stderr := runCLI(t, "", "approvals", ids[0], "--state", dir)
	if code != 0 || !strings.Contains(stdout, "approval "+ids[0]+": pending") || !strings.Contains(stdout, "portcullis approve "+ids[0]) {
		t.Fatalf("approvals ID: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, _ = runCLI(t, "", "approvals", "--json", "--state", dir)
	var a portcullis.Approval
	if first, _, _ := strings.Cut(stdout, "\n"); code != 0 || json.Unmarshal([]byte(first), &a) != nil || a.ID != ids[0] {
		t.Fatalf("approvals --json: exit %d, first line %q; want %s as JSON", code, first, ids[0])
	}

	code, stdout, stderr = runCLI(t, "", "approve", ids[0], "--state", dir, "--as", "ana")
	if code != 0 || !strings.Contains(stdout, "approved "+ids[0]+" once") {
		t.Fatalf("approve: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, _, stderr := runCLI(t, "", "approve", ids[0], "--state", dir); code != 1 || !strings.Contains(stderr, "already approved") {
		t.Fatalf("approve twice: exit %d, %s; want exit 1 saying it is already approved", code, stderr)
	}
	if code, _, stderr := runCLI(t, "", "deny", ids[1], "--state", dir); code != 2 || !strings.Contains(stderr, "--reason") {
		t.Fatalf("deny without a reason: exit %d, %s; want exit 2 asking for --reason", code, stderr)
	}
	if code, stdout, stderr := runCLI(t, "", "deny", ids[1], "--reason", "not now", "--state", dir); code != 0 || !strings.Contains(stdout, "denied "+ids[1]) {
		t.Fatalf("deny: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, _, stderr := runCLI(t, "", "approve", "apr_nope", "--state", dir); code != 2 || stderr != "portcullis: no approval request \"apr_nope\" (portcullis approvals lists the requests, portcullis grants the grants)\n" {
		t.Fatalf("approve a missing request: exit %d, %s; want exit 2, the message alone and where to find the IDs", code, stderr)
	}
	if ids := pendingIDs(t, "--state", dir); len(ids) != 0 {
		t.Fatalf("pending after both answers: %v", ids)
	}
	if got := pendingIDs(t, "--state", dir, "--status", "denied"); len(got) != 1 || got[0] != ids[1] {
		t.Fatalf("denied requests = %v; want %s", got, ids[1])
	}
	if actors := auditActors(t, dir, portcullis.AuditApproval); len(actors) != 2 || actors[0] != "ana" || !strings.HasPrefix(actors[1], "cli") {
		t.Fatalf("approval audit actors = %v; want ana, then the user running the command", actors)
	}

	// The approval made a single-use grant; revoke it.
	code, stdout, _ = runCLI(t, "", "grants", "--json", "--state", dir)
	var g portcullis.Grant
	if code != 0 || json.Unmarshal([]byte(stdout), &g) != nil || g.Kind != portcullis.GrantSingle || g.GrantedBy != "ana" {
		t.Fatalf("grants --json: exit %d, %q; want ana's single-use grant", code, stdout)
	}
	if code, stdout, _ := runCLI(t, "", "grants", "--state", dir); code != 0 || !strings.Contains(stdout, g.ID) {
		t.Fatalf("grants: exit %d\n%s", code, stdout)
	}
	if code, stdout, stderr := runCLI(t, "", "grants", "revoke", g.ID, "--state", dir, "--as", "bo"); code != 0 || stdout != "revoked "+g.ID+"\n" {
		t.Fatalf("grants revoke: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, _, _ := runCLI(t, "", "grants", "revoke", g.ID, "--state", dir); code != 2 {
		t.Fatalf("grants revoke twice: exit %d; want 2, the grant is gone", code)
	}
	if code, stdout, _ := runCLI(t, "", "grants", "--state", dir); code != 0 || stdout != "no grants\n" {
		t.Fatalf("grants after the revocation: exit %d, %q", code, stdout)
	}
	if actors := auditActors(t, dir, portcullis.AuditGrant); len(actors) != 1 || actors[0] != "bo" {
		t.Fatalf("grant audit actors = %v; want bo", actors)
	}
}

func TestApprovalsUsage(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"approve"},
		{"approve", "a", "b"},
		{"deny", "a"},
		{"approvals", "--status", "maybe"},
		{"approvals", "a", "b"},
		{"approvals", "--watch", "apr_x"},
		{"grants", "revoke"},
		{"grants", "remove", "x"},
	} {
		if code, _, _ := runCLI(t, "", append(args, "--state", dir)...); code != 2 {
			t.Errorf("%v: exit %d; want 2", args, code)
		}
	}
}

// gatewayFixture is a running gateway on 127.0.0.1 whose store is a state
// directory's, with the human token in its admin.token.
type gatewayFixture struct {
	url, dir, token string
	gate            *gate.Gate
	store           portcullis.Store
}

func startGateway(t *testing.T) *gatewayFixture {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	token, _, err := secret.ReadOrCreate(filepath.Join(dir, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "gateway.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	pol, _, err := policy.Load("testdata/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	g, err := gate.New(pol, gate.WithStore(st))
	if err != nil {
		t.Fatal(err)
	}
	h, err := httpapi.New(httpapi.Options{
		Gate: g, Store: st, HumanToken: token,
		AgentToken: func(tok string) (string, bool) { return "bot", tok == "agent-token-0123456789abcdef" },
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return &gatewayFixture{url: srv.URL, dir: dir, token: token, gate: g, store: st}
}

func (f *gatewayFixture) confirm(t *testing.T, call portcullis.Call) portcullis.Decision {
	t.Helper()
	d, err := f.gate.Decide(context.Background(), call)
	if err != nil || d.Outcome != portcullis.OutcomeConfirm {
		t.Fatalf("Decide(%s) = %s, %v; want confirm", call.Tool, d.Outcome, err)
	}
	return d
}

// With a gateway, the commands use its approvals API with the human token.
func TestApprovalsThroughAGateway(t *testing.T) {
	f := startGateway(t)
	d1 := f.confirm(t, portcullis.Call{Tool: "create_element", Session: "s1", Agent: "bot"})
	d2 := f.confirm(t, portcullis.Call{Tool: "launch_rocket", Session: "s1", Agent: "bot", Args: map[string]any{"to": "mars"}})

	// The token from the state directory's admin.token.
	gw := []string{"--gateway", f.url, "--state", f.dir}
	if ids := pendingIDs(t, gw...); len(ids) != 2 || ids[0] != d2.ChallengeID {
		t.Fatalf("approvals via the gateway = %v; want [%s %s]", ids, d2.ChallengeID, d1.ChallengeID)
	}
	code, stdout, stderr := runCLI(t, "", append([]string{"approve", d1.ChallengeID, "--session", "--as", "ana"}, gw...)...)
	if code != 0 || !strings.Contains(stdout, "for session s1") {
		t.Fatalf("approve --session via the gateway: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, _, stderr := runCLI(t, "", append([]string{"approve", d1.ChallengeID}, gw...)...); code != 1 || !strings.Contains(stderr, "already approved") {
		t.Fatalf("approve twice via the gateway: exit %d, %s; want 1", code, stderr)
	}

	// --token-file, and the gateway from $PORTCULLIS_GATEWAY.
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(f.token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PORTCULLIS_GATEWAY", f.url)
	t.Setenv("USER", "bo")
	code, stdout, stderr = runCLI(t, "", "deny", d2.ChallengeID, "--reason", "no edits today", "--token-file", tokenFile, "--state", t.TempDir())
	if code != 0 || !strings.Contains(stdout, "denied "+d2.ChallengeID) {
		t.Fatalf("deny via $PORTCULLIS_GATEWAY: exit %d\n%s%s", code, stdout, stderr)
	}
	a, err := f.store.Approval(context.Background(), d2.ChallengeID)
	if err != nil || a.DecidedBy != "bo (token:human)" || a.DenyReason != "no edits today" {
		t.Fatalf("the denied request = %+v, %v; want denied by bo (token:human) with the reason", a, err)
	}

	code, stdout, _ = runCLI(t, "", append([]string{"grants", "--json"}, gw...)...)
	var g portcullis.Grant
	if code != 0 || json.Unmarshal([]byte(stdout), &g) != nil || g.Kind != portcullis.GrantSession || g.GrantedBy != "ana (token:human)" {
		t.Fatalf("grants via the gateway: exit %d, %q; want ana's session grant", code, stdout)
	}
	if code, stdout, stderr := runCLI(t, "", append([]string{"grants", "revoke", g.ID, "grt_nope"}, gw...)...); code != 2 || stdout != "revoked "+g.ID+"\n" || !strings.Contains(stderr, "grt_nope") {
		t.Fatalf("grants revoke ID grt_nope: exit %d\n%s%s; want the first revoked and exit 2 naming the second", code, stdout, stderr)
	}

	// A wrong token, and no token at all.
	bad := filepath.Join(t.TempDir(), "bad")
	if err := os.WriteFile(bad, []byte("not-the-token-0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI(t, "", "approvals", "--token-file", bad); code != 1 || !strings.Contains(stderr, "wrong token") {
		t.Fatalf("a wrong token: exit %d, %s; want 1, wrong token", code, stderr)
	}
	if code, _, stderr := runCLI(t, "", "approvals", "--state", t.TempDir()); code != 2 || !strings.Contains(stderr, "--token-file") {
		t.Fatalf("no token: exit %d, %s; want 2 naming --token-file", code, stderr)
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// approvals --watch prints requests as they arrive and as they are
// answered, until interrupted.
func TestApprovalsWatch(t *testing.T) {
	f := startGateway(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"approvals", "--watch", "--interval", "20ms", "--gateway", f.url, "--state", f.dir}, strings.NewReader(""), &out, &errb)
	}()
	waitUntil(t, &out, "no pending approval requests")
	d := f.confirm(t, portcullis.Call{Tool: "launch_rocket", Session: "s1", Agent: "bot", Args: map[string]any{"to": "mars"}})
	waitUntil(t, &out, d.ChallengeID+"  launch_rocket")
	if _, err := f.gate.Approve(context.Background(), d.ChallengeID, "ana", false); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, &out, d.ChallengeID+"  approved by ana")
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("approvals --watch ended with %v; want nil on interrupt\n%s", err, errb.String())
	}
}

// waitUntil waits for text in the output, failing after a generous bound.
func waitUntil(t *testing.T, out *syncBuffer, text string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(out.String(), text) {
		if time.Now().After(deadline) {
			t.Fatalf("output never showed %q:\n%s", text, out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
