package replay_test

import (
	"context"
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
	"github.com/portcullis/portcullis/replay"
	"github.com/portcullis/portcullis/replay/replaytest"
	"github.com/portcullis/portcullis/sqlite"
)

// openLog opens the SQLite audit log replaytest.Record wrote.
func openLog(t testing.TB, stateDir string) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(stateDir, "portcullis.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	return st
}

// parse parses a policy given as text.
func parse(t testing.TB, name, text string) *portcullis.Policy {
	t.Helper()
	pol, _, err := policy.Parse(name, []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

// runReplay replays log under pol with opts.
func runReplay(t *testing.T, log replay.Log, pol *portcullis.Policy, opts replay.Options) *replay.Report {
	t.Helper()
	r, err := replay.New(pol, opts)
	if err != nil {
		t.Fatalf("New(%s) = %v", pol.Source, err)
	}
	rep, err := r.Run(context.Background(), log)
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
	return rep
}

func TestSamePolicyChangesNothing(t *testing.T) {
	stateDir, policyPath := replaytest.Record(t)
	st := openLog(t, stateDir)
	ctx := context.Background()
	before, err := portcullis.VerifyAudit(ctx, st, nil)
	if err != nil || !before.OK() {
		t.Fatalf("VerifyAudit = %+v, %v", before, err)
	}
	pol, _, err := policy.Load(policyPath)
	if err != nil {
		t.Fatal(err)
	}
	rep := runReplay(t, st, pol, replay.Options{ProtectedPaths: []string{stateDir}})
	if len(rep.Changes) != 0 {
		t.Errorf("replay under the policy that recorded the log reports %d changes; want none: %+v", len(rep.Changes), rep.Changes)
	}
	want := replay.Summary{
		Policy: policyPath, PolicyHash: pol.Hash, Scanned: 20, Replayed: 18, Changed: 0,
		ByChange:     map[string]int64{},
		NotReplayed:  map[string]int64{replay.SkipBlock: 1},
		Redacted:     1,
		RedactedArgs: map[string]int64{"password": 1},
		FirstSeq:     1, LastSeq: 20,
	}
	if diff := cmp.Diff(want, rep.Summary); diff != "" {
		t.Errorf("summary mismatch (-want +got):\n%s", diff)
	}
	after, err := portcullis.VerifyAudit(ctx, st, nil)
	if err != nil || after != before {
		t.Errorf("the audit log changed during the replay: %+v, then %+v (%v)", before, after, err)
	}
}

func TestReportsEveryChange(t *testing.T) {
	stateDir, _ := replaytest.Record(t)
	pol := parse(t, "new.yaml", strings.NewReplacer(
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
	).Replace(replaytest.Policy))
	rep := runReplay(t, openLog(t, stateDir), pol, replay.Options{})
	type row struct {
		Tool     string
		Kind     replay.Kind
		Change   string
		Redacted []string
	}
	var got []row
	for _, c := range rep.Changes {
		got = append(got, row{c.Tool, c.Kind, c.Change, c.Redacted})
	}
	want := []row{
		{"create_item", replay.KindLooser, "confirm CONFIRM_SESSION → allow AUTO_APPROVE", nil},
		{"create_item", replay.KindLooser, "confirm CONFIRM_SESSION → allow AUTO_APPROVE", nil},
		{"delete_item", replay.KindLooser, "deny DENY → confirm CONFIRM_SINGLE_USE", nil},
		{"delete_item", replay.KindLooser, "deny DENY → confirm CONFIRM_SINGLE_USE", nil},
		{"Bash", replay.KindValidator, "allow AUTO_APPROVE, now judged by the validator", nil},
		{"Bash", replay.KindValidator, "confirm CONFIRM_SINGLE_USE, now judged by the validator", nil},
		{"send_email", replay.KindStricter, "allow AUTO_APPROVE → confirm CONFIRM_SINGLE_USE", nil},
		{"edit_item", replay.KindLooser, "confirm CONFIRM_SINGLE_USE → allow AUTO_APPROVE", nil},
		{"read_text", replay.KindStricter, "allow AUTO_APPROVE → confirm CONFIRM_SINGLE_USE", nil},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("changes mismatch (-want +got):\n%s", diff)
	}
	if s := rep.Summary; s.Changed != int64(len(want)) || s.Replayed != 18 || s.Unjudged != 2 || s.Validator != 2 || s.Stricter != 2 || s.Looser != 5 {
		t.Errorf("summary = %+v; want %d changed (2 stricter, 5 looser, 2 newly judged) of 18 replayed", s, len(want))
	}
	if len(got) != len(want) {
		return
	}
	// The retry guard's stop (row 6) is compared as the denial it repeated.
	if c := rep.Changes[3]; c.Seq != 6 || c.Old.Code != portcullis.CodeRetryLoop || c.Old.Outcome != portcullis.OutcomeStop {
		t.Errorf("fourth change = %+v; want row 6, the retry guard's stop compared as a deny", c)
	}
	// The session grant's allow (row 4) is compared as the confirmation it was.
	if c := rep.Changes[1]; c.Seq != 4 || c.Old.Source != portcullis.SourceSessionGrant || c.Old.Outcome != portcullis.OutcomeAllow {
		t.Errorf("second change = %+v; want row 4, allowed by a grant, compared as a confirmation", c)
	}
	// A redacted argument is named, and the autonomous step says what the
	// log does not keep.
	if c := rep.Changes[7]; !slices.ContainsFunc(c.Notes, func(n string) bool { return strings.Contains(n, "previous step outcome") }) {
		t.Errorf("the autonomous step's change has notes %q; want one about the previous step's outcome", c.Notes)
	}
}

func TestRedactedArgumentsAreNamed(t *testing.T) {
	stateDir, _ := replaytest.Record(t)
	pol := parse(t, "new.yaml", strings.Replace(replaytest.Policy,
		"  login:       {endpoint: UPDATE, redact: [password]}", "  login:       {endpoint: READ, redact: [password]}", 1))
	rep := runReplay(t, openLog(t, stateDir), pol, replay.Options{})
	if len(rep.Changes) != 1 || rep.Changes[0].Tool != "login" || !slices.Equal(rep.Changes[0].Redacted, []string{"password"}) {
		t.Errorf("changes = %+v; want login, with its password named as redacted", rep.Changes)
	}
}

func TestWindow(t *testing.T) {
	stateDir, policyPath := replaytest.Record(t)
	st := openLog(t, stateDir)
	pol, _, err := policy.Load(policyPath)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, tc := range []struct {
		name              string
		since, until      time.Time
		scanned, replayed int64
	}{
		{"whole log", time.Time{}, time.Time{}, 20, 18},
		{"since an hour ago", now.Add(-time.Hour), time.Time{}, 20, 18},
		{"since the future", now.Add(time.Hour), time.Time{}, 0, 0},
		{"until an hour ago", time.Time{}, now.Add(-time.Hour), 20, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := runReplay(t, st, pol, replay.Options{Since: tc.since, Until: tc.until}).Summary
			if s.Scanned != tc.scanned || s.Replayed != tc.replayed {
				t.Errorf("Run(since %v, until %v) scanned %d rows, replayed %d; want %d, %d", tc.since, tc.until, s.Scanned, s.Replayed, tc.scanned, tc.replayed)
			}
			if !s.Since.Equal(tc.since) || !s.Until.Equal(tc.until) {
				t.Errorf("summary window %v–%v; want %v–%v", s.Since, s.Until, tc.since, tc.until)
			}
		})
	}
}

// TestReadsTraceFacts replays rows whose decision depended on what only
// the trace records (an upstream tool no server offers, one classified by
// its pinned annotations, a changed definition, a run step from the store,
// a validator with no verdict) under the policy that recorded them: as
// written, with every entry's prose reworded (the facts decide), and as a
// row written before traces carried facts (the prose decides). Each must
// replay unchanged; a row with neither facts nor the old prose must not,
// which shows the replay depends on what it reads.
func TestReadsTraceFacts(t *testing.T) {
	ctx := context.Background()
	pol := parse(t, "old.yaml", replaytest.Policy)
	st := memstore.New(nil)
	g, err := gate.New(pol, gate.WithStore(st), gate.WithValidator(replaytest.MailValidator{}))
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
	r, err := replay.New(pol, replay.Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	// variant replays a row with its trace rewritten entry by entry, alone
	// in a log of its own.
	variant := func(ev portcullis.AuditEvent, edit func(*portcullis.TraceEntry)) replay.Summary {
		t.Helper()
		d := *ev.Decision
		d.Trace = slices.Clone(d.Trace)
		for i := range d.Trace {
			edit(&d.Trace[i])
		}
		ev.Decision = &d
		log := memstore.New(nil)
		if _, err := log.AppendAudit(ctx, ev); err != nil {
			t.Fatal(err)
		}
		rep, err := r.Run(ctx, log)
		if err != nil {
			t.Fatal(err)
		}
		return rep.Summary
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
			if s := variant(ev, v.edit); s.Replayed != 1 || s.Changed != 0 {
				t.Errorf("%s row %s: %d replayed, %d changed, not replayed %v; want replayed unchanged", v.name, ev.Tool, s.Replayed, s.Changed, s.NotReplayed)
			}
		}
		if s := variant(ev, neither); i < needFacts && s.Replayed == 1 && s.Changed == 0 {
			t.Errorf("%s row with neither facts nor the old prose replayed unchanged: the test does not exercise what replay reads", ev.Tool)
		}
	}
}

// failValidator gives no verdict.
type failValidator struct{}

func (failValidator) Validate(context.Context, portcullis.ValidationRequest) (portcullis.Verdict, error) {
	return portcullis.Verdict{FailClosed: true, Reasoning: "timeout"}, nil
}

// TestRunStopsOnError checks that a replay ends, with the error, when a
// change cannot be taken or the context is cancelled, however many workers
// are still busy; and that changes come in log order.
func TestRunStopsOnError(t *testing.T) {
	stateDir, _ := replaytest.Record(t)
	ctx := context.Background()
	st := openLog(t, stateDir)
	pol := parse(t, "new.yaml", strings.Replace(replaytest.Policy, "deny: [delete_*]", "deny: [drop_*]", 1))
	run := func(ctx context.Context, opts replay.Options) (*replay.Report, error) {
		opts.Workers = 4
		r, err := replay.New(pol, opts)
		if err != nil {
			t.Fatal(err)
		}
		return r.Run(ctx, st)
	}

	broken := errors.New("stdout is closed")
	rep, err := run(ctx, replay.Options{OnChange: func(*replay.Change) error { return broken }})
	if !errors.Is(err, broken) {
		t.Errorf("Run with a failing OnChange = %v; want %v", err, broken)
	}
	if rep.Summary.Changed != 1 {
		t.Errorf("%d changes accounted; want the run to stop at the first", rep.Summary.Changed)
	}

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := run(cctx, replay.Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Run with a cancelled context = %v; want context.Canceled", err)
	}

	var seqs []int64
	var progress []replay.Progress
	rep, err = run(ctx, replay.Options{
		OnChange:      func(c *replay.Change) error { seqs = append(seqs, c.Seq); return nil },
		OnProgress:    func(p replay.Progress) { progress = append(progress, p) },
		ProgressEvery: 5,
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{5, 6}; !slices.Equal(seqs, want) {
		t.Errorf("changes at rows %v; want %v", seqs, want)
	}
	if len(rep.Changes) != 0 {
		t.Errorf("the report keeps %d changes given to OnChange; want none", len(rep.Changes))
	}
	if rep.Summary.Scanned != 20 {
		t.Errorf("scanned %d rows; want 20", rep.Summary.Scanned)
	}
	want := []replay.Progress{{Scanned: 5, Seq: 5, Changed: 1}, {Scanned: 10, Seq: 10, Changed: 2}, {Scanned: 15, Seq: 15, Changed: 2}, {Scanned: 20, Seq: 20, Changed: 2}}
	if diff := cmp.Diff(want, progress); diff != "" {
		t.Errorf("progress mismatch (-want +got):\n%s", diff)
	}
}

func TestNewRefusesAPolicyTheGateRefuses(t *testing.T) {
	pol := parse(t, "ok.yaml", replaytest.Policy)
	pol.Tools = append(pol.Tools, portcullis.ToolPolicy{Name: "Shell", Endpoint: portcullis.Execute, ShellArg: "cmd"})
	pol.Shell.Rules = append(pol.Shell.Rules, portcullis.ShellRule{Pattern: [][]string{{"git"}}, Decision: portcullis.ShellAllow, Match: []string{"rm -rf /"}})
	if _, err := replay.New(pol, replay.Options{}); err == nil {
		t.Errorf("New with a shell rule whose example does not match = nil; want the gate's error")
	}
}
