// Package storetest is the conformance suite every portcullis.Store must
// pass: memstore, sqlite and postgres run the same tests, so they keep the
// same semantics (litestream runs one suite against every backend the same
// way).
//
// It imports only the root package and the standard library. It must not
// test what is particular to one backend (files, migrations, connection
// loss): those tests live beside the backend.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
)

// Opener returns a new, empty store whose expiry follows clock. The suite
// closes the store when the test ends.
type Opener func(t testing.TB, clock portcullis.Clock) portcullis.Store

// Clock is a settable clock for the suite and for backend tests.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock at a fixed instant.
func NewClock() *Clock {
	return &Clock{now: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Run runs the whole suite against stores from open.
func Run(t *testing.T, open Opener) {
	tests := []struct {
		name string
		fn   func(t *testing.T, open Opener)
	}{
		{"Grants", testGrants},
		{"GrantExpiry", testGrantExpiry},
		{"SingleUseGrantConcurrency", testSingleUseConcurrency},
		{"Approvals", testApprovals},
		{"ApprovalDecidedOnce", testApprovalDecidedOnce},
		{"PendingCaps", testPendingCaps},
		{"PendingCapConcurrency", testPendingCapConcurrency},
		{"Blocks", testBlocks},
		{"Challenges", testChallenges},
		{"FailedAttempts", testFailedAttempts},
		{"RunState", testRunState},
		{"Denials", testDenials},
		{"ToolPins", testToolPins},
		{"AuditAppendAndVerify", testAuditAppend},
		{"AuditConcurrentAppends", testAuditConcurrent},
		{"AuditQuery", testAuditQuery},
		{"AuditPrune", testAuditPrune},
		{"Budgets", testBudgets},
		{"BudgetConcurrency", testBudgetConcurrency},
		{"Watch", testWatch},
		{"CanceledContext", testCanceled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open) })
	}
}

func newStore(t *testing.T, open Opener) (portcullis.Store, *Clock) {
	t.Helper()
	clock := NewClock()
	s := open(t, clock)
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s, clock
}

// res carries a value and an error so a call can be checked in one
// expression: r(s.AddGrant(ctx, g)).must(t).
type res[T any] struct {
	v   T
	err error
}

func r[T any](v T, err error) res[T] { return res[T]{v, err} }

func (x res[T]) must(t *testing.T) T {
	t.Helper()
	if x.err != nil {
		t.Fatal(x.err)
	}
	return x.v
}

func noErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantCode(t *testing.T, what string, err error, code portcullis.Code) {
	t.Helper()
	if got := portcullis.ErrorCode(err); got != code {
		t.Fatalf("%s: error %v (code %q); want code %s", what, err, got, code)
	}
}

func digest(t *testing.T, args map[string]any) string {
	t.Helper()
	return r(portcullis.ArgsDigest(args)).must(t)
}

func testGrants(t *testing.T, open Opener) {
	ctx := context.Background()
	s, clock := newStore(t, open)
	args := map[string]any{"path": "/tmp/a", "n": json.Number("2")}
	single := r(s.AddGrant(ctx, portcullis.Grant{Kind: portcullis.GrantSingle, Tool: "write_file", Session: "s1", Args: args, GrantedBy: "ana"})).must(t)
	if single.ID == "" || single.ArgsDigest != digest(t, args) || !single.CreatedAt.Equal(clock.Now()) || single.Args != nil {
		t.Fatalf("AddGrant(single) = %+v; want an id, the digest, CreatedAt = now, no args", single)
	}
	session := r(s.AddGrant(ctx, portcullis.Grant{Kind: portcullis.GrantSession, Tool: "create", Session: "s1", ElementType: "persona"})).must(t)
	anyGrant := r(s.AddGrant(ctx, portcullis.Grant{Kind: portcullis.GrantSession, Tool: "sync", Session: "s1"})).must(t)
	if _, err := s.AddGrant(ctx, portcullis.Grant{Kind: "forever", Tool: "x"}); err == nil {
		t.Fatal("AddGrant(unknown kind) succeeded")
	}
	if _, err := s.AddGrant(ctx, portcullis.Grant{Kind: portcullis.GrantSession}); err == nil {
		t.Fatal("AddGrant(no tool) succeeded")
	}

	use := func(q portcullis.GrantQuery) (portcullis.Grant, bool) {
		t.Helper()
		q.Now = clock.Now()
		g, ok, err := s.UseGrant(ctx, q)
		if err != nil {
			t.Fatalf("UseGrant(%+v): %v", q, err)
		}
		return g, ok
	}
	for _, tc := range []struct {
		name string
		q    portcullis.GrantQuery
		want string // grant id, "" for none
	}{
		{"session grant, its element type", portcullis.GrantQuery{Session: "s1", Tool: "create", ElementType: "persona", Level: portcullis.ConfirmSession}, session.ID},
		{"session grant, other element type", portcullis.GrantQuery{Session: "s1", Tool: "create", ElementType: "skill", Level: portcullis.ConfirmSession}, ""},
		{"session grant without type covers any", portcullis.GrantQuery{Session: "s1", Tool: "sync", ElementType: "skill", Level: portcullis.ConfirmSession}, anyGrant.ID},
		{"session grant never covers single use", portcullis.GrantQuery{Session: "s1", Tool: "sync", Level: portcullis.ConfirmSingleUse}, ""},
		{"other session", portcullis.GrantQuery{Session: "s2", Tool: "sync", Level: portcullis.ConfirmSession}, ""},
		{"other tool", portcullis.GrantQuery{Session: "s1", Tool: "delete", Level: portcullis.ConfirmSession}, ""},
		{"single, other args", portcullis.GrantQuery{Session: "s1", Tool: "write_file", ArgsDigest: digest(t, map[string]any{"path": "/tmp/b"}), Level: portcullis.ConfirmSingleUse, Consume: true}, ""},
		{"single, peek", portcullis.GrantQuery{Session: "s1", Tool: "write_file", ArgsDigest: single.ArgsDigest, Level: portcullis.ConfirmSingleUse}, single.ID},
		{"single, peek again", portcullis.GrantQuery{Session: "s1", Tool: "write_file", ArgsDigest: single.ArgsDigest, Level: portcullis.ConfirmSingleUse}, single.ID},
		{"single, consume", portcullis.GrantQuery{Session: "s1", Tool: "write_file", ArgsDigest: single.ArgsDigest, Level: portcullis.ConfirmSingleUse, Consume: true}, single.ID},
		{"single, used up", portcullis.GrantQuery{Session: "s1", Tool: "write_file", ArgsDigest: single.ArgsDigest, Level: portcullis.ConfirmSingleUse, Consume: true}, ""},
	} {
		g, ok := use(tc.q)
		if got := map[bool]string{true: g.ID, false: ""}[ok]; got != tc.want {
			t.Errorf("%s: UseGrant = %q; want %q", tc.name, got, tc.want)
		}
	}

	// A single-use grant also satisfies CONFIRM_SESSION, but a session grant
	// for the same call is preferred and the single one is kept.
	single2 := r(s.AddGrant(ctx, portcullis.Grant{Kind: portcullis.GrantSingle, Tool: "sync", Session: "s1", ArgsDigest: digest(t, nil)})).must(t)
	if g, ok := use(portcullis.GrantQuery{Session: "s1", Tool: "sync", ArgsDigest: digest(t, nil), Level: portcullis.ConfirmSession, Consume: true}); !ok || g.ID != anyGrant.ID {
		t.Fatalf("UseGrant(session level with both grants) = %q, %v; want the session grant %q", g.ID, ok, anyGrant.ID)
	}
	if g, ok := use(portcullis.GrantQuery{Session: "s1", Tool: "sync", ArgsDigest: digest(t, nil), Level: portcullis.ConfirmSingleUse, Consume: true}); !ok || g.ID != single2.ID {
		t.Fatalf("UseGrant(single level) = %q, %v; want %q", g.ID, ok, single2.ID)
	}

	list := r(s.Grants(ctx, "s1", clock.Now())).must(t)
	ids := make([]string, len(list))
	for i, g := range list {
		ids[i] = g.ID
	}
	sort.Strings(ids)
	want := []string{session.ID, anyGrant.ID}
	sort.Strings(want)
	if fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Fatalf("Grants(s1) = %v; want %v", ids, want)
	}
	if got := r(s.Grants(ctx, "s2", clock.Now())).must(t); len(got) != 0 {
		t.Fatalf("Grants(s2) = %v; want none", got)
	}
	if err := s.RevokeGrant(ctx, session.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok := use(portcullis.GrantQuery{Session: "s1", Tool: "create", ElementType: "persona", Level: portcullis.ConfirmSession}); ok {
		t.Fatal("revoked grant still covers")
	}
	wantCode(t, "RevokeGrant(revoked)", s.RevokeGrant(ctx, session.ID), portcullis.CodeNotFound)
}

