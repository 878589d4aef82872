package gate_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/internal/noticetest"
	"github.com/portcullis/portcullis/memstore"
	"github.com/portcullis/portcullis/policy"
)

// TestCases runs the data-driven scenarios in testdata/cases: each file is a
// policy unit-test file with an inline policy.
func TestCases(t *testing.T) {
	files, err := filepath.Glob("testdata/cases/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no case files in testdata/cases")
	}
	total := 0
	for _, file := range files {
		tf, err := policy.LoadTests(file)
		if err != nil {
			t.Fatalf("LoadTests(%s): %v", file, err)
		}
		g, err := gate.New(tf.Policy, gate.WithRequestOverrides())
		if err != nil {
			t.Fatalf("gate.New(%s): %v", file, err)
		}
		for _, r := range policy.RunTests(context.Background(), g, tf) {
			total++
			t.Run(filepath.Base(file)+"/"+r.Case.Name, func(t *testing.T) {
				if r.Err != nil {
					t.Fatalf("%s:%d: Decide(%s) error: %v", file, r.Case.Line, r.Case.Request.Tool, r.Err)
				}
				for _, d := range r.Diffs {
					t.Errorf("%s:%d: Decide(%s): %s", file, r.Case.Line, r.Case.Request.Tool, d)
				}
			})
		}
	}
	if total < 100 {
		t.Errorf("only %d data-driven cases; the Gatekeeper scenarios need more", total)
	}
}

const grantsPolicy = `
version: 1
tools:
  list_elements:  {endpoint: READ}
  create_element: {endpoint: CREATE, summary: "create {{.name}}"}
  edit_element:   {endpoint: UPDATE}
  delete_element: {endpoint: DELETE, canBeElevated: false}
  write_file:     {endpoint: UPDATE, pathArg: path}
  read_file:      {endpoint: READ, pathArg: path}
policyDocument: ./permissions.md
elements:
  - name: Sandbox
    type: ensemble
    active: false
    gatekeeper: {deny: [confirm_operation]}
`

func mustGate(t testing.TB, src string, opts ...gate.Option) *gate.Gate {
	t.Helper()
	pol, _, err := policy.Parse("test.yaml", []byte(src))
	if err != nil {
		t.Fatalf("policy.Parse: %v", err)
	}
	// Tests drive the gate as a trusted caller does: the request may carry
	// grants, active elements and run state.
	g, err := gate.New(pol, append([]gate.Option{gate.WithRequestOverrides()}, opts...)...)
	if err != nil {
		t.Fatalf("gate.New: %v", err)
	}
	return g
}

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newClock() *fakeClock { return &fakeClock{now: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)} }

func decide(t *testing.T, g *gate.Gate, c portcullis.Call) portcullis.Decision {
	t.Helper()
	d, err := g.Decide(context.Background(), c)
	if err != nil {
		t.Fatalf("Decide(%s): %v", c.Tool, err)
	}
	return d
}

func TestSingleUseGrantIsConsumedExactlyOnce(t *testing.T) {
	ctx := context.Background()
	clock := newClock()
	st := memstore.New(clock)
	g := mustGate(t, grantsPolicy, gate.WithStore(st), gate.WithClock(clock))
	args := map[string]any{"name": "x", "n": json.Number("1")}
	if _, err := st.AddGrant(ctx, portcullis.Grant{Kind: portcullis.GrantSingle, Tool: "edit_element", Session: "s1", Args: args}); err != nil {
		t.Fatal(err)
	}
	// A call with other arguments is not covered.
	other := decide(t, g, portcullis.Call{Tool: "edit_element", Session: "s1", Args: map[string]any{"name": "y", "n": json.Number("1")}})
	if other.Outcome != portcullis.OutcomeConfirm {
		t.Fatalf("Decide(other args) = %s; want confirm", other.Outcome)
	}
	// Another session is not covered.
	if d := decide(t, g, portcullis.Call{Tool: "edit_element", Session: "s2", Args: args}); d.Outcome != portcullis.OutcomeConfirm {
		t.Fatalf("Decide(other session) = %s; want confirm", d.Outcome)
	}

	const n = 64
	var allowed atomic.Int32
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := g.Decide(ctx, portcullis.Call{Tool: "edit_element", Session: "s1", Args: map[string]any{"n": json.Number("1"), "name": "x"}})
			if err != nil {
				t.Error(err)
				return
			}
			if d.Outcome == portcullis.OutcomeAllow {
				if d.Source != portcullis.SourceSessionGrant || d.PermissionLevel != portcullis.ConfirmSingleUse {
					t.Errorf("allowed decision = %s/%s; want session_grant/CONFIRM_SINGLE_USE", d.Source, d.PermissionLevel)
				}
				allowed.Add(1)
			}
		}()
	}
	wg.Wait()
	if got := allowed.Load(); got != 1 {
		t.Fatalf("%d of %d concurrent calls were allowed by one single-use grant; want exactly 1", got, n)
	}
}

