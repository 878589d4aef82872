package main

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/memstore"
	"github.com/portcullis/portcullis/policy"
	"github.com/portcullis/portcullis/sqlite"
)

// replayPolicy is the policy in force when the audit log was written.
const replayPolicy = `
version: 1
tools:
  list_items:  {endpoint: READ}
  create_item: {endpoint: CREATE}
  edit_item:   {endpoint: UPDATE}
  delete_item: {endpoint: DELETE}
  login:       {endpoint: UPDATE, redact: [password]}
  Bash:        {endpoint: EXECUTE, shellArg: command}
  send_email:  {endpoint: CREATE, risk: external-write}
  run_sql:     {endpoint: UPDATE, summary: "{{.q}}"}
elements:
  - name: Security Persona
    type: persona
    gatekeeper:
      confirm: [create_item]
      deny: [delete_*]
  - name: Mailer
    type: skill
    gatekeeper:
      allow: [send_email, edit_item]
  - name: Sandbox
    type: ensemble
    active: false
    gatekeeper:
      deny: [edit_item]
  - name: bot
    type: agent
    autonomy: {riskTolerance: aggressive, maxAutonomousSteps: 3}
validator:
  provider: command
  command: [judge]
`

// replayLog records an audit log with a real gate and a SQLite store, and
// returns its state directory and policy file. Its rows:
//
//	1 list_items            allow
//	2 create_item s1        confirm (approval request)
//	3 (a person approves it for the session: a human-action row)
//	4 create_item s1        allow by the session grant
//	5 delete_item s1        deny (Security Persona)
//	6 delete_item s1        stop (retry guard: the same denied call again)
//	7 Bash ls               allow (safe command)
//	8 Bash rm -r            confirm CONFIRM_SINGLE_USE (moderate)
//	9 send_email friend     allow (validator allowed)
//	10 send_email evil      deny (validator denied)
//	11 login password       confirm CONFIRM_SINGLE_USE (password redacted in the log)
//	12-15 edit_item run r1  allow ×3, confirm (AUTONOMY_PAUSE: 3 steps taken of 3)
//	16 run_sql run r2       stop: DROP TABLE is in the danger zone (bot blocked)
//	17 list_items bot       stop: bot is blocked (danger zone, not replayed)
//	18 read_text (MCP)      allow: pinned readOnlyHint annotation of upstream "fs"
//	19 ghost (MCP)          deny: no upstream offers it
//	20 edit_item trusted    deny: the request made Sandbox the only active element
func replayLog(t testing.TB) (stateDir, policyPath string) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	stateDir = filepath.Join(dir, "state")
	policyPath = writeTemp(t, dir, "old.yaml", replayPolicy)
	pol, _, err := policy.Load(policyPath)
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(ctx, filepath.Join(stateDir, "portcullis.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	g, err := gate.New(pol, gate.WithStore(st), gate.WithValidator(mailValidator{}))
	if err != nil {
		t.Fatal(err)
	}
	trusted, err := gate.New(pol, gate.WithStore(st), gate.WithValidator(mailValidator{}), gate.WithRequestOverrides())
	if err != nil {
		t.Fatal(err)
	}
	decide := func(g *gate.Gate, c portcullis.Call, want portcullis.Outcome) portcullis.Decision {
		t.Helper()
		d, err := g.Decide(ctx, c)
		if err != nil || d.Outcome != want {
			t.Fatalf("Decide(%s) = %s (%s), %v; want %s", c.Tool, d.Outcome, d.Reason, err, want)
		}
		return d
	}
	bash := func(cmd string) map[string]any { return map[string]any{"command": cmd} }
	decide(g, portcullis.Call{Tool: "list_items", Session: "s1"}, portcullis.OutcomeAllow)
	d := decide(g, portcullis.Call{Tool: "create_item", Session: "s1"}, portcullis.OutcomeConfirm)
	if _, err := g.Approve(ctx, d.ChallengeID, "alice", true); err != nil {
		t.Fatal(err)
	}
	decide(g, portcullis.Call{Tool: "create_item", Session: "s1"}, portcullis.OutcomeAllow)
	decide(g, portcullis.Call{Tool: "delete_item", Session: "s1", Args: map[string]any{"id": "7"}}, portcullis.OutcomeDeny)
	decide(g, portcullis.Call{Tool: "delete_item", Session: "s1", Args: map[string]any{"id": "7"}}, portcullis.OutcomeStop)
	decide(g, portcullis.Call{Tool: "Bash", Session: "s1", Args: bash("ls -l")}, portcullis.OutcomeAllow)
	decide(g, portcullis.Call{Tool: "Bash", Session: "s1", Args: bash("rm -r build")}, portcullis.OutcomeConfirm)
	decide(g, portcullis.Call{Tool: "send_email", Session: "s1", Args: map[string]any{"to": "friend@example.com"}}, portcullis.OutcomeAllow)
	decide(g, portcullis.Call{Tool: "send_email", Session: "s1", Args: map[string]any{"to": "evil@example.com"}}, portcullis.OutcomeDeny)
	decide(g, portcullis.Call{Tool: "login", Session: "s1", Args: map[string]any{"user": "u", "password": "hunter2"}}, portcullis.OutcomeConfirm)
	for i, want := range []portcullis.Outcome{portcullis.OutcomeAllow, portcullis.OutcomeAllow, portcullis.OutcomeAllow, portcullis.OutcomeConfirm} {
		d := decide(g, portcullis.Call{Tool: "edit_item", Agent: "bot", Session: "s2", Run: &portcullis.Run{ID: "r1"}, Args: map[string]any{"n": i}}, want)
		if i == 3 && d.Code != portcullis.CodeAutonomyPause {
			t.Fatalf("fourth step: code %s; want AUTONOMY_PAUSE", d.Code)
		}
	}
	decide(g, portcullis.Call{Tool: "run_sql", Agent: "bot", Session: "s2", Run: &portcullis.Run{ID: "r2"}, Args: map[string]any{"q": "DROP TABLE users"}}, portcullis.OutcomeStop)
	decide(g, portcullis.Call{Tool: "list_items", Agent: "bot", Session: "s2"}, portcullis.OutcomeStop)
	decide(g, portcullis.Call{Tool: "read_text", Session: "s3", Upstream: &portcullis.UpstreamTool{Server: "fs", Offered: true, Annotated: true, ReadOnly: true, Trusted: true}}, portcullis.OutcomeAllow)
	decide(g, portcullis.Call{Tool: "ghost", Session: "s3", Upstream: &portcullis.UpstreamTool{Offered: false}}, portcullis.OutcomeDeny)
	decide(trusted, portcullis.Call{Tool: "edit_item", Session: "s4", ActiveElements: []string{"Sandbox"}}, portcullis.OutcomeDeny)
	return stateDir, policyPath
}

// mailValidator is the stand-in model of the recorded run: it denies mail
// to evil.
type mailValidator struct{}

func (mailValidator) Validate(_ context.Context, r portcullis.ValidationRequest) (portcullis.Verdict, error) {
	to, _ := r.Args["to"].(string)
	return portcullis.Verdict{Allow: !strings.HasPrefix(to, "evil"), Confidence: 0.9, Reasoning: "mail policy", Provider: "test", Model: "m"}, nil
}

func replayChanges(t *testing.T, stdout string) ([]replayChange, replaySummary) {
	t.Helper()
	var changes []replayChange
	var sum *replaySummary
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		if sum != nil {
			t.Fatalf("a line after the summary: %s", line)
		}
		if strings.HasPrefix(line, `{"summary":`) {
			var s struct{ Summary replaySummary }
			if err := json.Unmarshal([]byte(line), &s); err != nil {
				t.Fatalf("summary line %q: %v", line, err)
			}
			sum = &s.Summary
			continue
		}
		var c replayChange
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatalf("line %q is not a change: %v", line, err)
		}
		changes = append(changes, c)
	}
	if sum == nil {
		t.Fatalf("no summary line in:\n%s", stdout)
	}
	return changes, *sum
}

