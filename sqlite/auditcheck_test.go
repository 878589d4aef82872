package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/auditlog"
	"github.com/portcullis/portcullis/sqlite"
	"github.com/portcullis/portcullis/storetest"
)

// appendIndexRows appends rows from..to-1 of indexEvent's log.
func appendIndexRows(t *testing.T, s *sqlite.Store, base time.Time, from, to int) error {
	t.Helper()
	evs := make([]portcullis.AuditEvent, 0, to-from)
	for i := from; i < to; i++ {
		evs = append(evs, indexEvent(i, base))
	}
	_, err := s.AppendAudit(context.Background(), evs...)
	return err
}

// verifyReport runs audit verify's check of the store.
func verifyReport(t *testing.T, s *sqlite.Store) auditlog.Report {
	t.Helper()
	rep, err := auditlog.Verify(context.Background(), s, auditlog.VerifyOptions{})
	noErr(t, err)
	if !rep.Verification.OK() {
		t.Fatalf("the chain does not verify: %+v", rep.Verification)
	}
	return rep
}

// checkQueries checks filtered queries against a scan of the log.
func checkQueries(t *testing.T, s *sqlite.Store) {
	t.Helper()
	all := scanAll(t, s)
	for _, q := range []portcullis.AuditQuery{
		{Session: "s1", Limit: 5000},
		{Agent: "a2", Newest: true, Limit: 5000},
		{Tool: "t3", Outcome: portcullis.OutcomeDeny, Limit: 5000},
		{Since: all[0].Columns.Time, Until: all[len(all)-1].Columns.Time, Limit: 5000},
	} {
		got := r(s.QueryAudit(context.Background(), q)).must(t)
		seqs := make([]int64, len(got))
		for i, g := range got {
			seqs[i] = g.Seq
		}
		if want := bruteQuery(all, q); !slices.Equal(seqs, want) {
			t.Errorf("QueryAudit(%+v) = %d rows; a scan of the log finds %d", q, len(seqs), len(want))
		}
	}
}

// TestAuditIndexTamper edits the lookup tables and the watermark by plain
// SQL, as anyone who can write the file can: audit verify names what was
// edited, and appends go on where the edit hides nothing (a lowered or
// deleted watermark) and stop where they would add rows no filtered query
// finds (a raised one).
func TestAuditIndexTamper(t *testing.T) {
	const rows = 1500 // over AuditIndexBatch: indexed up to row 1500, then a tail of 10
	for _, tc := range []struct {
		name string
		edit string
		// want are the words the report must hold.
		want []string
		// appends says that appends go on and a pass mends the edit;
		// otherwise the edit stays (and the report with it).
		appends bool
	}{
		{"delete an entry", `DELETE FROM audit_by_session WHERE seq = 9`, []string{"audit_by_session", "row 9", `"s1"`, "no entry"}, false},
		{"change an entry's key", `UPDATE audit_by_agent SET agent = 'a9' WHERE seq = 30`, []string{"audit_by_agent", "row 30"}, false},
		{"change a time entry", `UPDATE audit_by_time SET time = time + 1 WHERE seq = 31`, []string{"audit_by_time", "row 31"}, false},
		{"a stray entry under another key", `INSERT INTO audit_by_tool (tool, seq) VALUES ('t9', 5)`, []string{"audit_by_tool", "row 5", `"t9"`, `"t0"`}, false},
		{"a stray entry of no row", `INSERT INTO audit_by_session (session, seq) VALUES ('s1', 99999)`, []string{"audit_by_session", "row 99999", "does not hold"}, false},
		{"an entry beyond the watermark", `INSERT INTO audit_by_agent (agent, seq) SELECT agent, seq FROM audit WHERE seq = 1505`, []string{"audit_by_agent", "row 1505", "watermark is row 1500"}, true},
		{"the watermark lowered", `UPDATE audit_indexed SET seq = 1000`, []string{"row 1001", "watermark is row 1000"}, true},
		{"the watermark deleted", `DELETE FROM audit_indexed`, []string{"audit_indexed", "no watermark"}, true},
		{"the watermark raised", `UPDATE audit_indexed SET seq = 1600`, []string{"audit_indexed", "row 1600", "last row 1510"}, false},
		{"the watermark raised a little", `UPDATE audit_indexed SET seq = 1530`, []string{"audit_indexed", "row 1530", "last row 1510"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := storetest.NewClock()
			path := filepath.Join(t.TempDir(), "state.db")
			s := openAt(t, path, clock)
			base := clock.Now()
			noErr(t, appendIndexRows(t, s, base, 0, rows))
			noErr(t, appendIndexRows(t, s, base, rows, rows+10))
			if rep := verifyReport(t, s); !rep.OK() {
				t.Fatalf("before the edit: %q", rep.Index)
			}
			if _, err := rawDB(t, path).Exec(tc.edit); err != nil {
				t.Fatal(err)
			}
			rep := verifyReport(t, s)
			for _, w := range tc.want {
				if !strings.Contains(rep.Index, w) {
					t.Errorf("after %s, verify reports %q; want it to say %q", tc.edit, rep.Index, w)
				}
			}
			var out strings.Builder
			var ve *auditlog.VerifyError
			if err := rep.Write(&out, &out, false); err == nil || !errors.As(err, &ve) {
				t.Errorf("Report.Write = %v; want a *VerifyError (exit status 1)", err)
			}
			// Queries stay whole when the watermark is lowered or deleted.
			if tc.appends {
				checkQueries(t, s)
			}
			// Rows past the raised watermark, appended before the writer
			// looks at it again, and as many as make it look.
			raised := strings.Contains(tc.name, "raised")
			if raised {
				noErr(t, appendIndexRows(t, s, base, rows+10, rows+50))
				if problem := r(s.CheckAuditIndex(context.Background())).must(t); problem == "" {
					t.Errorf("rows appended below the raised watermark: verify finds nothing wrong")
				}
				noErr(t, appendIndexRows(t, s, base, rows+50, rows+60))
			}
			err := appendIndexRows(t, s, base, rows+60, rows+60+sqlite.AuditIndexBatch)
			if raised {
				if err == nil || !strings.Contains(err.Error(), "watermark is row") {
					t.Fatalf("append after the watermark was raised = %v; want it refused", err)
				}
				// The repair docs/STORAGE.md gives: the watermark back
				// down; the next pass indexes every row again.
				if _, err := rawDB(t, path).Exec(`UPDATE audit_indexed SET seq = 0`); err != nil {
					t.Fatal(err)
				}
				noErr(t, appendIndexRows(t, s, base, rows+60, rows+60+sqlite.AuditIndexBatch))
				if rep := verifyReport(t, s); !rep.OK() {
					t.Fatalf("after the repair: %q", rep.Index)
				}
				checkQueries(t, s)
				return
			}
			noErr(t, err)
			rep = verifyReport(t, s)
			if tc.appends {
				if !rep.OK() {
					t.Errorf("after the next pass, verify reports %q; want the edit mended", rep.Index)
				}
				checkIndexConsistent(t, path)
				checkQueries(t, s)
			} else if rep.OK() {
				t.Errorf("after more appends, verify finds nothing wrong; the edit %s stays", tc.edit)
			}
		})
	}
}

