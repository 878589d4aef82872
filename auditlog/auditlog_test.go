package auditlog_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/auditlog"
	"github.com/portcullis/portcullis/sqlite"
)

// start is when the first test row was written; row i is i minutes later.
var start = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// openLog opens a real SQLite store holding n decision rows, and returns
// it with the path of its file.
func openLog(t *testing.T, n int) (*sqlite.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "portcullis.db")
	st, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	appendRows(t, st, 0, n)
	return st, path
}

// appendRows writes rows from+1 to from+n.
func appendRows(t *testing.T, st portcullis.AuditLog, from, n int) {
	t.Helper()
	var evs []portcullis.AuditEvent
	for i := from + 1; i <= from+n; i++ {
		outcome := portcullis.OutcomeAllow
		if i%2 == 0 {
			outcome = portcullis.OutcomeDeny
		}
		evs = append(evs, portcullis.AuditEvent{
			Kind: portcullis.AuditDecision, Time: start.Add(time.Duration(i) * time.Minute),
			DecisionID: fmt.Sprintf("d%d", i), Session: "s1", Agent: "bot", Tool: "list_elements", Outcome: outcome,
			Request:   &portcullis.Call{Tool: "list_elements", Session: "s1", Agent: "bot"},
			Decision:  &portcullis.Decision{Outcome: outcome, PermissionLevel: portcullis.AutoApprove, Reason: fmt.Sprintf("row %d", i)},
			LatencyNS: int64(1000 * i),
		})
	}
	for len(evs) > 0 {
		k := min(len(evs), 500)
		if _, err := st.AppendAudit(context.Background(), evs[:k]...); err != nil {
			t.Fatal(err)
		}
		evs = evs[k:]
	}
}

func seqs(recs []portcullis.AuditRecord) []int64 {
	out := []int64{}
	for _, r := range recs {
		out = append(out, r.Seq)
	}
	return out
}

func TestParseWhen(t *testing.T) {
	now := time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Time
		bad  bool
	}{
		{in: "", want: time.Time{}},
		{in: "2026-03-01T12:00:00Z", want: start},
		{in: "2026-03-01T12:00:00.5+01:00", want: start.Add(-time.Hour + 500*time.Millisecond)},
		{in: "90m", want: now.Add(-90 * time.Minute)},
		{in: "24h", want: now.Add(-24 * time.Hour)},
		{in: "7d", want: now.Add(-7 * 24 * time.Hour)},
		{in: "0d", want: now},
		{in: "yesterday", bad: true},
		{in: "-5m", bad: true},
		{in: "-1d", bad: true},
		{in: "d", bad: true},
	} {
		got, err := auditlog.ParseWhen(tc.in, now)
		switch {
		case tc.bad && err == nil:
			t.Errorf("ParseWhen(%q) = %v; want an error", tc.in, got)
		case !tc.bad && (err != nil || !got.Equal(tc.want)):
			t.Errorf("ParseWhen(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestTail(t *testing.T) {
	ctx := context.Background()
	empty, _ := openLog(t, 0)
	if recs, last, err := auditlog.Tail(ctx, empty, 5); err != nil || len(recs) != 0 || last != 0 {
		t.Fatalf("Tail(empty, 5) = %v, %d, %v; want nothing", seqs(recs), last, err)
	}
	st, _ := openLog(t, 6)
	for _, tc := range []struct {
		n    int
		want []int64
	}{
		{0, []int64{}},
		{1, []int64{6}},
		{3, []int64{4, 5, 6}},
		{10, []int64{1, 2, 3, 4, 5, 6}},
	} {
		recs, last, err := auditlog.Tail(ctx, st, tc.n)
		if err != nil || last != 6 {
			t.Fatalf("Tail(%d) = last %d, %v; want last 6", tc.n, last, err)
		}
		if diff := cmp.Diff(tc.want, seqs(recs)); diff != "" {
			t.Errorf("Tail(%d) rows (-want +got):\n%s", tc.n, diff)
		}
	}
}

func TestFollow(t *testing.T) {
	st, _ := openLog(t, 3)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu  sync.Mutex
		got []int64
	)
	done := make(chan error, 1)
	go func() {
		done <- auditlog.Follow(ctx, st, 2, time.Millisecond, func(recs []portcullis.AuditRecord) error {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, seqs(recs)...)
			if len(got) == 4 {
				cancel()
			}
			return nil
		})
	}()
	appendRows(t, st, 3, 3)
	if err := <-done; err != nil {
		t.Fatalf("Follow ended with %v; want nil when its context ends", err)
	}
	if diff := cmp.Diff([]int64{3, 4, 5, 6}, got); diff != "" {
		t.Fatalf("Follow after row 2 handed over (-want +got):\n%s", diff)
	}

	// An error of fn ends it with that error.
	stop := errors.New("stop")
	if err := auditlog.Follow(context.Background(), st, 0, time.Millisecond, func([]portcullis.AuditRecord) error { return stop }); err != stop {
		t.Fatalf("Follow with a failing fn = %v; want its error", err)
	}
	if err := auditlog.Follow(context.Background(), st, 0, 0, nil); err == nil {
		t.Fatal("Follow with interval 0 succeeded; want an error")
	}
}