func auditHead(t *testing.T, stateDir string) portcullis.AuditVerification {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(stateDir, "portcullis.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	v, err := portcullis.VerifyAudit(ctx, st, nil)
	if err != nil || !v.OK() {
		t.Fatalf("VerifyAudit = %+v, %v", v, err)
	}
	return v
}

func TestReplaySamePolicyChangesNothing(t *testing.T) {
	stateDir, policyPath := replayLog(t)
	before := auditHead(t, stateDir)
	code, stdout, stderr := runCLI(t, "", "policy", "replay", "--policy", policyPath, "--state", stateDir, "--json")
	if code != 0 {
		t.Fatalf("replay under the recording policy: exit %d; want 0\nstdout:\n%s\nstderr: %s", code, stdout, stderr)
	}
	changes, sum := replayChanges(t, stdout)
	if len(changes) != 0 {
		t.Errorf("replay under the policy that recorded the log reports %d changes; want none:\n%s", len(changes), stdout)
	}
	want := replaySummary{
		Policy: policyPath, Scanned: 20, Replayed: 18, Changed: 0,
		ByChange:     map[string]int64{},
		NotReplayed:  map[string]int64{skipBlock: 1},
		Redacted:     1,
		RedactedArgs: map[string]int64{"password": 1},
		FirstSeq:     1, LastSeq: 20,
	}
	if diff := cmp.Diff(want, sum, cmp.FilterPath(func(p cmp.Path) bool { return p.String() == "PolicyHash" }, cmp.Ignore())); diff != "" {
		t.Errorf("summary mismatch (-want +got):\n%s", diff)
	}
	if after := auditHead(t, stateDir); after != before {
		t.Errorf("the audit log changed during the replay: %+v, then %+v", before, after)
	}
}

func TestReplayReportsEveryChange(t *testing.T) {
	stateDir, _ := replayLog(t)
	newPolicy := writeTemp(t, t.TempDir(), "new.yaml", strings.NewReplacer(
		// create_item needs no confirmation any more, and Mailer allows it: rows 2 and 4 loosen
		"      confirm: [create_item]\n", "",
		"allow: [send_email, edit_item]", "allow: [send_email, edit_item, create_item]",
		// delete may be confirmed: rows 5 and 6 loosen (the retry stop counts as the denial it repeated)
		"deny: [delete_*]", "deny: [drop_*]",
		// mail is a delete that cannot be elevated: row 9 needs a confirmation (row 10: the validator still denies evil)
		"send_email:  {endpoint: CREATE, risk: external-write}", "send_email:  {endpoint: DELETE, canBeElevated: false, risk: external-write}",
		// read_text is classified by the policy now, as a delete
		"  run_sql:", "  read_text:   {endpoint: DELETE}\n  run_sql:",
		// a longer budget: row 15 no longer pauses
		"maxAutonomousSteps: 3", "maxAutonomousSteps: 5",
		// the validator now judges every shell command; it never saw Bash
		"  command: [judge]\n", "  command: [judge]\n  scope: {risks: [external-write], shell: true}\n",
	).Replace(replayPolicy))
	code, stdout, stderr := runCLI(t, "", "policy", "replay", "--policy", newPolicy, "--state", stateDir, "--json")
	if code != 1 {
		t.Fatalf("exit %d; want 1 (changes)\nstdout:\n%s\nstderr: %s", code, stdout, stderr)
	}
	changes, sum := replayChanges(t, stdout)
	type row struct {
		Tool, Kind, Change string
		Redacted           []string
	}
	var got []row
	for _, c := range changes {
		got = append(got, row{c.Tool, c.Kind, c.Change, c.Redacted})
	}
	want := []row{
		{"create_item", "looser", "confirm CONFIRM_SESSION → allow AUTO_APPROVE", nil},
		{"create_item", "looser", "confirm CONFIRM_SESSION → allow AUTO_APPROVE", nil},
		{"delete_item", "looser", "deny DENY → confirm CONFIRM_SINGLE_USE", nil},
		{"delete_item", "looser", "deny DENY → confirm CONFIRM_SINGLE_USE", nil},
		{"Bash", "validator", "allow AUTO_APPROVE, now judged by the validator", nil},
		{"Bash", "validator", "confirm CONFIRM_SINGLE_USE, now judged by the validator", nil},
		{"send_email", "stricter", "allow AUTO_APPROVE → confirm CONFIRM_SINGLE_USE", nil},
		{"edit_item", "looser", "confirm CONFIRM_SINGLE_USE → allow AUTO_APPROVE", nil},
		{"read_text", "stricter", "allow AUTO_APPROVE → confirm CONFIRM_SINGLE_USE", nil},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("changes mismatch (-want +got):\n%s\nstdout:\n%s", diff, stdout)
	}
	if sum.Changed != int64(len(want)) || sum.Replayed != 18 || sum.Unjudged != 2 || sum.Validator != 2 || sum.Stricter != 2 || sum.Looser != 5 {
		t.Errorf("summary = %+v; want %d changed (2 stricter, 5 looser, 2 newly judged) of 18 replayed", sum, len(want))
	}
	// The retry guard's stop (row 6) is compared as the denial it repeated.
	if c := changes[3]; c.Seq != 6 || c.Old.Code != portcullis.CodeRetryLoop || c.Old.Outcome != portcullis.OutcomeStop {
		t.Errorf("fourth change = %+v; want row 6, the retry guard's stop compared as a deny", c)
	}
	// The session grant's allow (row 4) is compared as the confirmation it was.
	if c := changes[1]; c.Seq != 4 || c.Old.Source != portcullis.SourceSessionGrant || c.Old.Outcome != portcullis.OutcomeAllow {
		t.Errorf("second change = %+v; want row 4, allowed by a grant, compared as a confirmation", c)
	}
}

func TestReplayTable(t *testing.T) {
	stateDir, _ := replayLog(t)
	newPolicy := writeTemp(t, t.TempDir(), "new.yaml", strings.Replace(replayPolicy,
		"  login:       {endpoint: UPDATE, redact: [password]}", "  login:       {endpoint: READ, redact: [password]}", 1))
	code, stdout, stderr := runCLI(t, "", "policy", "replay", "--policy", newPolicy, "--state", stateDir, "--progress", "5")
	if code != 1 {
		t.Fatalf("exit %d; want 1\nstdout:\n%s\nstderr: %s", code, stdout, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "SEQ") {
		t.Fatalf("want a table with a header:\n%s", stdout)
	}
	for _, want := range []string{
		"login  confirm CONFIRM_SINGLE_USE  allow AUTO_APPROVE  redacted: password",
		"Replayed 18 decisions (rows 1-20 of 20 audit rows read)",
		"1 would change (0 stricter, 1 looser)",
		"1  confirm CONFIRM_SINGLE_USE → allow AUTO_APPROVE",
		`1 decision had redacted arguments (password ×1): they were replayed with "[redacted]" in their place`,
		"1 decision not replayed: " + skipBlock,
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, "replayed 15 rows (up to row 15), 1 change so far") {
		t.Errorf("stderr lacks the progress lines:\n%s", stderr)
	}
}

func TestReplaySince(t *testing.T) {
	stateDir, policyPath := replayLog(t)
	code, stdout, stderr := runCLI(t, "", "policy", "replay", "--policy", policyPath, "--state", stateDir, "--since", "2099-01-01T00:00:00Z", "--json")
	if code != 0 {
		t.Fatalf("exit %d; stderr: %s", code, stderr)
	}
	_, sum := replayChanges(t, stdout)
	if sum.Scanned != 0 || sum.Replayed != 0 {
		t.Errorf("--since in the future: %d scanned, %d replayed; want none", sum.Scanned, sum.Replayed)
	}
	code, stdout, stderr = runCLI(t, "", "policy", "replay", "--policy", policyPath, "--state", stateDir, "--since", "1h", "--json")
	if code != 0 {
		t.Fatalf("exit %d; stderr: %s", code, stderr)
	}
	if _, sum := replayChanges(t, stdout); sum.Replayed != 18 {
		t.Errorf("--since 1h: %d replayed; want 18", sum.Replayed)
	}
}

func TestReplayErrors(t *testing.T) {
	_, policyPath := replayLog(t)
	empty := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no log", []string{"policy", "replay", "--policy", policyPath, "--state", empty}, "no audit log to replay"},
		{"bad policy", []string{"policy", "replay", "--policy", "testdata/bad_policy.yaml", "--state", empty}, "bad_policy.yaml"},
		{"bad since", []string{"policy", "replay", "--policy", policyPath, "--state", empty, "--since", "yesterday"}, "--since"},
		{"positional", []string{"policy", "replay", policyPath}, "unexpected argument"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, "", tc.args...)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want exit 2 naming %q", code, stderr, tc.want)
			}
		})
	}
	if entries, err := filepath.Glob(filepath.Join(empty, "*")); err != nil || len(entries) != 0 {
		t.Errorf("replay created %v in an empty state directory", entries)
	}
}