// TestAuditIndexCheckPruned checks the lookup tables of a pruned log, and
// of one pruned to its last row.
func TestAuditIndexCheckPruned(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock()
	path := filepath.Join(t.TempDir(), "state.db")
	s := openAt(t, path, clock)
	base := clock.Now()
	noErr(t, appendIndexRows(t, s, base, 0, sqlite.AuditIndexBatch+20))
	for _, upTo := range []int64{700, sqlite.AuditIndexBatch + 20} {
		recs := r(s.QueryAudit(ctx, portcullis.AuditQuery{AfterSeq: upTo - 1, Limit: 1})).must(t)
		noErr(t, s.PruneAudit(ctx, portcullis.AuditCheckpoint{Seq: upTo, Hash: recs[0].Hash, Time: clock.Now(), Signature: "x"}))
		problem := r(s.CheckAuditIndex(ctx)).must(t)
		if problem != "" {
			t.Fatalf("after pruning up to row %d: %q", upTo, problem)
		}
	}
	// Every row pruned: the watermark may not pass the checkpoint.
	if _, err := rawDB(t, path).Exec(fmt.Sprintf(`UPDATE audit_indexed SET seq = %d`, sqlite.AuditIndexBatch+21)); err != nil {
		t.Fatal(err)
	}
	if problem := r(s.CheckAuditIndex(ctx)).must(t); !strings.Contains(problem, "beyond the log's last row") {
		t.Fatalf("watermark past the checkpoint of an empty log: %q", problem)
	}
}

// BenchmarkCheckAuditIndex checks the lookup tables of a 100,000-row log,
// beside the chain's check (VerifyAudit) of the same log for comparison.
func BenchmarkCheckAuditIndex(b *testing.B) {
	ctx := context.Background()
	clock := storetest.NewClock()
	s := openAt(b, filepath.Join(b.TempDir(), "state.db"), clock)
	base := clock.Now()
	const rows = 100000
	for i := 0; i < rows; i += 1000 {
		evs := make([]portcullis.AuditEvent, 1000)
		for j := range evs {
			evs[j] = indexEvent(i+j, base)
		}
		r(s.AppendAudit(ctx, evs...)).must(b)
	}
	b.Run("index", func(b *testing.B) {
		for b.Loop() {
			if problem := r(s.CheckAuditIndex(ctx)).must(b); problem != "" {
				b.Fatal(problem)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/rows, "ns/row")
	})
	b.Run("chain", func(b *testing.B) {
		for b.Loop() {
			if v := r(portcullis.VerifyAudit(ctx, s, nil)).must(b); !v.OK() || v.Rows != rows {
				b.Fatalf("%+v", v)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/rows, "ns/row")
	})
}
