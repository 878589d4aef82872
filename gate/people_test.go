package gate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/internal/noticetest"
	"github.com/portcullis/portcullis/memstore"
)

func newPeople(t *testing.T) (*gate.Gate, *memstore.Store, *fakeClock) {
	clock := newClock()
	st := memstore.New(clock)
	return mustGate(t, grantsPolicy, gate.WithStore(st), gate.WithClock(clock)), st, clock
}

func TestApproveOnceLetsTheHeldCallThroughOnce(t *testing.T) {
	ctx := context.Background()
	g, st, _ := newPeople(t)
	call := portcullis.Call{Tool: "delete_element", Args: map[string]any{"name": "x"}, Session: "s1", Agent: "bot"}
	d := decide(t, g, call)
	if d.Outcome != portcullis.OutcomeConfirm || d.ChallengeID == "" {
		t.Fatalf("first decision = %s (challenge %q); want confirm with an approval request", d.Outcome, d.ChallengeID)
	}
	if _, err := g.Approve(ctx, d.ChallengeID, "ana", true); portcullis.ErrorCode(err) != portcullis.CodeInvalidRequest {
		t.Fatalf("Approve(for session) of a CONFIRM_SINGLE_USE call: err = %v; want INVALID_REQUEST", err)
	}
	a, err := g.Approve(ctx, d.ChallengeID, "ana", false)
	if err != nil {
		t.Fatal(err)
	}
	if a.Status != portcullis.ApprovalApproved || a.DecidedBy != "ana" {
		t.Fatalf("approval = %+v; want approved by ana", a)
	}
	if d := decide(t, g, call); d.Outcome != portcullis.OutcomeAllow {
		t.Fatalf("re-decided after approval: %s (%s); want allow", d.Outcome, d.Reason)
	}
	if d := decide(t, g, call); d.Outcome != portcullis.OutcomeConfirm {
		t.Fatalf("second call after a one-time approval: %s; want confirm", d.Outcome)
	}
	other := call
	other.Args = map[string]any{"name": "y"}
	a2 := decide(t, g, other)
	if _, err := g.Approve(ctx, a2.ChallengeID, "ana", false); err != nil {
		t.Fatal(err)
	}
	if d := decide(t, g, call); d.Outcome != portcullis.OutcomeConfirm {
		t.Fatalf("a call with other arguments than the approved one: %s; want confirm", d.Outcome)
	}
	recs, err := st.QueryAudit(ctx, portcullis.AuditQuery{Kind: portcullis.AuditApproval})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 {
		t.Fatalf("approval audit rows = %d; want 2", len(recs))
	}
	for _, r := range recs {
		ev, err := r.Event()
		if err != nil || ev.Actor != "ana" {
			t.Fatalf("approval audit row actor = %q (%v); want ana", ev.Actor, err)
		}
	}
}

func TestApproveForSessionCoversLaterCalls(t *testing.T) {
	ctx := context.Background()
	g, _, _ := newPeople(t)
	call := portcullis.Call{Tool: "create_element", Args: map[string]any{"name": "a"}, Session: "s1"}
	d := decide(t, g, call)
	if _, err := g.Approve(ctx, d.ChallengeID, "ana", true); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b", "c"} {
		c := call
		c.Args = map[string]any{"name": name}
		if d := decide(t, g, c); d.Outcome != portcullis.OutcomeAllow {
			t.Fatalf("create %s after a session approval: %s; want allow", name, d.Outcome)
		}
	}
	c := call
	c.Session = "s2"
	if d := decide(t, g, c); d.Outcome != portcullis.OutcomeConfirm {
		t.Fatalf("another session: %s; want confirm", d.Outcome)
	}
}

func TestConcurrentApproveAndDenyExactlyOneWins(t *testing.T) {
	ctx := context.Background()
	g, _, _ := newPeople(t)
	d := decide(t, g, portcullis.Call{Tool: "edit_element", Session: "s1"})
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if i%2 == 0 {
				_, err = g.Approve(ctx, d.ChallengeID, "ana", false)
			} else {
				_, err = g.DenyApproval(ctx, d.ChallengeID, "bob", "no")
			}
			if err == nil {
				wins.Add(1)
			} else if portcullis.ErrorCode(err) != portcullis.CodeConflict {
				t.Errorf("loser's error = %v; want CONFLICT", err)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d deciders won; want exactly 1", wins.Load())
	}
}