func testGrantExpiry(t *testing.T, open Opener) {
	ctx := context.Background()
	s, clock := newStore(t, open)
	g := r(s.AddGrant(ctx, portcullis.Grant{Kind: portcullis.GrantSession, Tool: "t", Session: "s", ExpiresAt: clock.Now().Add(time.Hour)})).must(t)
	q := portcullis.GrantQuery{Session: "s", Tool: "t", Level: portcullis.ConfirmSession}
	q.Now = clock.Now().Add(time.Hour - time.Nanosecond)
	if _, ok, err := s.UseGrant(ctx, q); err != nil || !ok {
		t.Fatalf("UseGrant just before expiry = %v, %v; want found", ok, err)
	}
	clock.Advance(time.Hour)
	q.Now = clock.Now()
	if _, ok, err := s.UseGrant(ctx, q); err != nil || ok {
		t.Fatalf("UseGrant at expiry = %v, %v; want not found", ok, err)
	}
	if got := r(s.Grants(ctx, "", clock.Now())).must(t); len(got) != 0 {
		t.Fatalf("Grants after expiry = %v; want none (grant %s expired)", got, g.ID)
	}
}

func testSingleUseConcurrency(t *testing.T, open Opener) {
	ctx := context.Background()
	s, clock := newStore(t, open)
	const grants, callers = 3, 48
	d := digest(t, map[string]any{"x": "1"})
	for range grants {
		r(s.AddGrant(ctx, portcullis.Grant{Kind: portcullis.GrantSingle, Tool: "t", Session: "s", ArgsDigest: d})).must(t)
	}
	var used atomic.Int32
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, ok, err := s.UseGrant(ctx, portcullis.GrantQuery{Session: "s", Tool: "t", ArgsDigest: d, Level: portcullis.ConfirmSingleUse, Consume: true, Now: clock.Now()})
			if err != nil {
				t.Error(err)
			}
			if ok {
				used.Add(1)
			}
		}()
	}
	wg.Wait()
	if got := used.Load(); got != grants {
		t.Fatalf("%d concurrent callers used %d single-use grants; want exactly %d", callers, got, grants)
	}
}

func approval(clock *Clock, id, session, agent string) portcullis.Approval {
	return portcullis.Approval{
		ID: id, DecisionID: "d-" + id, Status: portcullis.ApprovalPending,
		Call: portcullis.Call{Tool: "write_file", Session: session, Agent: agent, Args: map[string]any{"path": "/tmp/x", "n": json.Number("1.50")}},
		Tool: "write_file", ArgsDigest: "sha256:abc", Level: portcullis.ConfirmSingleUse,
		Reason: "write /tmp/x", CreatedAt: clock.Now(), ExpiresAt: clock.Now().Add(10 * time.Minute),
	}
}

func sameApproval(t *testing.T, what string, got, want portcullis.Approval) {
	t.Helper()
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(want)
	if string(gb) != string(wb) {
		t.Fatalf("%s:\n got %s\nwant %s", what, gb, wb)
	}
}

func testApprovals(t *testing.T, open Opener) {
	ctx := context.Background()
	s, clock := newStore(t, open)
	a1 := approval(clock, "apr_1", "s1", "bot")
	if err := s.CreateApproval(ctx, a1); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateApproval(ctx, a1); err == nil {
		t.Fatal("CreateApproval(duplicate id) succeeded")
	}
	if err := s.CreateApproval(ctx, portcullis.Approval{Status: portcullis.ApprovalPending}); err == nil {
		t.Fatal("CreateApproval(no id) succeeded")
	}
	sameApproval(t, "Approval(apr_1)", r(s.Approval(ctx, "apr_1")).must(t), a1)
	_, err := s.Approval(ctx, "apr_none")
	wantCode(t, "Approval(missing)", err, portcullis.CodeNotFound)

	clock.Advance(time.Second)
	a2 := approval(clock, "apr_2", "s2", "bot")
	noErr(t, s.CreateApproval(ctx, a2))
	clock.Advance(time.Second)
	a3 := approval(clock, "apr_3", "s1", "other")
	noErr(t, s.CreateApproval(ctx, a3))

	list := func(f portcullis.ApprovalFilter) string {
		t.Helper()
		var ids []string
		for _, a := range r(s.Approvals(ctx, f)).must(t) {
			ids = append(ids, a.ID)
		}
		return fmt.Sprint(ids)
	}
	for _, tc := range []struct {
		f    portcullis.ApprovalFilter
		want string
	}{
		{portcullis.ApprovalFilter{}, "[apr_3 apr_2 apr_1]"},
		{portcullis.ApprovalFilter{Session: "s1"}, "[apr_3 apr_1]"},
		{portcullis.ApprovalFilter{Agent: "bot"}, "[apr_2 apr_1]"},
		{portcullis.ApprovalFilter{Limit: 1}, "[apr_3]"},
		{portcullis.ApprovalFilter{DecisionID: "d-apr_2"}, "[apr_2]"},
		{portcullis.ApprovalFilter{DecisionID: "d-apr_2", Agent: "other"}, "[]"},
		{portcullis.ApprovalFilter{DecisionID: "d-none"}, "[]"},
		{portcullis.ApprovalFilter{Status: portcullis.ApprovalPending}, "[apr_3 apr_2 apr_1]"},
	} {
		if got := list(tc.f); got != tc.want {
			t.Errorf("Approvals(%+v) = %s; want %s", tc.f, got, tc.want)
		}
	}

	// Approving with a grant records both.
	g := &portcullis.Grant{Kind: portcullis.GrantSingle, Tool: "write_file", Session: "s1", ArgsDigest: "sha256:abc", GrantedBy: "ana"}
	got, err := s.DecideApproval(ctx, "apr_1", portcullis.ApprovalDecision{Status: portcullis.ApprovalApproved, By: "ana", At: clock.Now(), Grant: g})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != portcullis.ApprovalApproved || got.DecidedBy != "ana" || !got.DecidedAt.Equal(clock.Now()) {
		t.Fatalf("DecideApproval = %+v; want approved by ana now", got)
	}
	if _, ok, err := s.UseGrant(ctx, portcullis.GrantQuery{Session: "s1", Tool: "write_file", ArgsDigest: "sha256:abc", Level: portcullis.ConfirmSingleUse, Now: clock.Now()}); err != nil || !ok {
		t.Fatalf("grant of the approval: %v, %v; want it recorded", ok, err)
	}
	got, err = s.DecideApproval(ctx, "apr_2", portcullis.ApprovalDecision{Status: portcullis.ApprovalDenied, By: "bo", Reason: "not today", At: clock.Now()})
	if err != nil || got.Status != portcullis.ApprovalDenied || got.DenyReason != "not today" {
		t.Fatalf("DecideApproval(deny) = %+v, %v", got, err)
	}
	if l := list(portcullis.ApprovalFilter{Status: portcullis.ApprovalPending}); l != "[apr_3]" {
		t.Fatalf("pending after decisions = %s; want [apr_3]", l)
	}
	_, err = s.DecideApproval(ctx, "apr_1", portcullis.ApprovalDecision{Status: portcullis.ApprovalDenied, By: "bo", At: clock.Now()})
	wantCode(t, "DecideApproval(already approved)", err, portcullis.CodeConflict)
	_, err = s.DecideApproval(ctx, "apr_none", portcullis.ApprovalDecision{Status: portcullis.ApprovalDenied, At: clock.Now()})
	wantCode(t, "DecideApproval(missing)", err, portcullis.CodeNotFound)
	_, err = s.DecideApproval(ctx, "apr_3", portcullis.ApprovalDecision{Status: portcullis.ApprovalPending, At: clock.Now()})
	wantCode(t, "DecideApproval(status pending)", err, portcullis.CodeInvalidRequest)

	clock.Advance(10 * time.Minute)
	if a := r(s.Approval(ctx, "apr_3")).must(t); a.Status != portcullis.ApprovalExpired {
		t.Fatalf("Approval past expiry = %s; want expired", a.Status)
	}
	if l := list(portcullis.ApprovalFilter{Status: portcullis.ApprovalExpired}); l != "[apr_3]" {
		t.Fatalf("expired approvals = %s; want [apr_3]", l)
	}
	_, err = s.DecideApproval(ctx, "apr_3", portcullis.ApprovalDecision{Status: portcullis.ApprovalApproved, At: clock.Now()})
	wantCode(t, "DecideApproval(expired)", err, portcullis.CodeConflict)
}