// TestLegacyTraceFacts checks that a row written before trace entries
// carried facts is read from its prose, as the gate wrote it then.
func TestLegacyTraceFacts(t *testing.T) {
	for _, tc := range []struct {
		entry portcullis.TraceEntry
		d     portcullis.Decision
		want  *portcullis.UpstreamTool
	}{
		{portcullis.TraceEntry{Stage: "route", Result: `no upstream server offers a tool named "x"`}, portcullis.Decision{}, &portcullis.UpstreamTool{}},
		{portcullis.TraceEntry{Stage: "route", Result: `w: DELETE, base level CONFIRM_SINGLE_USE, not elevatable (MCP annotations of upstream "a \"b\"", pinned)`}, portcullis.Decision{Endpoint: portcullis.Delete},
			&portcullis.UpstreamTool{Server: `a "b"`, Offered: true, Annotated: true, Trusted: true, Destructive: true}},
		{portcullis.TraceEntry{Stage: "route", Result: `w: UPDATE, base level CONFIRM_SINGLE_USE, risk external-write (MCP annotations of upstream "s", pinned); its definition changed since it was pinned: CONFIRM_SINGLE_USE, not elevatable, until a person accepts the change (portcullis tools accept)`},
			portcullis.Decision{Endpoint: portcullis.Update, Risk: portcullis.RiskExternalWrite},
			&portcullis.UpstreamTool{Server: "s", Offered: true, Annotated: true, Trusted: true, OpenWorld: true, Changed: true}},
		{portcullis.TraceEntry{Stage: "route", Result: `search: READ, base level AUTO_APPROVE; its definition changed since it was pinned: CONFIRM_SINGLE_USE, not elevatable, until a person accepts the change (portcullis tools accept)`},
			portcullis.Decision{}, &portcullis.UpstreamTool{Offered: true, Changed: true}},
		{portcullis.TraceEntry{Stage: "route", Result: `w: READ, base level AUTO_APPROVE (policy tools entry)`}, portcullis.Decision{}, nil},
	} {
		trace := []portcullis.TraceEntry{tc.entry}
		legacyTraceFacts(trace)
		if got := upstreamFromTrace(trace[0], tc.d.Endpoint, tc.d.Risk); !cmp.Equal(got, tc.want) {
			t.Errorf("old row %q: upstream %+v; want %+v", tc.entry.Result, got, tc.want)
		}
	}
	// Rows with facts: the hints that made a tool stricter and a tool new
	// since its upstream's set was pinned are read from the facts alone.
	for _, tc := range []struct {
		entry portcullis.TraceEntry
		d     portcullis.Decision
		want  *portcullis.UpstreamTool
	}{
		{portcullis.TraceEntry{Stage: "route", Result: "reworded", Upstream: "fs", Facts: []portcullis.Fact{portcullis.FactDestructiveHint}},
			portcullis.Decision{Endpoint: portcullis.Read}, &portcullis.UpstreamTool{Server: "fs", Offered: true, Annotated: true, Destructive: true}},
		{portcullis.TraceEntry{Stage: "route", Result: "reworded", Upstream: "web", Facts: []portcullis.Fact{portcullis.FactOpenWorldHint, portcullis.FactToolNew}},
			portcullis.Decision{}, &portcullis.UpstreamTool{Server: "web", Offered: true, Annotated: true, OpenWorld: true, New: true}},
		{portcullis.TraceEntry{Stage: "route", Result: "reworded", Upstream: "s", Facts: []portcullis.Fact{portcullis.FactUpstreamAnnotated}},
			portcullis.Decision{Endpoint: portcullis.Delete}, &portcullis.UpstreamTool{Server: "s", Offered: true, Annotated: true, Trusted: true, Destructive: true}},
		{portcullis.TraceEntry{Stage: "route", Result: "reworded", Facts: []portcullis.Fact{portcullis.FactToolNew}},
			portcullis.Decision{}, &portcullis.UpstreamTool{Offered: true, New: true}},
	} {
		if got := upstreamFromTrace(tc.entry, tc.d.Endpoint, tc.d.Risk); !cmp.Equal(got, tc.want) {
			t.Errorf("row with facts %v: upstream %+v; want %+v", tc.entry.Facts, got, tc.want)
		}
	}
	trace := []portcullis.TraceEntry{
		{Stage: "autonomy", Result: "pause: the run has taken 3 steps of 3 (step 3 (run state from the store), risk 0.2, tier advisory)"},
		{Stage: "validator", Result: "no verdict (timeout): fail closed"},
	}
	legacyTraceFacts(trace)
	if !trace[0].Has(portcullis.FactRunStateFromStore) || trace[0].Step != 3 {
		t.Errorf("old autonomy entry read as %+v; want step 3 from the store", trace[0])
	}
	if !validatorFailed(trace) {
		t.Errorf("old validator entry %q not read as no verdict", trace[1].Result)
	}
	if !slices.Equal(redactedArgs(map[string]any{"a": portcullis.RedactedValue, "b": "x", "c": portcullis.RedactedValue}), []string{"a", "c"}) {
		t.Errorf("redactedArgs does not name both redacted arguments")
	}
}