func TestExport(t *testing.T) {
	ctx := context.Background()
	st, _ := openLog(t, 2300) // more than two pages
	for _, tc := range []struct {
		name        string
		q           portcullis.AuditQuery
		first, last int64
		n           int
	}{
		{"all", portcullis.AuditQuery{}, 1, 2300, 2300},
		{"newest is ignored", portcullis.AuditQuery{Newest: true}, 1, 2300, 2300},
		{"limit across pages", portcullis.AuditQuery{Limit: 1500}, 1, 1500, 1500},
		{"filtered", portcullis.AuditQuery{Outcome: portcullis.OutcomeDeny, Since: start.Add(2001 * time.Minute)}, 2002, 2300, 150},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			n, err := auditlog.Export(ctx, st, tc.q, &buf)
			if err != nil || n != tc.n {
				t.Fatalf("Export = %d, %v; want %d rows", n, err, tc.n)
			}
			lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
			if len(lines) != tc.n {
				t.Fatalf("Export wrote %d lines; want %d", len(lines), tc.n)
			}
			var first, last auditlog.DecisionLogLine
			if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil {
				t.Fatal(err)
			}
			if first.Portcullis.Seq != tc.first || last.Portcullis.Seq != tc.last {
				t.Fatalf("Export rows %d..%d; want %d..%d", first.Portcullis.Seq, last.Portcullis.Seq, tc.first, tc.last)
			}
		})
	}
}

func TestDecisionLog(t *testing.T) {
	st, _ := openLog(t, 2)
	recs, err := st.QueryAudit(context.Background(), portcullis.AuditQuery{AfterSeq: 1})
	if err != nil || len(recs) != 1 {
		t.Fatalf("QueryAudit = %d rows, %v", len(recs), err)
	}
	line, err := auditlog.DecisionLog(recs[0])
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(line)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"decision_id": "d2",
		"timestamp":   "2026-03-01T12:02:00Z",
		"path":        "portcullis/decision",
		"input":       map[string]any{"tool": "list_elements", "session": "s1", "agent": "bot", "activeElements": nil},
		"metrics":     map[string]any{"timer_portcullis_decide_ns": float64(2000)},
		"labels":      map[string]any{"app": "portcullis"},
		"portcullis": map[string]any{
			"seq": float64(2), "kind": "decision", "hash": recs[0].Hash, "prev_hash": recs[0].PrevHash,
			"session": "s1", "agent": "bot",
		},
	}
	result := got["result"]
	delete(got, "result")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("DecisionLog (-want +got):\n%s", diff)
	}
	if r, ok := result.(map[string]any); !ok || r["outcome"] != "deny" || r["reason"] != "row 2" {
		t.Errorf("DecisionLog result = %v; want the row's decision", result)
	}
}

const key = "an-audit-key-0123456789abcdef"

func keyOf(k string) func() (string, error) { return func() (string, error) { return k, nil } }

// heads is a witness kept in memory.
type heads struct {
	name string
	kept []portcullis.AuditCheckpoint
	err  error
}

func (h *heads) Name() string { return h.name }

func (h *heads) Heads(context.Context) ([]portcullis.AuditCheckpoint, error) { return h.kept, h.err }