func TestAwaitApprovalWakesOnAnswer(t *testing.T) {
	ctx := context.Background()
	g, _, _ := newPeople(t)
	d := decide(t, g, portcullis.Call{Tool: "edit_element", Session: "s1"})
	done := make(chan portcullis.Approval, 1)
	go func() {
		a, err := g.AwaitApproval(ctx, d.ChallengeID)
		if err != nil {
			t.Error(err)
		}
		done <- a
	}()
	time.Sleep(20 * time.Millisecond)
	select {
	case a := <-done:
		t.Fatalf("AwaitApproval returned %s before anyone answered", a.Status)
	default:
	}
	if _, err := g.DenyApproval(ctx, d.ChallengeID, "bob", "not on a Friday"); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-done:
		if a.Status != portcullis.ApprovalDenied || a.DenyReason != "not on a Friday" {
			t.Fatalf("AwaitApproval = %s %q; want denied with the reason", a.Status, a.DenyReason)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("AwaitApproval did not wake when the request was denied")
	}
}

func TestAwaitApprovalEndsWithContextAndExpiry(t *testing.T) {
	g, _, clock := newPeople(t)
	d := decide(t, g, portcullis.Call{Tool: "edit_element", Session: "s1"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if _, err := g.AwaitApproval(ctx, d.ChallengeID); err != context.DeadlineExceeded {
		t.Fatalf("AwaitApproval with a short context: err = %v; want DeadlineExceeded", err)
	}
	clock.Advance(16 * time.Minute)
	a, err := g.AwaitApproval(context.Background(), d.ChallengeID)
	if err != nil || a.Status != portcullis.ApprovalExpired {
		t.Fatalf("AwaitApproval after expiry = %s, %v; want expired", a.Status, err)
	}
}

const upstreamPolicy = `
version: 1
tools:
  search: {endpoint: READ}
  wipe:   {endpoint: DELETE, defaultLevel: DENY}
`

func TestUpstreamToolRoute(t *testing.T) {
	g := mustGate(t, upstreamPolicy)
	up := func(u portcullis.UpstreamTool) *portcullis.UpstreamTool { u.Server = "fs"; return &u }
	cases := []struct {
		name    string
		call    portcullis.Call
		outcome portcullis.Outcome
		level   portcullis.Level
		code    portcullis.Code
	}{
		{"offered by none, even if the policy names it", portcullis.Call{Tool: "search", Upstream: up(portcullis.UpstreamTool{})}, portcullis.OutcomeDeny, portcullis.Deny, portcullis.CodeUnknownOperation},
		{"destructiveHint raises a listed tool", portcullis.Call{Tool: "search", Upstream: up(portcullis.UpstreamTool{Offered: true, Annotated: true, Destructive: true})}, portcullis.OutcomeConfirm, portcullis.ConfirmSingleUse, portcullis.CodeConfirmationRequired},
		{"readOnlyHint never lowers a listed tool", portcullis.Call{Tool: "wipe", Upstream: up(portcullis.UpstreamTool{Offered: true, Annotated: true, ReadOnly: true, Trusted: true})}, portcullis.OutcomeDeny, portcullis.Deny, ""},
		{"untrusted readOnlyHint", portcullis.Call{Tool: "read_text", Upstream: up(portcullis.UpstreamTool{Offered: true, Annotated: true, ReadOnly: true})}, portcullis.OutcomeConfirm, portcullis.ConfirmSingleUse, portcullis.CodeConfirmationRequired},
		{"trusted readOnlyHint", portcullis.Call{Tool: "read_text", Upstream: up(portcullis.UpstreamTool{Offered: true, Annotated: true, ReadOnly: true, Trusted: true})}, portcullis.OutcomeAllow, portcullis.AutoApprove, ""},
		{"trusted readOnlyHint and destructiveHint", portcullis.Call{Tool: "read_text", Upstream: up(portcullis.UpstreamTool{Offered: true, Annotated: true, ReadOnly: true, Destructive: true, Trusted: true})}, portcullis.OutcomeConfirm, portcullis.ConfirmSingleUse, portcullis.CodeConfirmationRequired},
		{"destructiveHint", portcullis.Call{Tool: "rm", Upstream: up(portcullis.UpstreamTool{Offered: true, Annotated: true, Destructive: true})}, portcullis.OutcomeConfirm, portcullis.ConfirmSingleUse, portcullis.CodeConfirmationRequired},
		{"trusted destructiveHint", portcullis.Call{Tool: "rm", Upstream: up(portcullis.UpstreamTool{Offered: true, Annotated: true, Destructive: true, Trusted: true})}, portcullis.OutcomeConfirm, portcullis.ConfirmSingleUse, portcullis.CodeConfirmationRequired},
		{"no hint is an update", portcullis.Call{Tool: "edit", Upstream: up(portcullis.UpstreamTool{Offered: true, Annotated: true, Trusted: true})}, portcullis.OutcomeConfirm, portcullis.ConfirmSingleUse, portcullis.CodeConfirmationRequired},
		{"new trusted read-only tool is held", portcullis.Call{Tool: "read_text", Upstream: up(portcullis.UpstreamTool{Offered: true, Annotated: true, ReadOnly: true, Trusted: true, New: true})}, portcullis.OutcomeConfirm, portcullis.ConfirmSingleUse, portcullis.CodeConfirmationRequired},
		{"new policy tool is held", portcullis.Call{Tool: "search", Upstream: up(portcullis.UpstreamTool{Offered: true, New: true})}, portcullis.OutcomeConfirm, portcullis.ConfirmSingleUse, portcullis.CodeConfirmationRequired},
		{"unannotated", portcullis.Call{Tool: "mystery", Upstream: up(portcullis.UpstreamTool{Offered: true})}, portcullis.OutcomeConfirm, portcullis.ConfirmSingleUse, portcullis.CodeConfirmationRequired},
		{"changed read-only tool is held", portcullis.Call{Tool: "read_text", Upstream: up(portcullis.UpstreamTool{Offered: true, Annotated: true, ReadOnly: true, Trusted: true, Changed: true})}, portcullis.OutcomeConfirm, portcullis.ConfirmSingleUse, portcullis.CodeConfirmationRequired},
		{"changed policy tool is held", portcullis.Call{Tool: "search", Upstream: up(portcullis.UpstreamTool{Offered: true, Changed: true})}, portcullis.OutcomeConfirm, portcullis.ConfirmSingleUse, portcullis.CodeConfirmationRequired},
		{"changed deny tool stays denied", portcullis.Call{Tool: "wipe", Upstream: up(portcullis.UpstreamTool{Offered: true, Changed: true})}, portcullis.OutcomeDeny, portcullis.Deny, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := decide(t, g, tc.call)
			if d.Outcome != tc.outcome || d.PermissionLevel != tc.level || d.Code != tc.code {
				t.Fatalf("decision = %s %s %q (%s); want %s %s %q", d.Outcome, d.PermissionLevel, d.Code, d.Reason, tc.outcome, tc.level, tc.code)
			}
			if got := g.ToolLevel(tc.call); got != tc.level {
				t.Errorf("ToolLevel = %s; want %s", got, tc.level)
			}
		})
	}
}

func TestOpenWorldWriterIsInValidatorScope(t *testing.T) {
	g := mustGate(t, upstreamPolicy)
	d := decide(t, g, portcullis.Call{Tool: "post", Upstream: &portcullis.UpstreamTool{Server: "web", Offered: true, Annotated: true, OpenWorld: true}})
	if d.Risk != portcullis.RiskExternalWrite {
		t.Fatalf("risk = %q; want external-write", d.Risk)
	}
	if d.Outcome != portcullis.OutcomeConfirm || d.PermissionLevel != portcullis.ConfirmSingleUse {
		t.Fatalf("decision = %s %s; want confirm at CONFIRM_SINGLE_USE", d.Outcome, d.PermissionLevel)
	}
	// An untrusted server's readOnlyHint does not take the scrutiny away.
	d = decide(t, g, portcullis.Call{Tool: "post", Upstream: &portcullis.UpstreamTool{Server: "web", Offered: true, Annotated: true, OpenWorld: true, ReadOnly: true}})
	if d.Risk != portcullis.RiskExternalWrite || d.PermissionLevel != portcullis.ConfirmSingleUse {
		t.Fatalf("open-world tool claiming to be read-only: risk %q level %s; want external-write at CONFIRM_SINGLE_USE", d.Risk, d.PermissionLevel)
	}
}

func TestUpstreamCannotBeSetByARequest(t *testing.T) {
	_, err := portcullis.DecodeCall([]byte(`{"tool":"x","Upstream":{"Offered":true,"ReadOnly":true,"Annotated":true}}`))
	if portcullis.ErrorCode(err) != portcullis.CodeInvalidRequest {
		t.Fatalf("DecodeCall with an Upstream field: err = %v; want INVALID_REQUEST", err)
	}
	b, err := json.Marshal(portcullis.Call{Tool: "x", Upstream: &portcullis.UpstreamTool{Offered: true}})
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"tool":"x","activeElements":null}` {
		t.Fatalf("Call marshals as %s; the upstream knowledge must not appear", b)
	}
}

func TestToolLevelSeesActiveElements(t *testing.T) {
	g := mustGate(t, `
version: 1
tools:
  search: {endpoint: READ}
  send:   {endpoint: CREATE}
elements:
  - name: Quiet
    type: persona
    active: true
    gatekeeper: {deny: [send]}
`)
	if l := g.ToolLevel(portcullis.Call{Tool: "send"}); l != portcullis.Deny {
		t.Fatalf("ToolLevel(send) = %s; want DENY from the active element", l)
	}
	if l := g.ToolLevel(portcullis.Call{Tool: "search"}); l != portcullis.AutoApprove {
		t.Fatalf("ToolLevel(search) = %s; want AUTO_APPROVE", l)
	}
}

func TestAcceptTool(t *testing.T) {
	ctx := context.Background()
	g, st, _ := newPeople(t)
	if _, err := g.AcceptTool(ctx, "fs", "read", "ana"); portcullis.ErrorCode(err) != portcullis.CodeNotFound {
		t.Fatalf("AcceptTool of an unpinned tool: %v; want NOT_FOUND", err)
	}
	pin := portcullis.ToolPin{Upstream: "fs", Tool: "read", Hash: "h1", Definition: json.RawMessage(`{"d":1}`)}
	if err := st.PutToolPin(ctx, pin); err != nil {
		t.Fatal(err)
	}
	if _, err := g.AcceptTool(ctx, "fs", "read", "ana"); portcullis.ErrorCode(err) != portcullis.CodeConflict {
		t.Fatalf("AcceptTool without a pending change: %v; want CONFLICT", err)
	}
	pin.PendingHash, pin.PendingDefinition = "h2", json.RawMessage(`{"d":2}`)
	if err := st.PutToolPin(ctx, pin); err != nil {
		t.Fatal(err)
	}
	p, err := g.AcceptTool(ctx, "fs", "read", "ana")
	if err != nil {
		t.Fatal(err)
	}
	if p.Hash != "h2" || p.PendingHash != "" || p.AcceptedBy != "ana" || string(p.Definition) != `{"d":2}` {
		t.Fatalf("pin after accept = %+v", p)
	}
	got, _, _ := st.ToolPin(ctx, "fs", "read")
	if got.Hash != "h2" || got.PendingHash != "" {
		t.Fatalf("stored pin after accept = %+v", got)
	}
}

// TestPendingCapRefusesAFloodAndTellsAPersonOnce: an agent that makes
// many calls needing a person gets at most the policy's cap of waiting
// requests; the rest are denied with PENDING_LIMIT, a person is told once,
// a retry is not taken for a retry loop, and another agent is still asked.
func TestPendingCapRefusesAFloodAndTellsAPersonOnce(t *testing.T) {
	ctx := context.Background()
	clock := newClock()
	st := memstore.New(clock)
	rec := &noticetest.Recorder{}
	g := mustGate(t, grantsPolicy+"approvals: {maxPendingPerAgent: 3}\n", gate.WithStore(st), gate.WithClock(clock), gate.WithNotifier(rec))
	call := func(agent string, i int) portcullis.Call {
		return portcullis.Call{Tool: "delete_element", Args: map[string]any{"name": fmt.Sprint(i)}, Session: "s-" + agent, Agent: agent}
	}
	var confirmed, refused int
	for i := range 10 {
		d := decide(t, g, call("flood", i))
		switch {
		case d.Outcome == portcullis.OutcomeConfirm && d.ChallengeID != "":
			confirmed++
		case d.Outcome == portcullis.OutcomeDeny && d.Code == portcullis.CodePendingLimit && !d.FailClosed:
			refused++
			if d.ChallengeID != "" || !strings.Contains(d.Reason, `3 requests from agent "flood" are already waiting for a person`) {
				t.Fatalf("Decide(flood %d) = %+v; want no challenge and a reason naming the 3 waiting requests", i, d)
			}
		default:
			t.Fatalf("Decide(flood %d) = %s/%s (%s); want confirm or deny/PENDING_LIMIT", i, d.Outcome, d.Code, d.Reason)
		}
	}
	if confirmed != 3 || refused != 7 {
		t.Fatalf("10 calls with a cap of 3: %d confirmed, %d refused; want 3 and 7", confirmed, refused)
	}
	var capNotices []portcullis.Notice
	for _, n := range rec.Notices() {
		if n.Kind == portcullis.NoticePendingLimit {
			capNotices = append(capNotices, n)
		}
	}
	if len(capNotices) != 1 || capNotices[0].Agent != "flood" || !strings.Contains(capNotices[0].Reason, "3 approval requests waiting") {
		t.Fatalf("pending-limit notices = %+v; want exactly one, for agent flood", capNotices)
	}
	// The same refused call again is refused the same way, not stopped as
	// a retry loop: it may pass once a person has answered.
	for range 2 {
		if d := decide(t, g, call("flood", 9)); d.Outcome != portcullis.OutcomeDeny || d.Code != portcullis.CodePendingLimit {
			t.Fatalf("Decide(flood, the refused call again) = %s/%s; want deny/PENDING_LIMIT", d.Outcome, d.Code)
		}
	}
	if d := decide(t, g, call("other", 0)); d.Outcome != portcullis.OutcomeConfirm || d.ChallengeID == "" {
		t.Fatalf("Decide(another agent during the flood) = %s/%s; want confirm with a request", d.Outcome, d.Code)
	}
	// A person answers one: the agent may ask again, and a new flood is
	// told again, once.
	waiting, err := st.Approvals(ctx, portcullis.ApprovalFilter{Status: portcullis.ApprovalPending, Agent: "flood"})
	if err != nil || len(waiting) != 3 {
		t.Fatalf("waiting requests of the flood = %d, %v; want 3", len(waiting), err)
	}
	if _, err := g.DenyApproval(ctx, waiting[0].ID, "ana", "no"); err != nil {
		t.Fatal(err)
	}
	if d := decide(t, g, call("flood", 20)); d.Outcome != portcullis.OutcomeConfirm {
		t.Fatalf("Decide(flood, after a person answered one) = %s/%s; want confirm", d.Outcome, d.Code)
	}
	if d := decide(t, g, call("flood", 21)); d.Code != portcullis.CodePendingLimit {
		t.Fatalf("Decide(flood, full again) = %s/%s; want PENDING_LIMIT", d.Outcome, d.Code)
	}
	count := 0
	for _, n := range rec.Notices() {
		if n.Kind == portcullis.NoticePendingLimit {
			count++
		}
	}
	if count != 2 {
		t.Fatalf("pending-limit notices after a second flood = %d; want 2", count)
	}
	// Explain changes nothing and is not refused: it makes no request.
	if d, err := g.Explain(ctx, call("flood", 30)); err != nil || d.Outcome != portcullis.OutcomeConfirm {
		t.Fatalf("Explain(flood) = %s/%s, %v; want confirm", d.Outcome, d.Code, err)
	}
}

// TestPendingCapPerSession: a session's cap refuses that session's next
// request, naming the session, while another session of the same agent is
// still asked.
func TestPendingCapPerSession(t *testing.T) {
	clock := newClock()
	st := memstore.New(clock)
	rec := &noticetest.Recorder{}
	g := mustGate(t, grantsPolicy+"approvals: {maxPendingPerSession: 2}\n", gate.WithStore(st), gate.WithClock(clock), gate.WithNotifier(rec))
	call := func(session string, i int) portcullis.Call {
		return portcullis.Call{Tool: "delete_element", Args: map[string]any{"name": fmt.Sprint(i)}, Session: session, Agent: "bot"}
	}
	for i := range 2 {
		if d := decide(t, g, call("s1", i)); d.Outcome != portcullis.OutcomeConfirm {
			t.Fatalf("Decide(s1, %d) = %s/%s; want confirm", i, d.Outcome, d.Code)
		}
	}
	d := decide(t, g, call("s1", 2))
	if d.Outcome != portcullis.OutcomeDeny || d.Code != portcullis.CodePendingLimit || !strings.Contains(d.Reason, `2 requests from this session of agent "bot"`) {
		t.Fatalf("Decide(s1, past its cap) = %s/%s (%s); want deny/PENDING_LIMIT naming the session", d.Outcome, d.Code, d.Reason)
	}
	if n := rec.Last(t, portcullis.NoticePendingLimit); n.Session != "s1" || !strings.Contains(n.Reason, "approvals.maxPendingPerSession: 2") {
		t.Fatalf("pending-limit notice = %+v; want one about session s1 and its cap", n)
	}
	if d := decide(t, g, call("s2", 3)); d.Outcome != portcullis.OutcomeConfirm {
		t.Fatalf("Decide(another session of the agent) = %s/%s; want confirm", d.Outcome, d.Code)
	}
}