func testApprovalDecidedOnce(t *testing.T, open Opener) {
	ctx := context.Background()
	s, clock := newStore(t, open)
	noErr(t, s.CreateApproval(ctx, approval(clock, "apr_race", "s", "bot")))
	const deciders = 24
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range deciders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status := portcullis.ApprovalApproved
			if i%2 == 1 {
				status = portcullis.ApprovalDenied
			}
			g := &portcullis.Grant{Kind: portcullis.GrantSingle, Tool: "write_file", Session: "s", ArgsDigest: fmt.Sprintf("sha256:%d", i)}
			_, err := s.DecideApproval(ctx, "apr_race", portcullis.ApprovalDecision{Status: status, By: fmt.Sprint(i), At: clock.Now(), Grant: g})
			switch portcullis.ErrorCode(err) {
			case "":
				if err == nil {
					wins.Add(1)
				} else {
					t.Error(err)
				}
			case portcullis.CodeConflict:
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if got := wins.Load(); got != 1 {
		t.Fatalf("%d concurrent deciders: %d won; want exactly 1", deciders, got)
	}
	if n := len(r(s.Grants(ctx, "s", clock.Now())).must(t)); n != 1 {
		t.Fatalf("grants after the race = %d; want exactly the winner's 1", n)
	}
}

// admit calls CreateApprovalWithin and checks what it did.
func admit(t *testing.T, s portcullis.Store, a portcullis.Approval, lim portcullis.PendingLimit, want portcullis.Admission) {
	t.Helper()
	got, err := s.CreateApprovalWithin(context.Background(), a, lim)
	if err != nil {
		t.Fatalf("CreateApprovalWithin(%s, agent %q, session %q) = %v", a.ID, a.Call.Agent, a.Call.Session, err)
	}
	if got != want {
		t.Fatalf("CreateApprovalWithin(%s, agent %q, session %q) = %+v; want %+v", a.ID, a.Call.Agent, a.Call.Session, got, want)
	}
}

func pendingCounts(t *testing.T, s portcullis.Store) string {
	t.Helper()
	b, err := json.Marshal(r(s.PendingCounts(context.Background())).must(t))
	noErr(t, err)
	return string(b)
}

func testPendingCaps(t *testing.T, open Opener) {
	ctx := context.Background()
	s, clock := newStore(t, open)
	lim := portcullis.PendingLimit{PerAgent: 3, PerSession: 2}
	created := portcullis.Admission{Created: true}
	if got := pendingCounts(t, s); got != "[]" {
		t.Fatalf("PendingCounts(empty store) = %s; want []", got)
	}

	a1 := approval(clock, "apr_1", "s1", "bot")
	admit(t, s, a1, lim, created)
	sameApproval(t, "Approval(apr_1) after CreateApprovalWithin", r(s.Approval(ctx, "apr_1")).must(t), a1)
	clock.Advance(time.Second)
	admit(t, s, approval(clock, "apr_2", "s1", "bot"), lim, created)
	// The session is full: the first refusal says to tell a person, the
	// next ones do not.
	admit(t, s, approval(clock, "apr_3", "s1", "bot"), lim, portcullis.Admission{Scope: portcullis.PendingScopeSession, Pending: 2, Notify: true})
	admit(t, s, approval(clock, "apr_4", "s1", "bot"), lim, portcullis.Admission{Scope: portcullis.PendingScopeSession, Pending: 2})
	_, err := s.Approval(ctx, "apr_3")
	wantCode(t, "Approval(refused apr_3)", err, portcullis.CodeNotFound)
	// Another session of the agent still has room, up to the agent's cap.
	admit(t, s, approval(clock, "apr_5", "s2", "bot"), lim, created)
	admit(t, s, approval(clock, "apr_6", "s3", "bot"), lim, portcullis.Admission{Scope: portcullis.PendingScopeAgent, Pending: 3, Notify: true})
	admit(t, s, approval(clock, "apr_7", "s4", "bot"), lim, portcullis.Admission{Scope: portcullis.PendingScopeAgent, Pending: 3})
	// A session is counted within its agent: another agent naming the
	// same session is not refused.
	admit(t, s, approval(clock, "apr_8", "s1", "other"), lim, created)
	if got, want := pendingCounts(t, s), `[{"agent":"bot","pending":3},{"agent":"other","pending":1}]`; got != want {
		t.Fatalf("PendingCounts = %s; want %s", got, want)
	}

	// A person answers one: there is room for one more, and the next
	// refusal tells a person again.
	r(s.DecideApproval(ctx, "apr_5", portcullis.ApprovalDecision{Status: portcullis.ApprovalDenied, By: "ann", At: clock.Now()})).must(t)
	admit(t, s, approval(clock, "apr_9", "s5", "bot"), lim, created)
	admit(t, s, approval(clock, "apr_10", "s6", "bot"), lim, portcullis.Admission{Scope: portcullis.PendingScopeAgent, Pending: 3, Notify: true})
	// The full session's notice is still owed to nobody: it was given.
	admit(t, s, approval(clock, "apr_11", "s1", "bot"), lim, portcullis.Admission{Scope: portcullis.PendingScopeAgent, Pending: 3})

	// Zero limits do not cap.
	admit(t, s, approval(clock, "apr_12", "s1", "bot"), portcullis.PendingLimit{}, created)
	// Expired requests do not count.
	clock.Advance(time.Hour)
	if got := pendingCounts(t, s); got != "[]" {
		t.Fatalf("PendingCounts after every request expired = %s; want []", got)
	}
	admit(t, s, approval(clock, "apr_13", "s1", "bot"), lim, created)

	_, err = s.CreateApprovalWithin(ctx, approval(clock, "apr_13", "s9", "bot"), lim)
	wantCode(t, "CreateApprovalWithin(duplicate id)", err, portcullis.CodeConflict)
	_, err = s.CreateApprovalWithin(ctx, portcullis.Approval{Status: portcullis.ApprovalPending}, lim)
	wantCode(t, "CreateApprovalWithin(no id)", err, portcullis.CodeInvalidRequest)
	decided := approval(clock, "apr_14", "s9", "bot")
	decided.Status = portcullis.ApprovalApproved
	_, err = s.CreateApprovalWithin(ctx, decided, lim)
	wantCode(t, "CreateApprovalWithin(status approved)", err, portcullis.CodeInvalidRequest)
}

// testPendingCapConcurrency: many concurrent requests of one agent never
// leave more pending than the cap, and exactly one refusal asks for a
// notice; another agent is not refused.
func testPendingCapConcurrency(t *testing.T, open Opener) {
	ctx := context.Background()
	s, clock := newStore(t, open)
	const limit, callers = 5, 40
	lim := portcullis.PendingLimit{PerAgent: limit, PerSession: limit}
	var created, notified atomic.Int32
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Half in one session, half each in its own.
			session := "s"
			if i%2 == 1 {
				session = fmt.Sprintf("s%d", i)
			}
			adm, err := s.CreateApprovalWithin(ctx, approval(clock, fmt.Sprintf("apr_%d", i), session, "flood"), lim)
			if err != nil {
				t.Error(err)
				return
			}
			if adm.Created {
				created.Add(1)
			}
			if adm.Notify {
				notified.Add(1)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		adm, err := s.CreateApprovalWithin(ctx, approval(clock, "apr_other", "s", "other"), lim)
		if err != nil || !adm.Created {
			t.Errorf("CreateApprovalWithin(another agent, during the flood) = %+v, %v; want created", adm, err)
		}
	}()
	wg.Wait()
	if got := created.Load(); got != limit {
		t.Errorf("%d concurrent requests of one agent, cap %d: %d created; want exactly %d", callers, limit, got, limit)
	}
	// With equal caps the agent's is reached first (a session's requests
	// are some of its agent's): one cap, one notice.
	if got := notified.Load(); got != 1 {
		t.Errorf("%d refusals asked for %d notices; want exactly 1", callers-limit, got)
	}
	n := len(r(s.Approvals(ctx, portcullis.ApprovalFilter{Status: portcullis.ApprovalPending, Agent: "flood", Limit: 1000})).must(t))
	if n != limit {
		t.Errorf("pending requests of the flooding agent = %d; want %d", n, limit)
	}
}

func testBlocks(t *testing.T, open Opener) {
	ctx := context.Background()
	s, clock := newStore(t, open)
	if _, ok, err := s.Block(ctx, "bot"); err != nil || ok {
		t.Fatalf("Block(unblocked) = %v, %v", ok, err)
	}
	b := portcullis.Block{Agent: "bot", Reason: "risk 95", ChallengeID: "chl_1", DecisionID: "d1", CreatedAt: clock.Now()}
	noErr(t, s.PutBlock(ctx, b))
	clock.Advance(time.Second)
	noErr(t, s.PutBlock(ctx, portcullis.Block{Agent: "aaa", Reason: "r", ChallengeID: "chl_2", CreatedAt: clock.Now()}))
	got, ok, err := s.Block(ctx, "bot")
	if err != nil || !ok || got.Reason != b.Reason || got.ChallengeID != b.ChallengeID || got.DecisionID != b.DecisionID || !got.CreatedAt.Equal(b.CreatedAt) {
		t.Fatalf("Block(bot) = %+v, %v, %v; want %+v", got, ok, err, b)
	}
	b.ChallengeID = "chl_3"
	noErr(t, s.PutBlock(ctx, b))
	if got, _, _ := s.Block(ctx, "bot"); got.ChallengeID != "chl_3" {
		t.Fatalf("PutBlock did not replace: challenge %q", got.ChallengeID)
	}
	all := r(s.Blocks(ctx)).must(t)
	if len(all) != 2 || all[0].Agent != "bot" || all[1].Agent != "aaa" {
		t.Fatalf("Blocks = %+v; want bot then aaa (oldest first)", all)
	}
	noErr(t, s.DeleteBlock(ctx, "bot"))
	if _, ok, _ := s.Block(ctx, "bot"); ok {
		t.Fatal("deleted block still there")
	}
	wantCode(t, "DeleteBlock(none)", s.DeleteBlock(ctx, "bot"), portcullis.CodeNotFound)
}

func testChallenges(t *testing.T, open Opener) {
	ctx := context.Background()
	s, clock := newStore(t, open)
	c := portcullis.Challenge{ID: "chl_1", Agent: "bot", Salt: "00ff", CodeHash: "abcd", Reason: "r", CreatedAt: clock.Now(), ExpiresAt: clock.Now().Add(5 * time.Minute)}
	noErr(t, s.CreateChallenge(ctx, c))
	if err := s.CreateChallenge(ctx, c); err == nil {
		t.Fatal("CreateChallenge(duplicate) succeeded")
	}
	got := r(s.Challenge(ctx, "chl_1")).must(t)
	if got.Agent != c.Agent || got.Salt != c.Salt || got.CodeHash != c.CodeHash || !got.ExpiresAt.Equal(c.ExpiresAt) || !got.CreatedAt.Equal(c.CreatedAt) {
		t.Fatalf("Challenge = %+v; want %+v", got, c)
	}
	noErr(t, s.DeleteChallenge(ctx, "chl_1"))
	_, err := s.Challenge(ctx, "chl_1")
	wantCode(t, "Challenge(deleted)", err, portcullis.CodeNotFound)
}

func testFailedAttempts(t *testing.T, open Opener) {
	ctx := context.Background()
	s, clock := newStore(t, open)
	start := clock.Now()
	for i := 1; i <= 3; i++ {
		n := r(s.AddFailedAttempt(ctx, "bot", clock.Now(), clock.Now().Add(-time.Minute))).must(t)
		if n != i {
			t.Fatalf("AddFailedAttempt #%d = %d; want %d", i, n, i)
		}
		clock.Advance(20 * time.Second)
	}
	if n := r(s.FailedAttempts(ctx, "other", start)).must(t); n != 0 {
		t.Fatalf("FailedAttempts(other) = %d; want 0", n)
	}
	// Counting since start+1s finds the 2nd and 3rd (since is inclusive).
	if n := r(s.FailedAttempts(ctx, "bot", start.Add(time.Second))).must(t); n != 2 {
		t.Fatalf("FailedAttempts(window) = %d; want 2", n)
	}
	clock.Advance(time.Second) // the window is [now-1m, now]: the first attempt is now out of it
	if n := r(s.AddFailedAttempt(ctx, "bot", clock.Now(), clock.Now().Add(-time.Minute))).must(t); n != 3 {
		t.Fatalf("AddFailedAttempt after a minute = %d; want 3 (the first has left the window)", n)
	}
}

func testRunState(t *testing.T, open Opener) {
	ctx := context.Background()
	s, clock := newStore(t, open)
	if _, ok, err := s.RunState(ctx, "r1"); err != nil || ok {
		t.Fatalf("RunState(new) = %v, %v", ok, err)
	}
	before := r(s.RecordStep(ctx, "r1", "bot", clock.Now())).must(t)
	if before.Steps != 0 || before.LastOutcome != "" {
		t.Fatalf("first RecordStep returned %+v; want the empty state before it", before)
	}
	wantCode(t, "RecordOutcome(unknown run)", s.RecordOutcome(ctx, "r-none", portcullis.StepFailure, clock.Now()), portcullis.CodeNotFound)
	noErr(t, s.RecordOutcome(ctx, "r1", portcullis.StepFailure, clock.Now()))
	before = r(s.RecordStep(ctx, "r1", "bot", clock.Now())).must(t)
	if before.Steps != 1 || before.LastOutcome != portcullis.StepFailure || before.Agent != "bot" {
		t.Fatalf("second RecordStep returned %+v; want 1 step, last failure", before)
	}
	const n = 40
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.RecordStep(ctx, "r2", "bot", clock.Now()); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	st, ok, err := s.RunState(ctx, "r2")
	if err != nil || !ok || st.Steps != n {
		t.Fatalf("RunState after %d concurrent steps = %+v, %v, %v", n, st, ok, err)
	}
}

func testDenials(t *testing.T, open Opener) {
	ctx := context.Background()
	s, clock := newStore(t, open)
	for i := 1; i <= 3; i++ {
		if n := r(s.RecordDenial(ctx, "r1", "sig-a", clock.Now())).must(t); n != i {
			t.Fatalf("RecordDenial #%d = %d", i, n)
		}
	}
	if n := r(s.RecordDenial(ctx, "r1", "sig-b", clock.Now())).must(t); n != 1 {
		t.Fatalf("RecordDenial(other signature) = %d; want 1", n)
	}
	if n := r(s.RecordDenial(ctx, "r2", "sig-a", clock.Now())).must(t); n != 1 {
		t.Fatalf("RecordDenial(other run) = %d; want 1", n)
	}
	noErr(t, s.ClearDenials(ctx, "r1"))
	if n := r(s.RecordDenial(ctx, "r1", "sig-a", clock.Now())).must(t); n != 1 {
		t.Fatalf("RecordDenial after clear = %d; want 1", n)
	}
	if n := r(s.RecordDenial(ctx, "r2", "sig-a", clock.Now())).must(t); n != 2 {
		t.Fatalf("clearing r1 touched r2: %d; want 2", n)
	}
}

func testToolPins(t *testing.T, open Opener) {
	ctx := context.Background()
	s, clock := newStore(t, open)
	if _, ok, err := s.ToolPin(ctx, "fs", "read_file"); err != nil || ok {
		t.Fatalf("ToolPin(none) = %v, %v", ok, err)
	}
	p := portcullis.ToolPin{Upstream: "fs", Tool: "read_file", Hash: "sha256:1", Definition: json.RawMessage(`{"description":"reads"}`), FirstSeen: clock.Now(), UpdatedAt: clock.Now()}
	noErr(t, s.PutToolPin(ctx, p))
	noErr(t, s.PutToolPin(ctx, portcullis.ToolPin{Upstream: "fs", Tool: "a_tool", Hash: "sha256:2", Definition: json.RawMessage(`{}`), FirstSeen: clock.Now(), UpdatedAt: clock.Now()}))
	p.PendingHash, p.PendingDefinition = "sha256:3", json.RawMessage(`{"description":"reads, and also sends"}`)
	noErr(t, s.PutToolPin(ctx, p))
	got, ok, err := s.ToolPin(ctx, "fs", "read_file")
	if err != nil || !ok || got.Hash != p.Hash || got.PendingHash != p.PendingHash || string(got.PendingDefinition) != string(p.PendingDefinition) || string(got.Definition) != string(p.Definition) {
		t.Fatalf("ToolPin = %+v, %v, %v; want %+v", got, ok, err, p)
	}
	all := r(s.ToolPins(ctx)).must(t)
	if len(all) != 2 || all[0].Tool != "a_tool" || all[1].Tool != "read_file" {
		t.Fatalf("ToolPins = %+v; want a_tool, read_file", all)
	}
}

func event(i int, clock *Clock, session, agent, tool string, outcome portcullis.Outcome) portcullis.AuditEvent {
	return portcullis.AuditEvent{
		Kind: portcullis.AuditDecision, Time: clock.Now(), DecisionID: fmt.Sprintf("d%d", i),
		Session: session, Agent: agent, Tool: tool, Outcome: outcome,
		Request:    &portcullis.Call{Tool: tool, Session: session, Args: map[string]any{"i": json.Number(fmt.Sprint(i))}},
		Decision:   &portcullis.Decision{DecisionID: fmt.Sprintf("d%d", i), Outcome: outcome, PermissionLevel: portcullis.AutoApprove},
		PolicyHash: "sha256:p", LatencyNS: int64(1000 + i),
	}
}

func verify(t *testing.T, s portcullis.Store) portcullis.AuditVerification {
	t.Helper()
	var cp *portcullis.AuditCheckpoint
	if c, ok, err := s.AuditCheckpoint(context.Background()); err != nil {
		t.Fatal(err)
	} else if ok {
		cp = &c
	}
	v, err := portcullis.VerifyAudit(context.Background(), s, cp)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func testAuditAppend(t *testing.T, open Opener) {
	ctx := context.Background()
	s, clock := newStore(t, open)
	if v := verify(t, s); !v.OK() || v.Rows != 0 {
		t.Fatalf("empty log verifies as %+v", v)
	}
	ev := event(1, clock, "s1", "bot", "list", portcullis.OutcomeAllow)
	ev.Validator = &portcullis.ValidatorRecord{Provider: "anthropic", Model: "m", PromptHash: "sha256:x", Verdict: "allow", Confidence: 0.9, LatencyNS: 5}
	recs := r(s.AppendAudit(ctx, ev)).must(t)
	if len(recs) != 1 || recs[0].Seq != 1 || recs[0].PrevHash != portcullis.GenesisHash {
		t.Fatalf("first AppendAudit = %+v; want seq 1 chained to the genesis hash", recs)
	}
	batch := r(s.AppendAudit(ctx, event(2, clock, "s1", "bot", "a", portcullis.OutcomeDeny), event(3, clock, "s2", "bot", "b", portcullis.OutcomeAllow))).must(t)
	if len(batch) != 2 || batch[0].Seq != 2 || batch[1].Seq != 3 || batch[0].PrevHash != recs[0].Hash || batch[1].PrevHash != batch[0].Hash {
		t.Fatalf("batch AppendAudit = %+v; want seq 2, 3 chained", batch)
	}
	got := r(s.QueryAudit(ctx, portcullis.AuditQuery{})).must(t)
	if len(got) != 3 {
		t.Fatalf("QueryAudit = %d rows; want 3", len(got))
	}
	back, err := got[0].Event()
	if err != nil {
		t.Fatal(err)
	}
	want, _ := portcullis.EncodeAuditBody(&ev)
	if string(got[0].Body) != string(want) {
		t.Fatalf("stored body differs from what was appended:\n got %s\nwant %s", got[0].Body, want)
	}
	if back.Validator == nil || back.Validator.Model != "m" || back.Request.Args["i"] != json.Number("1") {
		t.Fatalf("decoded event = %+v", back)
	}
	if v := verify(t, s); !v.OK() || v.Rows != 3 || v.HeadHash != batch[1].Hash {
		t.Fatalf("VerifyAudit = %+v; want 3 rows ok, head %s", v, batch[1].Hash)
	}
	// ScanAudit returns the columns queries filter on, for VerifyAudit to
	// check against the bodies.
	noErr(t, s.ScanAudit(ctx, 0, func(rec portcullis.AuditRecord) (bool, error) {
		ev, err := rec.Event()
		if err != nil {
			return false, err
		}
		if c := rec.Columns; c == nil || c.Outcome != ev.Outcome || c.Tool != ev.Tool || c.Session != ev.Session || c.DecisionID != ev.DecisionID || !c.Time.Equal(ev.Time.Truncate(max(c.TimeUnit, 1))) {
			t.Errorf("ScanAudit row %d: columns %+v; want those of %s", rec.Seq, c, rec.Body)
		}
		return true, nil
	}))
	if _, err := s.AppendAudit(ctx); err != nil {
		t.Fatalf("AppendAudit() with no events: %v", err)
	}
}

func testAuditConcurrent(t *testing.T, open Opener) {
	ctx := context.Background()
	s, clock := newStore(t, open)
	const writers, each = 32, 20
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, err := s.AppendAudit(ctx, event(w*each+i, clock, fmt.Sprintf("s%d", w), "bot", "t", portcullis.OutcomeAllow)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	v := verify(t, s)
	if !v.OK() || v.Rows != writers*each {
		t.Fatalf("after %d concurrent appends: %+v; want all rows chained", writers*each, v)
	}
}

func testAuditQuery(t *testing.T, open Opener) {
	ctx := context.Background()
	s, clock := newStore(t, open)
	t0 := clock.Now()
	rows := []struct {
		session, agent, tool string
		outcome              portcullis.Outcome
	}{
		{"s1", "a", "read", portcullis.OutcomeAllow},
		{"s1", "a", "write", portcullis.OutcomeConfirm},
		{"s2", "b", "read", portcullis.OutcomeAllow},
		{"s2", "b", "delete", portcullis.OutcomeDeny},
		{"s1", "b", "read", portcullis.OutcomeAllow},
	}
	for i, row := range rows {
		r(s.AppendAudit(ctx, event(i+1, clock, row.session, row.agent, row.tool, row.outcome))).must(t)
		clock.Advance(time.Minute)
	}
	r(s.AppendAudit(ctx, portcullis.AuditEvent{Kind: portcullis.AuditApproval, Time: clock.Now(), Actor: "ana", Detail: "approved apr_1"})).must(t)
	seqs := func(q portcullis.AuditQuery) string {
		t.Helper()
		var out []int64
		for _, r := range r(s.QueryAudit(ctx, q)).must(t) {
			out = append(out, r.Seq)
		}
		return fmt.Sprint(out)
	}
	for _, tc := range []struct {
		name string
		q    portcullis.AuditQuery
		want string
	}{
		{"all", portcullis.AuditQuery{}, "[1 2 3 4 5 6]"},
		{"session", portcullis.AuditQuery{Session: "s1"}, "[1 2 5]"},
		{"agent", portcullis.AuditQuery{Agent: "b"}, "[3 4 5]"},
		{"tool", portcullis.AuditQuery{Tool: "read"}, "[1 3 5]"},
		{"outcome", portcullis.AuditQuery{Outcome: portcullis.OutcomeDeny}, "[4]"},
		{"kind", portcullis.AuditQuery{Kind: portcullis.AuditApproval}, "[6]"},
		{"since", portcullis.AuditQuery{Since: t0.Add(2 * time.Minute)}, "[3 4 5 6]"},
		{"until", portcullis.AuditQuery{Until: t0.Add(2 * time.Minute)}, "[1 2]"},
		{"combined", portcullis.AuditQuery{Session: "s1", Agent: "b", Tool: "read", Outcome: portcullis.OutcomeAllow}, "[5]"},
		{"limit", portcullis.AuditQuery{Limit: 2}, "[1 2]"},
		{"newest", portcullis.AuditQuery{Newest: true, Limit: 2}, "[6 5]"},
		{"newest of session", portcullis.AuditQuery{Session: "s1", Newest: true}, "[5 2 1]"},
		{"after", portcullis.AuditQuery{AfterSeq: 4}, "[5 6]"},
		{"before", portcullis.AuditQuery{BeforeSeq: 3}, "[1 2]"},
		{"page", portcullis.AuditQuery{AfterSeq: 1, BeforeSeq: 5, Limit: 2}, "[2 3]"},
	} {
		if got := seqs(tc.q); got != tc.want {
			t.Errorf("QueryAudit(%s) = %s; want %s", tc.name, got, tc.want)
		}
	}
	var scanned []int64
	if err := s.ScanAudit(ctx, 2, func(r portcullis.AuditRecord) (bool, error) {
		scanned = append(scanned, r.Seq)
		return r.Seq < 4, nil
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(scanned) != "[3 4]" {
		t.Fatalf("ScanAudit(after 2, stop after 4) = %v; want [3 4]", scanned)
	}
	boom := errors.New("boom")
	if err := s.ScanAudit(ctx, 0, func(portcullis.AuditRecord) (bool, error) { return true, boom }); !errors.Is(err, boom) {
		t.Fatalf("ScanAudit error = %v; want the callback's", err)
	}
}

func testAuditPrune(t *testing.T, open Opener) {
	ctx := context.Background()
	s, clock := newStore(t, open)
	var recs []portcullis.AuditRecord
	for i := 1; i <= 6; i++ {
		recs = append(recs, r(s.AppendAudit(ctx, event(i, clock, "s", "a", "t", portcullis.OutcomeAllow))).must(t)...)
	}
	bad := portcullis.AuditCheckpoint{Seq: 3, Hash: recs[1].Hash, Time: clock.Now(), Signature: "sig"}
	wantCode(t, "PruneAudit(wrong hash)", s.PruneAudit(ctx, bad), portcullis.CodeInvalidRequest)
	cp := portcullis.AuditCheckpoint{Seq: 3, Hash: recs[2].Hash, Time: clock.Now(), Signature: "sig"}
	noErr(t, s.PruneAudit(ctx, cp))
	got, ok, err := s.AuditCheckpoint(ctx)
	if err != nil || !ok || got.Seq != 3 || got.Hash != cp.Hash || got.Signature != "sig" || !got.Time.Equal(cp.Time) {
		t.Fatalf("AuditCheckpoint = %+v, %v, %v; want %+v", got, ok, err, cp)
	}
	if rows := r(s.QueryAudit(ctx, portcullis.AuditQuery{})).must(t); len(rows) != 3 || rows[0].Seq != 4 {
		t.Fatalf("rows after prune = %+v; want 4..6", rows)
	}
	if v := verify(t, s); !v.OK() || v.Rows != 3 || v.FirstSeq != 4 {
		t.Fatalf("VerifyAudit after prune = %+v; want rows 4..6 ok", v)
	}
	next := r(s.AppendAudit(ctx, event(7, clock, "s", "a", "t", portcullis.OutcomeAllow))).must(t)
	if next[0].Seq != 7 || next[0].PrevHash != recs[5].Hash {
		t.Fatalf("append after prune = %+v; want seq 7 chained to row 6", next[0])
	}
	// Without the checkpoint the pruned log does not verify from genesis.
	v, err := portcullis.VerifyAudit(ctx, s, nil)
	if err != nil || v.OK() || v.BadSeq != 1 {
		t.Fatalf("VerifyAudit without checkpoint = %+v, %v; want row 1 missing", v, err)
	}
}

func testWatch(t *testing.T, open Opener) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, clock := newStore(t, open)
	ch, err := s.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	g := r(s.AddGrant(ctx, portcullis.Grant{Kind: portcullis.GrantSession, Tool: "t", Session: "s"})).must(t)
	noErr(t, s.CreateApproval(ctx, approval(clock, "apr_w", "s", "bot")))
	noErr(t, s.PutBlock(ctx, portcullis.Block{Agent: "bot", ChallengeID: "c", CreatedAt: clock.Now()}))
	noErr(t, s.PutToolPin(ctx, portcullis.ToolPin{Upstream: "u", Tool: "t", Hash: "h", Definition: json.RawMessage(`{}`), FirstSeen: clock.Now(), UpdatedAt: clock.Now()}))
	want := map[portcullis.Change]bool{
		{Kind: portcullis.ChangeGrant, ID: g.ID}:       false,
		{Kind: portcullis.ChangeApproval, ID: "apr_w"}: false,
		{Kind: portcullis.ChangeBlock, ID: "bot"}:      false,
		{Kind: portcullis.ChangePin, ID: "u/t"}:        false,
	}
	deadline := time.After(10 * time.Second)
	for seen := 0; seen < len(want); {
		select {
		case c, ok := <-ch:
			if !ok {
				t.Fatal("watch channel closed early")
			}
			if done, ok := want[c]; ok && !done {
				want[c] = true
				seen++
			}
		case <-deadline:
			t.Fatalf("changes not delivered within 10s: %v", want)
		}
	}
	cancel()
	for range ch { // the channel closes when the watch ends
	}
}

func testCanceled(t *testing.T, open Opener) {
	s, clock := newStore(t, open)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := s.UseGrant(ctx, portcullis.GrantQuery{Session: "s", Tool: "t", Level: portcullis.ConfirmSession, Now: clock.Now()}); err == nil {
		t.Error("UseGrant with a canceled context succeeded")
	}
	if _, err := s.AppendAudit(ctx, event(1, clock, "s", "a", "t", portcullis.OutcomeAllow)); err == nil {
		t.Error("AppendAudit with a canceled context succeeded")
	}
	if _, _, err := s.Block(ctx, "bot"); err == nil {
		t.Error("Block with a canceled context succeeded")
	}
}

// ColumnEditor changes one column of one audit row in the store's own
// table, behind the store's back, as anyone who can write the database
// file or log in to the database can. column is the column's name in the
// stores' tables: a copied column (kind, decision_id, session, agent, tool,
// outcome: value is a string; time: value is a time.Time) or the chain's
// own (body: []byte; prev_hash, hash: string).
type ColumnEditor func(t testing.TB, seq int64, column string, value any)

// EditableOpener returns a new, empty store and an editor of its audit
// table. The suite closes the store when the test ends.
type EditableOpener func(t testing.TB, clock portcullis.Clock) (portcullis.Store, ColumnEditor)

// RunTamper runs the tamper tests: a column edited alone, and a chain
// rewritten consistently after its head was kept, against stores whose
// audit table the suite can edit.
func RunTamper(t *testing.T, open EditableOpener) {
	t.Run("AuditCopiedColumnEdited", func(t *testing.T) { testCopiedColumnEdited(t, open) })
	t.Run("AuditRewrittenAfterAnchor", func(t *testing.T) { testRewrittenAfterAnchor(t, open) })
}

func openEditable(t *testing.T, open EditableOpener) (portcullis.Store, ColumnEditor, *Clock) {
	t.Helper()
	clock := NewClock()
	s, edit := open(t, clock)
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s, edit, clock
}

// testCopiedColumnEdited edits each copied column of one row alone: the
// queries that filter on it see the forgery, so verify must name the row
// and the column.
func testCopiedColumnEdited(t *testing.T, open EditableOpener) {
	for _, tc := range []struct {
		column string
		value  any
		query  portcullis.AuditQuery // lists the forged row only because of the edit
	}{
		{"outcome", "allow", portcullis.AuditQuery{Outcome: portcullis.OutcomeAllow}},
		{"kind", "approval", portcullis.AuditQuery{Kind: portcullis.AuditApproval}},
		{"decision_id", "d9", portcullis.AuditQuery{}},
		{"session", "other", portcullis.AuditQuery{Session: "other"}},
		{"agent", "someone-else", portcullis.AuditQuery{Agent: "someone-else"}},
		{"tool", "list", portcullis.AuditQuery{Tool: "list"}},
		{"time", time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), portcullis.AuditQuery{Until: time.Date(2021, 1, 1, 0, 0, 0, 0, time.UTC)}},
	} {
		t.Run(tc.column, func(t *testing.T) {
			ctx := context.Background()
			s, edit, clock := openEditable(t, open)
			for i, o := range []portcullis.Outcome{portcullis.OutcomeAllow, portcullis.OutcomeDeny, portcullis.OutcomeAllow} {
				r(s.AppendAudit(ctx, event(i+1, clock, "s1", "bot", "delete", o))).must(t)
				clock.Advance(time.Second)
			}
			if v := verify(t, s); !v.OK() {
				t.Fatalf("VerifyAudit before the edit = %+v; want ok", v)
			}
			edit(t, 2, tc.column, tc.value)
			if tc.column != "decision_id" {
				var seqs []int64
				for _, rec := range r(s.QueryAudit(ctx, tc.query)).must(t) {
					seqs = append(seqs, rec.Seq)
				}
				if !slices.Contains(seqs, 2) {
					t.Fatalf("QueryAudit(%+v) after editing %s = %v; the edit should have made row 2 match", tc.query, tc.column, seqs)
				}
			}
			v := verify(t, s)
			if v.OK() || v.BadSeq != 2 || v.Column != tc.column {
				t.Fatalf("VerifyAudit after editing row 2's %s column = %+v; want row 2 and column %s named", tc.column, v, tc.column)
			}
		})
	}
}

// testRewrittenAfterAnchor rewrites the log from row 2 on, every hash
// recomputed, after its head was noted: the chain is consistent and
// verifies alone, but not against the head that was kept.
func testRewrittenAfterAnchor(t *testing.T, open EditableOpener) {
	ctx := context.Background()
	s, edit, clock := openEditable(t, open)
	var recs []portcullis.AuditRecord
	for i, o := range []portcullis.Outcome{portcullis.OutcomeAllow, portcullis.OutcomeDeny, portcullis.OutcomeAllow} {
		recs = append(recs, r(s.AppendAudit(ctx, event(i+1, clock, "s1", "bot", "delete", o))).must(t)...)
		clock.Advance(time.Second)
	}
	head := portcullis.AuditAnchor{Seq: recs[2].Seq, Hash: recs[2].Hash, From: "the noted head"}
	// Rewrite row 2 (deny becomes allow, in the body and its column) and
	// re-chain every row after it.
	prev := recs[0].Hash
	for i := 1; i < len(recs); i++ {
		ev := r(recs[i].Event()).must(t)
		if i == 1 {
			ev.Outcome = portcullis.OutcomeAllow
			ev.Decision.Outcome = portcullis.OutcomeAllow
			edit(t, recs[i].Seq, "outcome", string(ev.Outcome))
		}
		body := r(portcullis.EncodeAuditBody(&ev)).must(t)
		hash := portcullis.ChainHash(prev, recs[i].Seq, body)
		edit(t, recs[i].Seq, "body", body)
		edit(t, recs[i].Seq, "prev_hash", prev)
		edit(t, recs[i].Seq, "hash", hash)
		prev = hash
	}
	if v := verify(t, s); !v.OK() || v.Rows != 3 {
		t.Fatalf("VerifyAudit of the consistently rewritten log = %+v; want it to verify alone", v)
	}
	v, err := portcullis.VerifyAuditAnchors(ctx, s, nil, []portcullis.AuditAnchor{head})
	if err != nil {
		t.Fatal(err)
	}
	if v.OK() || v.BadSeq != head.Seq || !strings.Contains(v.Problem, "the noted head") {
		t.Fatalf("VerifyAuditAnchors(head %d) of the rewritten log = %+v; want row %d named as rewritten", head.Seq, v, head.Seq)
	}
	// A head kept beyond the end: rows were removed from the end.
	v, err = portcullis.VerifyAuditAnchors(ctx, s, nil, []portcullis.AuditAnchor{{Seq: 9, Hash: "sha256:x", From: "w"}})
	if err != nil {
		t.Fatal(err)
	}
	if v.OK() || v.BadSeq != 4 {
		t.Fatalf("VerifyAuditAnchors(head beyond the end) = %+v; want row 4 missing", v)
	}
}

// charge is a charge of budget b in the hour that holds now.
func charge(clock *Clock, b, agent string, limit, cost int64) portcullis.BudgetCharge {
	start, end := portcullis.WindowOf(clock.Now(), time.Hour)
	return portcullis.BudgetCharge{Budget: b, Agent: agent, Start: start, End: end, Limit: portcullis.Units(limit), Cost: portcullis.Units(cost)}
}

func take(t *testing.T, s portcullis.Store, clock *Clock, mode portcullis.BudgetMode, cs ...portcullis.BudgetCharge) portcullis.BudgetResult {
	t.Helper()
	res, err := s.TakeBudget(context.Background(), cs, mode, clock.Now())
	if err != nil {
		t.Fatalf("TakeBudget: %v", err)
	}
	return res
}

func budgetUse(t *testing.T, s portcullis.Store, clock *Clock) string {
	t.Helper()
	us := r(s.BudgetUse(context.Background(), clock.Now())).must(t)
	parts := make([]string, len(us))
	for i, u := range us {
		parts[i] = fmt.Sprintf("%s/%s/%s/%s=%s of %s until %s", u.Budget, u.Agent, u.Session, u.Tool, u.Used, u.Limit, u.End.Format("15:04"))
	}
	return strings.Join(parts, " ")
}

func testBudgets(t *testing.T, open Opener) {
	ctx := context.Background()
	s, clock := newStore(t, open)
	a := charge(clock, "mail", "bot", 3, 2)
	if res := take(t, s, clock, portcullis.BudgetTakeIfFits, a); !res.Taken || res.Over != -1 || res.Used[0] != 0 {
		t.Fatalf("first take = %+v; want taken from 0", res)
	}
	// A peek reports and records nothing.
	if res := take(t, s, clock, portcullis.BudgetPeek, a); res.Taken || res.Over != 0 || res.Used[0] != portcullis.Units(2) {
		t.Errorf("peek past the limit = %+v; want not taken, over at 0, 2 used", res)
	}
	// All or none: the second charge does not fit, so the first (which
	// would) is not recorded either.
	other := charge(clock, "pay", "bot", 100, 10)
	if res := take(t, s, clock, portcullis.BudgetTakeIfFits, other, a); res.Taken || res.Over != 1 {
		t.Errorf("take with one charge over = %+v; want not taken, over at 1", res)
	}
	if got, want := budgetUse(t, s, clock), "mail/bot//=2 of 3 until 13:00"; got != want {
		t.Errorf("BudgetUse after a refused take = %q; want %q", got, want)
	}
	// Another agent has its own counter.
	if res := take(t, s, clock, portcullis.BudgetTakeIfFits, charge(clock, "mail", "other", 3, 3)); !res.Taken {
		t.Errorf("another agent's take = %+v; want taken", res)
	}
	// Force takes past the limit (a person let the call through).
	if res := take(t, s, clock, portcullis.BudgetTakeForce, a); !res.Taken || res.Over != 0 {
		t.Errorf("forced take = %+v; want taken, over at 0", res)
	}
	if got, want := budgetUse(t, s, clock), "mail/bot//=4 of 3 until 13:00 mail/other//=3 of 3 until 13:00"; got != want {
		t.Errorf("BudgetUse = %q; want %q", got, want)
	}
	// Giving back never goes below 0.
	noErr(t, s.ReturnBudget(ctx, []portcullis.BudgetCharge{a, a, a}))
	if got, want := budgetUse(t, s, clock), "mail/other//=3 of 3 until 13:00 mail/bot//=0 of 3 until 13:00"; got != want {
		t.Errorf("BudgetUse after giving back = %q; want %q", got, want)
	}
	// Fractions add up exactly.
	f := charge(clock, "spend", "bot", 1, 0)
	f.Cost = portcullis.Amount(100_000) // 0.1
	for i := range 10 {
		if res := take(t, s, clock, portcullis.BudgetTakeIfFits, f); !res.Taken {
			t.Fatalf("take %d of 0.1 under 1 = %+v; want taken", i+1, res)
		}
	}
	if res := take(t, s, clock, portcullis.BudgetTakeIfFits, f); res.Taken || res.Used[0] != portcullis.Units(1) {
		t.Errorf("the eleventh 0.1 under 1 = %+v; want refused with 1 used", res)
	}
	// The next window starts from 0, and the ended one is not listed.
	clock.Advance(time.Hour)
	if got := budgetUse(t, s, clock); got != "" {
		t.Errorf("BudgetUse in the next window = %q; want none", got)
	}
	next := charge(clock, "mail", "bot", 3, 3)
	if res := take(t, s, clock, portcullis.BudgetTakeIfFits, next); !res.Taken || res.Used[0] != 0 {
		t.Errorf("take in the next window = %+v; want taken from 0", res)
	}
	// What a store refuses.
	for _, bad := range []portcullis.BudgetCharge{
		{Budget: "", Start: next.Start, End: next.End, Limit: 1, Cost: 1},
		{Budget: "x", Start: next.Start, End: next.End, Limit: 1, Cost: -1},
		{Budget: "x", Start: next.End, End: next.Start, Limit: 1, Cost: 1},
	} {
		_, err := s.TakeBudget(ctx, []portcullis.BudgetCharge{bad}, portcullis.BudgetTakeIfFits, clock.Now())
		wantCode(t, fmt.Sprintf("TakeBudget(%+v)", bad), err, portcullis.CodeInvalidRequest)
	}
}

func testBudgetConcurrency(t *testing.T, open Opener) {
	s, clock := newStore(t, open)
	const limit, callers = 7, 40
	var taken atomic.Int32
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each call charges two budgets, in different orders, so a
			// store that locks in call order would deadlock.
			cs := []portcullis.BudgetCharge{charge(clock, "calls", "bot", limit, 1), charge(clock, "spend", "bot", 1000, 5)}
			if taken.Load()%2 == 1 {
				cs[0], cs[1] = cs[1], cs[0]
			}
			res, err := s.TakeBudget(context.Background(), cs, portcullis.BudgetTakeIfFits, clock.Now())
			if err != nil {
				t.Error(err)
				return
			}
			if res.Taken {
				taken.Add(1)
			}
		}()
	}
	wg.Wait()
	if got := taken.Load(); got != limit {
		t.Errorf("%d concurrent takes of a budget of %d: %d taken; want exactly %d", callers, limit, got, limit)
	}
	if got, want := budgetUse(t, s, clock), fmt.Sprintf("calls/bot//=%d of %d until 13:00 spend/bot//=%d of 1000 until 13:00", limit, limit, 5*limit); got != want {
		t.Errorf("BudgetUse = %q; want %q", got, want)
	}
}