// TestReplayReadsTraceFacts replays rows whose decision depended on what
// only the trace records (an upstream tool no server offers, one classified
// by its pinned annotations, a changed definition, a run step from the
// store, a validator with no verdict) under the policy that recorded them:
// as written, with every entry's prose reworded (the facts decide), and as
// a row written before traces carried facts (the prose decides). Each
// must replay unchanged; a row with neither facts nor the old prose must
// not, which shows the replay depends on what it reads.
func TestReplayReadsTraceFacts(t *testing.T) {
	ctx := context.Background()
	pol, _, err := policy.Parse("old.yaml", []byte(replayPolicy))
	if err != nil {
		t.Fatal(err)
	}
	st := memstore.New(nil)
	g, err := gate.New(pol, gate.WithStore(st), gate.WithValidator(mailValidator{}))
	if err != nil {
		t.Fatal(err)
	}
	failing, err := gate.New(pol, gate.WithStore(st), gate.WithValidator(failValidator{}))
	if err != nil {
		t.Fatal(err)
	}
	decide := func(g *gate.Gate, c portcullis.Call) portcullis.Decision {
		t.Helper()
		d, err := g.Decide(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	var ids []string
	ids = append(ids, decide(g, portcullis.Call{Tool: "ghost", Session: "s", Upstream: &portcullis.UpstreamTool{Server: "fs"}}).DecisionID)
	ids = append(ids, decide(g, portcullis.Call{Tool: "read_text", Session: "s", Upstream: &portcullis.UpstreamTool{Server: "fs", Offered: true, Annotated: true, Trusted: true, ReadOnly: true}}).DecisionID)
	ids = append(ids, decide(g, portcullis.Call{Tool: "list_items", Session: "s", Upstream: &portcullis.UpstreamTool{Server: "fs", Offered: true, Changed: true}}).DecisionID)
	var last portcullis.Decision
	for i := range 4 {
		last = decide(g, portcullis.Call{Tool: "edit_item", Agent: "bot", Session: "s2", Run: &portcullis.Run{ID: "r1"}, Args: map[string]any{"n": i}})
	}
	if last.Code != portcullis.CodeAutonomyPause {
		t.Fatalf("fourth step of the run: %s %s; want AUTONOMY_PAUSE", last.Outcome, last.Code)
	}
	ids = append(ids, last.DecisionID)
	// A validator with no verdict denies, fail closed; a replay must tell
	// that from a store's failure (which it does not replay). The decision
	// names the validator as its source, so this row replays even without
	// the fact: it is not among the rows that need it.
	needFacts := len(ids)
	ids = append(ids, decide(failing, portcullis.Call{Tool: "send_email", Session: "s", Args: map[string]any{"to": "a@example.com"}}).DecisionID)

	recs, err := st.QueryAudit(ctx, portcullis.AuditQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]portcullis.AuditEvent{}
	for _, rec := range recs {
		ev, err := rec.Event()
		if err != nil {
			t.Fatal(err)
		}
		rows[ev.DecisionID] = ev
	}
	r, err := newReplayer(pol, "", time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	// variant rewrites a row's trace entry by entry.
	variant := func(ev portcullis.AuditEvent, edit func(*portcullis.TraceEntry)) portcullis.AuditRecord {
		d := *ev.Decision
		d.Trace = slices.Clone(d.Trace)
		for i := range d.Trace {
			edit(&d.Trace[i])
		}
		ev.Decision = &d
		body, err := portcullis.EncodeAuditBody(&ev)
		if err != nil {
			t.Fatal(err)
		}
		return portcullis.AuditRecord{Seq: 1, Body: body}
	}
	written := func(*portcullis.TraceEntry) {}
	reworded := func(e *portcullis.TraceEntry) { e.Result = "reworded: " + strings.ToUpper(e.Result) }
	oldFormat := func(e *portcullis.TraceEntry) { e.Facts, e.Upstream, e.Step = nil, "", 0 }
	neither := func(e *portcullis.TraceEntry) { oldFormat(e); reworded(e) }
	for i, id := range ids {
		ev, ok := rows[id]
		if !ok {
			t.Fatalf("no audit row for decision %s", id)
		}
		if !slices.ContainsFunc(ev.Decision.Trace, func(e portcullis.TraceEntry) bool { return len(e.Facts) > 0 }) {
			t.Errorf("%s: the recorded trace has no facts: %+v", ev.Tool, ev.Decision.Trace)
		}
		for _, v := range []struct {
			name string
			edit func(*portcullis.TraceEntry)
		}{{"as written", written}, {"reworded", reworded}, {"old format", oldFormat}} {
			res := r.replay(ctx, variant(ev, v.edit))
			if !res.decision || res.skip != "" || res.change != nil {
				t.Errorf("%s row %s: replayed as %+v (change %+v); want unchanged", v.name, ev.Tool, res, res.change)
			}
		}
		if res := r.replay(ctx, variant(ev, neither)); i < needFacts && res.skip == "" && res.change == nil {
			t.Errorf("%s row with neither facts nor the old prose replayed unchanged: the test does not exercise what replay reads", ev.Tool)
		}
	}
}

// failValidator gives no verdict.
type failValidator struct{}

func (failValidator) Validate(context.Context, portcullis.ValidationRequest) (portcullis.Verdict, error) {
	return portcullis.Verdict{FailClosed: true, Reasoning: "timeout"}, nil
}

// TestReplayRunStopsOnError checks that the pipeline ends, with the error,
// when a change cannot be written or the context is cancelled, however
// many workers are still busy.
func TestReplayRunStopsOnError(t *testing.T) {
	stateDir, _ := replayLog(t)
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(stateDir, "portcullis.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	pol, _, err := policy.Parse("new.yaml", []byte(strings.Replace(replayPolicy, "deny: [delete_*]", "deny: [drop_*]", 1)))
	if err != nil {
		t.Fatal(err)
	}
	newRun := func() *replayRun {
		r := &replayRun{sum: replaySummary{ByChange: map[string]int64{}, NotReplayed: map[string]int64{}, RedactedArgs: map[string]int64{}}}
		for range 4 {
			w, err := newReplayer(pol, stateDir, time.Time{}, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			r.workers = append(r.workers, w)
		}
		return r
	}

	r := newRun()
	broken := errors.New("stdout is closed")
	r.emit = func(*replayChange) error { return broken }
	if err := r.run(ctx, st, 0); !errors.Is(err, broken) {
		t.Errorf("run with a failing writer = %v; want %v", err, broken)
	}
	if r.sum.Changed != 1 {
		t.Errorf("%d changes accounted; want the run to stop at the first", r.sum.Changed)
	}

	r = newRun()
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	r.emit = func(*replayChange) error { return nil }
	if err := r.run(cctx, st, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("run with a cancelled context = %v; want context.Canceled", err)
	}

	// In order, whatever the number of workers.
	r = newRun()
	var seqs []int64
	r.emit = func(c *replayChange) error { seqs = append(seqs, c.Seq); return nil }
	if err := r.run(ctx, st, 0); err != nil {
		t.Fatal(err)
	}
	if want := []int64{5, 6}; !slices.Equal(seqs, want) {
		t.Errorf("changes at rows %v; want %v", seqs, want)
	}
	if r.sum.Scanned != 20 {
		t.Errorf("scanned %d rows; want 20", r.sum.Scanned)
	}
}

func TestReplayStoreURL(t *testing.T) {
	stateDir, policyPath := replayLog(t)
	code, stdout, stderr := runCLI(t, "", "policy", "replay", "--policy", policyPath, "--store", "sqlite://"+filepath.Join(stateDir, "portcullis.db"), "--json")
	if code != 0 {
		t.Fatalf("exit %d; stderr: %s", code, stderr)
	}
	if _, sum := replayChanges(t, stdout); sum.Replayed != 18 {
		t.Errorf("--store sqlite://...: %d replayed; want 18", sum.Replayed)
	}
}