func head(t *testing.T, st portcullis.AuditLog, seq int64, k string) portcullis.AuditCheckpoint {
	t.Helper()
	recs, err := st.QueryAudit(context.Background(), portcullis.AuditQuery{AfterSeq: seq - 1, Limit: 1})
	if err != nil || len(recs) != 1 {
		t.Fatalf("row %d: %v", seq, err)
	}
	h := portcullis.AuditCheckpoint{Seq: seq, Hash: recs[0].Hash, Time: start.Add(time.Hour)}
	h.Signature = auditlog.SignHead(k, h)
	return h
}

func TestVerify(t *testing.T) {
	ctx := context.Background()
	st, path := openLog(t, 6)

	var progress []int64
	rep, err := auditlog.Verify(ctx, st, auditlog.VerifyOptions{
		Progress: func(rows, seq int64) { progress = append(progress, rows, seq) }, ProgressEvery: 4,
	})
	if err != nil || !rep.Verification.OK() || rep.Verification.Rows != 6 || rep.Head() != 6 || rep.Checkpoint != nil || rep.Kept != 0 {
		t.Fatalf("Verify = %+v, %v; want 6 rows from the start", rep, err)
	}
	if diff := cmp.Diff([]int64{4, 4}, progress); diff != "" {
		t.Errorf("progress every 4 rows (-want +got):\n%s", diff)
	}

	// Kept heads: a person's anchor and a witness's heads.
	w := &heads{name: "w1", kept: []portcullis.AuditCheckpoint{head(t, st, 3, key), head(t, st, 5, key)}}
	anchor := portcullis.AuditAnchor{Seq: 6, Hash: rep.Verification.HeadHash, From: "--expect"}
	opts := auditlog.VerifyOptions{Key: keyOf(key), Anchors: []portcullis.AuditAnchor{anchor}, Witnesses: []auditlog.HeadSource{w}}
	if rep, err := auditlog.Verify(ctx, st, opts); err != nil || !rep.Verification.OK() || rep.Kept != 3 || rep.Verification.Anchors != 3 {
		t.Fatalf("Verify with 3 kept heads = %+v, %v; want all 3 matched", rep, err)
	}

	// What makes the kept heads untrustworthy is a *VerifyError.
	for _, tc := range []struct {
		name string
		opts auditlog.VerifyOptions
		want string
	}{
		{"no key", auditlog.VerifyOptions{Witnesses: []auditlog.HeadSource{w}}, "cannot be checked without the audit key"},
		{"key unreadable", auditlog.VerifyOptions{Key: func() (string, error) { return "", errors.New("no audit.key") }, Witnesses: []auditlog.HeadSource{w}}, "no audit.key"},
		{"another key", auditlog.VerifyOptions{Key: keyOf("another key"), Witnesses: []auditlog.HeadSource{w}}, "witness w1: head 1 (row 3, published 2026-03-01T13:00:00Z) has a bad signature"},
		{"unreadable", auditlog.VerifyOptions{Key: keyOf(key), Witnesses: []auditlog.HeadSource{&heads{name: "w2", err: errors.New("refused")}}}, "read the heads of witness w2: refused"},
		{"kept nothing", auditlog.VerifyOptions{Key: keyOf(key), Witnesses: []auditlog.HeadSource{&heads{name: "w3"}}}, "witness w3 kept no heads"},
	} {
		_, err := auditlog.Verify(ctx, st, tc.opts)
		var ve *auditlog.VerifyError
		if !errors.As(err, &ve) || !strings.Contains(ve.Reason, tc.want) {
			t.Errorf("Verify (%s) = %v; want a *VerifyError saying %q", tc.name, err, tc.want)
		}
	}

	// A head signed as a checkpoint does not pass for a published one.
	forged := head(t, st, 4, key)
	forged.Signature = auditlog.SignCheckpoint(key, forged)
	if _, err := auditlog.Verify(ctx, st, auditlog.VerifyOptions{Key: keyOf(key), Witnesses: []auditlog.HeadSource{&heads{name: "w4", kept: []portcullis.AuditCheckpoint{forged}}}}); err == nil {
		t.Fatal("Verify with a checkpoint's signature on a head succeeded; want a bad signature")
	}

	// A row rewritten consistently after the witness kept its heads: the
	// chain alone verifies, the witness's head does not.
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE audit SET body = replace(body, 'row 5', 'row V') WHERE seq = 5`); err != nil {
		t.Fatal(err)
	}
	rep, err = auditlog.Verify(ctx, st, auditlog.VerifyOptions{})
	if err != nil || rep.Verification.OK() || rep.Verification.BadSeq != 5 || !strings.Contains(rep.Verification.Problem, "edited") {
		t.Fatalf("Verify after editing row 5 = %+v, %v; want row 5 named as edited", rep.Verification, err)
	}
}

func TestPruneAndVerifyFromTheCheckpoint(t *testing.T) {
	ctx := context.Background()
	st, _ := openLog(t, 10)
	now := start.Add(24 * time.Hour)

	// The newest 6 rows are kept.
	cp, pruned, err := auditlog.Prune(ctx, st, key, now, auditlog.Retention{KeepRows: 6})
	if err != nil || !pruned || cp.Seq != 4 || !cp.Time.Equal(now) || cp.Signature != auditlog.SignCheckpoint(key, cp) {
		t.Fatalf("Prune(keep 6) = %+v, %v, %v; want a signed checkpoint at row 4", cp, pruned, err)
	}
	if _, pruned, err := auditlog.Prune(ctx, st, key, now, auditlog.Retention{KeepRows: 6}); err != nil || pruned {
		t.Fatalf("Prune(keep 6) again = %v, %v; want nothing to prune", pruned, err)
	}
	// Rows written before 12:07 go: up to row 6.
	cp, pruned, err = auditlog.Prune(ctx, st, key, now, auditlog.Retention{Before: start.Add(7 * time.Minute)})
	if err != nil || !pruned || cp.Seq != 6 {
		t.Fatalf("Prune(before 12:07) = %+v, %v, %v; want a checkpoint at row 6", cp, pruned, err)
	}
	// The larger of the two wins.
	if cp, pruned, err = auditlog.Prune(ctx, st, key, now, auditlog.Retention{Before: start.Add(8 * time.Minute), KeepRows: 3}); err != nil || !pruned || cp.Seq != 7 {
		t.Fatalf("Prune(before 12:08, keep 3) = %+v, %v, %v; want a checkpoint at row 7", cp, pruned, err)
	}

	rep, err := auditlog.Verify(ctx, st, auditlog.VerifyOptions{Key: keyOf(key)})
	if err != nil || !rep.Verification.OK() || rep.Checkpoint == nil || rep.Checkpoint.Seq != 7 || rep.Verification.Rows != 3 || rep.Head() != 10 {
		t.Fatalf("Verify after pruning = %+v, %v; want rows 8..10 from the checkpoint at 7", rep, err)
	}
	for _, tc := range []struct {
		name string
		key  func() (string, error)
		want string
	}{
		{"another key", keyOf("another key"), "the checkpoint of the pruned rows (up to row 7) has a bad signature"},
		{"no key", nil, "the log was pruned up to row 7, but its checkpoint cannot be checked"},
	} {
		_, err := auditlog.Verify(ctx, st, auditlog.VerifyOptions{Key: tc.key})
		var ve *auditlog.VerifyError
		if !errors.As(err, &ve) || !strings.Contains(ve.Reason, tc.want) {
			t.Errorf("Verify with %s = %v; want a *VerifyError saying %q", tc.name, err, tc.want)
		}
	}

	// Everything pruned: the head is the checkpoint.
	if _, pruned, err := auditlog.Prune(ctx, st, key, now, auditlog.Retention{Before: now}); err != nil || !pruned {
		t.Fatalf("Prune(everything) = %v, %v", pruned, err)
	}
	if rep, err := auditlog.Verify(ctx, st, auditlog.VerifyOptions{Key: keyOf(key)}); err != nil || !rep.Verification.OK() || rep.Verification.Rows != 0 || rep.Head() != 10 {
		t.Fatalf("Verify of a log pruned to its head = %+v, %v; want head 10 and no rows", rep, err)
	}

	empty, _ := openLog(t, 0)
	if _, pruned, err := auditlog.Prune(ctx, empty, key, now, auditlog.Retention{KeepRows: 1}); err != nil || pruned {
		t.Fatalf("Prune(empty) = %v, %v; want nothing to prune", pruned, err)
	}
}