func TestSessionGrantCoversLaterCallsUntilExpiry(t *testing.T) {
	ctx := context.Background()
	clock := newClock()
	st := memstore.New(clock)
	g := mustGate(t, grantsPolicy, gate.WithStore(st), gate.WithClock(clock))
	if _, err := st.AddGrant(ctx, portcullis.Grant{Kind: portcullis.GrantSession, Tool: "create_element", Session: "s1", ExpiresAt: clock.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		d := decide(t, g, portcullis.Call{Tool: "create_element", Session: "s1", Args: map[string]any{"name": i}})
		if d.Outcome != portcullis.OutcomeAllow || d.Source != portcullis.SourceSessionGrant {
			t.Fatalf("call %d: Decide = %s/%s; want allow/session_grant", i, d.Outcome, d.Source)
		}
	}
	// A session grant never satisfies CONFIRM_SINGLE_USE.
	if _, err := st.AddGrant(ctx, portcullis.Grant{Kind: portcullis.GrantSession, Tool: "edit_element", Session: "s1"}); err != nil {
		t.Fatal(err)
	}
	if d := decide(t, g, portcullis.Call{Tool: "edit_element", Session: "s1"}); d.Outcome != portcullis.OutcomeConfirm {
		t.Fatalf("Decide(edit_element with session grant) = %s; want confirm", d.Outcome)
	}
	// Other sessions are not covered.
	if d := decide(t, g, portcullis.Call{Tool: "create_element", Session: "s2"}); d.Outcome != portcullis.OutcomeConfirm {
		t.Fatalf("Decide(other session) = %s; want confirm", d.Outcome)
	}
	clock.Advance(time.Hour)
	if d := decide(t, g, portcullis.Call{Tool: "create_element", Session: "s1"}); d.Outcome != portcullis.OutcomeConfirm {
		t.Fatalf("Decide(after expiry) = %s; want confirm", d.Outcome)
	}
}

func TestConfirmCreatesApprovalRequest(t *testing.T) {
	ctx := context.Background()
	clock := newClock()
	st := memstore.New(clock)
	g := mustGate(t, grantsPolicy, gate.WithStore(st), gate.WithClock(clock))
	call := portcullis.Call{Tool: "create_element", Session: "s1", Agent: "a1", Args: map[string]any{"name": "notes"}}
	d := decide(t, g, call)
	if d.Outcome != portcullis.OutcomeConfirm || d.Code != portcullis.CodeConfirmationRequired || d.ChallengeID == "" {
		t.Fatalf("Decide = %s/%s challenge %q; want confirm/CONFIRMATION_REQUIRED with a challenge id", d.Outcome, d.Code, d.ChallengeID)
	}
	a, err := st.Approval(ctx, d.ChallengeID)
	if err != nil {
		t.Fatalf("Approval(%s): %v", d.ChallengeID, err)
	}
	digest, err := portcullis.ArgsDigest(call.Args)
	if err != nil {
		t.Fatal(err)
	}
	want := portcullis.Approval{
		ID: d.ChallengeID, DecisionID: d.DecisionID, Status: portcullis.ApprovalPending, Call: call,
		Tool: "create_element", ArgsDigest: digest, Level: portcullis.ConfirmSession,
		Reason: "create_element: create notes", CreatedAt: clock.Now(), ExpiresAt: clock.Now().Add(15 * time.Minute),
	}
	if diff := cmp.Diff(want, a); diff != "" {
		t.Fatalf("approval mismatch (-want +got):\n%s", diff)
	}
	// People watching are told, with the approval's id.
	human := &noticetest.Recorder{}
	gn := mustGate(t, grantsPolicy, gate.WithStore(st), gate.WithClock(clock), gate.WithNotifier(human))
	dn := decide(t, gn, call)
	if n := human.Last(t, ""); n.Kind != portcullis.NoticeApproval || n.ChallengeID != dn.ChallengeID || n.Tool != "create_element" || n.Code != "" {
		t.Fatalf("approval notice = %+v; want one naming approval %s, without a code", n, dn.ChallengeID)
	}
	// Two decisions never share an approval id or a decision id.
	d2 := decide(t, g, call)
	if d2.ChallengeID == d.ChallengeID || d2.DecisionID == d.DecisionID {
		t.Fatalf("ids repeat: %s/%s and %s/%s", d.DecisionID, d.ChallengeID, d2.DecisionID, d2.ChallengeID)
	}
}

func TestExplainChangesNothing(t *testing.T) {
	ctx := context.Background()
	clock := newClock()
	st := memstore.New(clock)
	g := mustGate(t, grantsPolicy, gate.WithStore(st), gate.WithClock(clock))
	call := portcullis.Call{Tool: "edit_element", Session: "s1", Args: map[string]any{"name": "x"}}
	if _, err := st.AddGrant(ctx, portcullis.Grant{Kind: portcullis.GrantSingle, Tool: "edit_element", Session: "s1", Args: call.Args}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		d, err := g.Explain(ctx, call)
		if err != nil {
			t.Fatal(err)
		}
		if d.Outcome != portcullis.OutcomeAllow {
			t.Fatalf("Explain = %s; want allow (grant present, not consumed)", d.Outcome)
		}
	}
	d, err := g.Explain(ctx, portcullis.Call{Tool: "create_element", Session: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	if d.Outcome != portcullis.OutcomeConfirm || d.ChallengeID != "" {
		t.Fatalf("Explain(create) = %s, challenge %q; want confirm with no approval created", d.Outcome, d.ChallengeID)
	}
	// The grant is still there for the real call, and then gone.
	if d := decide(t, g, call); d.Outcome != portcullis.OutcomeAllow {
		t.Fatalf("Decide after Explain = %s; want allow", d.Outcome)
	}
	if d := decide(t, g, call); d.Outcome != portcullis.OutcomeConfirm {
		t.Fatalf("second Decide = %s; want confirm (grant consumed)", d.Outcome)
	}
}

// brokenStore fails or panics on every call the gate makes; the methods it
// does not override panic (nil embedded interface), which the gate must
// survive too.
type brokenStore struct {
	portcullis.Store
	panics bool
}

func (b brokenStore) fail() error {
	if b.panics {
		panic("store exploded")
	}
	return errors.New("connection refused")
}
func (b brokenStore) AddGrant(context.Context, portcullis.Grant) (portcullis.Grant, error) {
	return portcullis.Grant{}, b.fail()
}
func (b brokenStore) UseGrant(context.Context, portcullis.GrantQuery) (portcullis.Grant, bool, error) {
	return portcullis.Grant{}, true, b.fail()
}
func (b brokenStore) RevokeGrant(context.Context, string) error { return b.fail() }
func (b brokenStore) CreateApproval(context.Context, portcullis.Approval) error {
	return b.fail()
}
func (b brokenStore) CreateApprovalWithin(context.Context, portcullis.Approval, portcullis.PendingLimit) (portcullis.Admission, error) {
	return portcullis.Admission{Created: true}, b.fail()
}
func (b brokenStore) Approval(context.Context, string) (portcullis.Approval, error) {
	return portcullis.Approval{}, b.fail()
}
func (b brokenStore) PutBlock(context.Context, portcullis.Block) error { return b.fail() }
func (b brokenStore) AppendAudit(context.Context, ...portcullis.AuditEvent) ([]portcullis.AuditRecord, error) {
	return nil, b.fail()
}
func (b brokenStore) Block(context.Context, string) (portcullis.Block, bool, error) {
	return portcullis.Block{}, false, b.fail()
}
func (b brokenStore) DeleteBlock(context.Context, string) error { return b.fail() }
func (b brokenStore) Blocks(context.Context) ([]portcullis.Block, error) {
	return nil, b.fail()
}
func (b brokenStore) CreateChallenge(context.Context, portcullis.Challenge) error {
	return b.fail()
}
func (b brokenStore) Challenge(context.Context, string) (portcullis.Challenge, error) {
	return portcullis.Challenge{}, b.fail()
}
func (b brokenStore) DeleteChallenge(context.Context, string) error { return b.fail() }
func (b brokenStore) AddFailedAttempt(context.Context, string, time.Time, time.Time) (int, error) {
	return 0, b.fail()
}
func (b brokenStore) FailedAttempts(context.Context, string, time.Time) (int, error) {
	return 0, b.fail()
}
func (b brokenStore) RecordStep(context.Context, string, string, time.Time) (portcullis.RunState, error) {
	return portcullis.RunState{}, b.fail()
}
func (b brokenStore) RecordOutcome(context.Context, string, portcullis.StepOutcome, time.Time) error {
	return b.fail()
}
func (b brokenStore) RunState(context.Context, string) (portcullis.RunState, bool, error) {
	return portcullis.RunState{}, false, b.fail()
}

func TestStoreFailureFailsClosed(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store brokenStore
	}{{"error", brokenStore{}}, {"panic", brokenStore{panics: true}}} {
		t.Run(tc.name, func(t *testing.T) {
			g := mustGate(t, grantsPolicy, gate.WithStore(tc.store))
			for _, tool := range []string{"create_element", "edit_element", "unknown_tool"} {
				d, err := g.Decide(context.Background(), portcullis.Call{Tool: tool, Session: "s"})
				if err != nil {
					t.Fatalf("Decide(%s): %v", tool, err)
				}
				if d.Outcome != portcullis.OutcomeDeny || d.PermissionLevel != portcullis.Deny || !d.FailClosed || d.Code != portcullis.CodeFailClosed {
					t.Fatalf("Decide(%s) = %s/%s failClosed=%v code=%s; want deny/DENY failClosed FAIL_CLOSED", tool, d.Outcome, d.PermissionLevel, d.FailClosed, d.Code)
				}
				if d.DecisionID == "" {
					t.Errorf("Decide(%s): fail-closed decision has no decision id", tool)
				}
			}
			// Even a read is denied: its audit row cannot be written, and no
			// allowed call may go unrecorded.
			if d := decide(t, g, portcullis.Call{Tool: "list_elements"}); d.Outcome != portcullis.OutcomeDeny || !d.FailClosed {
				t.Fatalf("Decide(list_elements) = %s failClosed=%v; want a fail-closed deny", d.Outcome, d.FailClosed)
			}
		})
	}
}

func TestInvalidRequestsFailClosed(t *testing.T) {
	g := mustGate(t, grantsPolicy)
	for _, tc := range []struct {
		name string
		call portcullis.Call
		want string
	}{
		{"no tool", portcullis.Call{}, `missing "tool"`},
		{"unknown element", portcullis.Call{Tool: "list_elements", ActiveElements: []string{"Nobody"}}, `no element named "Nobody"`},
		{"bad grant kind", portcullis.Call{Tool: "edit_element", Grants: []portcullis.Grant{{Kind: "forever", Tool: "edit_element"}}}, `unknown kind "forever"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := g.Decide(context.Background(), tc.call)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Decide error = %v; want one containing %q", err, tc.want)
			}
			if portcullis.ErrorCode(err) != portcullis.CodeInvalidRequest {
				t.Errorf("error code = %q; want INVALID_REQUEST", portcullis.ErrorCode(err))
			}
			if d.Outcome != portcullis.OutcomeDeny || !d.FailClosed || d.Code != portcullis.CodeFailClosed {
				t.Fatalf("Decide = %s/%s failClosed=%v; want a fail-closed deny with a contract code", d.Outcome, d.Code, d.FailClosed)
			}
		})
	}
}

func TestCanceledContextFailsClosed(t *testing.T) {
	g := mustGate(t, grantsPolicy)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d, err := g.Decide(ctx, portcullis.Call{Tool: "list_elements"})
	if err != nil {
		t.Fatal(err)
	}
	if d.Outcome != portcullis.OutcomeDeny || !d.FailClosed {
		t.Fatalf("Decide(canceled) = %s failClosed=%v; want fail-closed deny", d.Outcome, d.FailClosed)
	}
}

func TestShadowModeLetsThroughAndRecords(t *testing.T) {
	ctx := context.Background()
	st := memstore.New(nil)
	g := mustGate(t, strings.Replace(grantsPolicy, "version: 1", "version: 1\nmode: shadow", 1), gate.WithStore(st))
	call := portcullis.Call{Tool: "edit_element", Session: "s1", Args: map[string]any{"a": "b"}}
	if _, err := st.AddGrant(ctx, portcullis.Grant{Kind: portcullis.GrantSingle, Tool: "edit_element", Session: "s1", Args: call.Args}); err != nil {
		t.Fatal(err)
	}
	d := decide(t, g, portcullis.Call{Tool: "delete_element", ActiveElements: []string{"Sandbox"}})
	want := &portcullis.ShadowResult{Outcome: portcullis.OutcomeDeny, PermissionLevel: portcullis.Deny, Code: portcullis.CodeSandboxed, Source: portcullis.SourceElementPolicy, SourceElement: "Sandbox"}
	if d.Outcome != portcullis.OutcomeAllow || d.Source != portcullis.SourceMode || d.Shadow == nil {
		t.Fatalf("Decide(shadow) = %s/%s shadow=%v; want allow/mode with a shadow result", d.Outcome, d.Source, d.Shadow)
	}
	if diff := cmp.Diff(want, d.Shadow, cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Reason" }, cmp.Ignore())); diff != "" {
		t.Fatalf("shadow result (-want +got):\n%s", diff)
	}
	// Shadow evaluation consumes nothing: the grant is still usable twice.
	for range 2 {
		if d := decide(t, g, call); d.Shadow == nil || d.Shadow.Outcome != portcullis.OutcomeAllow {
			t.Fatalf("shadow of granted call = %+v; want would-allow", d.Shadow)
		}
	}
}

func TestModeOffPassesThrough(t *testing.T) {
	g := mustGate(t, strings.Replace(grantsPolicy, "version: 1", "version: 1\nmode: off", 1))
	d := decide(t, g, portcullis.Call{Tool: "delete_element", ActiveElements: []string{"Sandbox"}})
	if d.Outcome != portcullis.OutcomeAllow || d.Source != portcullis.SourceMode || len(d.Trace) != 1 {
		t.Fatalf("Decide(off) = %s/%s with %d trace entries; want allow/mode with 1", d.Outcome, d.Source, len(d.Trace))
	}
}

func TestWritesToOwnFilesAreBlocked(t *testing.T) {
	dir := t.TempDir()
	pol, _, err := policy.Parse("p.yaml", []byte(grantsPolicy))
	if err != nil {
		t.Fatal(err)
	}
	pol.Source = filepath.Join(dir, "portcullis.yaml")
	state := filepath.Join(dir, "state")
	g, err := gate.New(pol, gate.WithProtectedPaths(state))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{pol.Source, state, filepath.Join(state, "portcullis.db"), state + "/../state/x"} {
		d := decide(t, g, portcullis.Call{Tool: "write_file", Args: map[string]any{"path": path}})
		if d.Outcome != portcullis.OutcomeDeny || d.Code != portcullis.CodeBlockedCommand {
			t.Errorf("Decide(write_file %s) = %s/%s; want deny/BLOCKED_COMMAND", path, d.Outcome, d.Code)
		}
	}
	// Reading them, and writing elsewhere, is not blocked.
	if d := decide(t, g, portcullis.Call{Tool: "read_file", Args: map[string]any{"path": pol.Source}}); d.Outcome != portcullis.OutcomeAllow {
		t.Errorf("Decide(read_file policy) = %s; want allow", d.Outcome)
	}
	if d := decide(t, g, portcullis.Call{Tool: "write_file", Args: map[string]any{"path": state + "-other/x"}}); d.Code == portcullis.CodeBlockedCommand {
		t.Errorf("Decide(write_file sibling dir) blocked; want only the state dir itself blocked")
	}
}

func TestSetPolicySwapsAndKeepsLastGood(t *testing.T) {
	g := mustGate(t, grantsPolicy)
	if d := decide(t, g, portcullis.Call{Tool: "list_elements"}); d.Outcome != portcullis.OutcomeAllow {
		t.Fatalf("before: %s", d.Outcome)
	}
	bad := &portcullis.Policy{Version: 1, Tools: []portcullis.ToolPolicy{{Name: "a", Endpoint: portcullis.Read}, {Name: "a", Endpoint: portcullis.Delete}}}
	if err := g.SetPolicy(bad); err == nil {
		t.Fatal("SetPolicy(duplicate tool) succeeded; want error")
	}
	if d := decide(t, g, portcullis.Call{Tool: "list_elements"}); d.Outcome != portcullis.OutcomeAllow {
		t.Fatalf("after failed swap: %s; want the old policy in force", d.Outcome)
	}
	good := &portcullis.Policy{Version: 1, UnknownTools: portcullis.UnknownDeny}
	if err := g.SetPolicy(good); err != nil {
		t.Fatal(err)
	}
	if d := decide(t, g, portcullis.Call{Tool: "list_elements"}); d.Code != portcullis.CodeUnknownOperation {
		t.Fatalf("after swap: %s/%s; want UNKNOWN_OPERATION", d.Outcome, d.Code)
	}
}

func TestDecisionJSONHasEveryContractField(t *testing.T) {
	g := mustGate(t, grantsPolicy)
	d := decide(t, g, portcullis.Call{Tool: "list_elements"})
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"decisionId", "outcome", "permissionLevel", "code", "reason", "source", "sourceElement", "matchedPolicy", "conflictingElements", "challengeId", "whatWouldAuthorize", "failClosed", "trace"} {
		if _, ok := m[k]; !ok {
			t.Errorf("decision JSON lacks %q: %s", k, b)
		}
	}
	if _, ok := m["conflictingElements"].([]any); !ok {
		t.Errorf("conflictingElements = %v; want a JSON array", m["conflictingElements"])
	}
	tr, _ := m["trace"].([]any)
	if len(tr) < 4 {
		t.Fatalf("trace = %v; want mode, danger_zone, route and elements entries", m["trace"])
	}
	for i, stage := range []string{"mode", "danger_zone", "route", "elements"} {
		if got := tr[i].(map[string]any)["stage"]; got != stage {
			t.Errorf("trace[%d].stage = %v; want %s", i, got, stage)
		}
	}
}

// TestUntrustedRequestsCannotOverride: without WithRequestOverrides, the
// request cannot drop a restrictive element, carry its own grant, or claim
// a harmless run state.
func TestUntrustedRequestsCannotOverride(t *testing.T) {
	src := `
version: 1
tools:
  delete_element: {endpoint: DELETE}
  edit_element: {endpoint: UPDATE}
  list_elements: {endpoint: READ}
migrations:
  - name: m
    paths: [/x]
elements:
  - name: Guard
    type: persona
    gatekeeper: {deny: [delete_element]}
  - name: bot
    type: agent
    autonomy: {maxAutonomousSteps: 2}
`
	pol, _, err := policy.Parse("p.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	st := memstore.New(nil)
	g, err := gate.New(pol, gate.WithStore(st))
	if err != nil {
		t.Fatal(err)
	}
	if d := decide(t, g, portcullis.Call{Tool: "delete_element", ActiveElements: []string{}}); d.Code != portcullis.CodeElementPolicyViolation {
		t.Fatalf("activeElements: [] from an untrusted caller = %s; want Guard's deny to stand", d.Code)
	}
	if d := decide(t, g, portcullis.Call{Tool: "edit_element", Session: "s", Grants: []portcullis.Grant{{Tool: "edit_element", Kind: portcullis.GrantSingle}}}); d.Outcome != portcullis.OutcomeConfirm {
		t.Fatalf("a grant in an untrusted request = %s; want confirm", d.Outcome)
	}
	// Two steps of the run are counted by the store; a request claiming
	// step 0 every time does not reset the budget.
	run := portcullis.Call{Tool: "list_elements", Agent: "bot", Run: &portcullis.Run{ID: "r", Step: 0, RiskScore: new(float64)}}
	for range 2 {
		if d := decide(t, g, run); d.Outcome != portcullis.OutcomeAllow {
			t.Fatalf("step within budget = %s", d.Outcome)
		}
	}
	if d := decide(t, g, run); d.Code != portcullis.CodeAutonomyPause {
		t.Fatalf("third step of a 2-step budget = %s/%s; want AUTONOMY_PAUSE", d.Outcome, d.Code)
	}
	// The caller's call is not modified.
	if run.Run.RiskScore == nil {
		t.Fatal("the caller's run was modified")
	}
}
