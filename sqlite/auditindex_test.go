package sqlite_test

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/sqlite"
	"github.com/portcullis/portcullis/storetest"
)

// scanAll reads every record of the log, columns included.
func scanAll(t testing.TB, s portcullis.Store) []portcullis.AuditRecord {
	t.Helper()
	var all []portcullis.AuditRecord
	noErr(t, s.ScanAudit(context.Background(), 0, func(r portcullis.AuditRecord) (bool, error) {
		all = append(all, r)
		return true, nil
	}))
	return all
}

// bruteQuery answers q from every record of the log, as QueryAudit must.
func bruteQuery(all []portcullis.AuditRecord, q portcullis.AuditQuery) []int64 {
	var out []int64
	for _, r := range all {
		c := r.Columns
		if (q.Session != "" && c.Session != q.Session) || (q.Agent != "" && c.Agent != q.Agent) ||
			(q.Tool != "" && c.Tool != q.Tool) || (q.Outcome != "" && c.Outcome != q.Outcome) ||
			(q.Kind != "" && c.Kind != q.Kind) || (!q.Since.IsZero() && c.Time.Before(q.Since)) ||
			(!q.Until.IsZero() && !c.Time.Before(q.Until)) || (q.AfterSeq > 0 && r.Seq <= q.AfterSeq) ||
			(q.BeforeSeq > 0 && r.Seq >= q.BeforeSeq) {
			continue
		}
		out = append(out, r.Seq)
	}
	if q.Newest {
		slices.Reverse(out)
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}

// checkQuery compares QueryAudit(q) with the brute-force answer: the same
// rows, in the same order, each as the scan read it.
func checkQuery(t testing.TB, s portcullis.Store, all []portcullis.AuditRecord, q portcullis.AuditQuery) {
	t.Helper()
	got := r(s.QueryAudit(context.Background(), q)).must(t)
	want := bruteQuery(all, q)
	seqs := make([]int64, len(got))
	for i, rec := range got {
		seqs[i] = rec.Seq
		k, ok := slices.BinarySearchFunc(all, rec.Seq, func(x portcullis.AuditRecord, seq int64) int { return cmp.Compare(x.Seq, seq) })
		if !ok {
			t.Fatalf("QueryAudit(%+v) returned row %d, which a scan does not find", q, rec.Seq)
		}
		w := all[k]
		if string(rec.Body) != string(w.Body) || rec.Hash != w.Hash || rec.PrevHash != w.PrevHash || *rec.Columns != *w.Columns {
			t.Fatalf("QueryAudit(%+v): row %d differs from the scan's", q, rec.Seq)
		}
	}
	if !slices.Equal(seqs, want) {
		t.Fatalf("QueryAudit(%+v) = %v (%d rows); a scan of the log finds %v (%d rows)", q, seqs, len(seqs), want, len(want))
	}
}

// watermark reads the audit index's watermark from the file.
func watermark(t testing.TB, path string) int64 {
	t.Helper()
	var wm int64
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	noErr(t, err)
	defer db.Close()
	noErr(t, db.QueryRow(`SELECT seq FROM audit_indexed WHERE id = 1`).Scan(&wm))
	return wm
}

// indexEvent is row i of a log of 7 sessions, 3 agents, 4 tools, two
// outcomes and two kinds, its time moving back now and then.
func indexEvent(i int, base time.Time) portcullis.AuditEvent {
	ev := event(i, base.Add(time.Duration(i*10+(i*7919)%97)*time.Millisecond-time.Duration(i%13)*40*time.Millisecond), fmt.Sprintf("s%d", i%7))
	ev.Agent = fmt.Sprintf("a%d", i%3)
	ev.Tool = fmt.Sprintf("t%d", (i/5)%4)
	if i%4 == 0 {
		ev.Outcome, ev.Decision.Outcome = portcullis.OutcomeDeny, portcullis.OutcomeDeny
	}
	if i%9 == 0 {
		ev.Kind = portcullis.AuditApproval
	}
	return ev
}

// randomQueries returns n queries mixing every filter of AuditQuery, with
// values that exist and values that do not, and seq and time bounds on both
// sides of the watermark.
func randomQueries(rng *rand.Rand, n int, all []portcullis.AuditRecord) []portcullis.AuditQuery {
	first, last := all[0], all[len(all)-1]
	span := last.Columns.Time.Sub(first.Columns.Time)
	pick := func(vals ...string) string { return vals[rng.IntN(len(vals))] }
	qs := make([]portcullis.AuditQuery, 0, n)
	for range n {
		var q portcullis.AuditQuery
		maybe := func() bool { return rng.IntN(3) == 0 }
		if maybe() {
			q.Session = pick("s0", "s3", "s6", "s9")
		}
		if maybe() {
			q.Agent = pick("a0", "a1", "a2", "bot")
		}
		if maybe() {
			q.Tool = pick("t0", "t1", "t3", "write_file")
		}
		if maybe() {
			q.Outcome = portcullis.Outcome(pick("allow", "deny", "stop"))
		}
		if maybe() {
			q.Kind = portcullis.AuditKind(pick("decision", "approval", "grant"))
		}
		if maybe() {
			q.Since = first.Columns.Time.Add(time.Duration(rng.Int64N(int64(span))))
		}
		if maybe() {
			q.Until = first.Columns.Time.Add(time.Duration(rng.Int64N(int64(span))))
		}
		if maybe() {
			q.AfterSeq = rng.Int64N(last.Seq + 2)
		}
		if maybe() {
			q.BeforeSeq = rng.Int64N(last.Seq + 2)
		}
		q.Limit = []int{0, 1, 7, 100, 5000}[rng.IntN(5)]
		q.Newest = rng.IntN(2) == 0
		qs = append(qs, q)
	}
	return qs
}

// TestAuditQueryIndexedAndTail answers every kind of query from a log
// whose rows lie on both sides of the index's watermark (in the index
// tables, and in the unindexed tail) and finds exactly what a scan of the
// log finds.
func TestAuditQueryIndexedAndTail(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock()
	path := filepath.Join(t.TempDir(), "state.db")
	s := openAt(t, path, clock)
	base := clock.Now()
	// Appends of 1 to 40 rows, so index passes fall at varied rows.
	rng := rand.New(rand.NewPCG(1, 2))
	const rows = 2*sqlite.AuditIndexBatch + sqlite.AuditIndexBatch/2
	for i := 0; i < rows; {
		n := min(1+rng.IntN(40), rows-i)
		evs := make([]portcullis.AuditEvent, n)
		for j := range evs {
			evs[j] = indexEvent(i+j, base)
		}
		r(s.AppendAudit(ctx, evs...)).must(t)
		i += n
	}
	checkIndexConsistent(t, path)
	all := scanAll(t, s)
	if len(all) != rows {
		t.Fatalf("scan found %d rows; want %d", len(all), rows)
	}
	wm := watermark(t, path)
	if wm < sqlite.AuditIndexBatch || wm >= int64(rows) {
		t.Fatalf("watermark %d: want rows on both sides of it (1..%d)", wm, rows)
	}
	fixed := []portcullis.AuditQuery{
		{}, {Newest: true}, {Limit: 5000}, {Newest: true, Limit: 5000},
		{Session: "s3", Limit: 5000}, {Session: "s3", Newest: true, Limit: 5000},
		{Agent: "a1", Newest: true, Limit: 5000}, {Tool: "t2", Limit: 5000},
		{Since: all[wm-20].Columns.Time, Until: all[wm+20].Columns.Time, Limit: 5000},
		{Session: "s2", AfterSeq: wm - 30, Limit: 20}, {Session: "s2", BeforeSeq: wm + 30, Newest: true, Limit: 20},
		{Session: "s2", AfterSeq: wm, Limit: 5000}, {Session: "s2", BeforeSeq: wm + 1, Newest: true, Limit: 3},
		{Agent: "a2", Tool: "t1", Outcome: portcullis.OutcomeDeny, Kind: portcullis.AuditDecision, Limit: 5000},
		{Session: "nobody"}, {Since: all[len(all)-1].Columns.Time.Add(time.Hour)},
	}
	for _, q := range append(fixed, randomQueries(rng, 600, all)...) {
		checkQuery(t, s, all, q)
	}
}

// TestAuditPruneIndex prunes a prefix that reaches into the indexed rows:
// the index tables keep no entry of a pruned row, and queries still find
// exactly what a scan finds.
func TestAuditPruneIndex(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock()
	path := filepath.Join(t.TempDir(), "state.db")
	s := openAt(t, path, clock)
	base := clock.Now()
	const rows = 3 * sqlite.AuditIndexBatch
	evs := make([]portcullis.AuditEvent, 0, rows)
	for i := range rows {
		evs = append(evs, indexEvent(i, base))
	}
	recs := r(s.AppendAudit(ctx, evs[:rows-100]...)).must(t)
	recs = append(recs, r(s.AppendAudit(ctx, evs[rows-100:]...)).must(t)...)
	cut := recs[rows/2]
	noErr(t, s.PruneAudit(ctx, portcullis.AuditCheckpoint{Seq: cut.Seq, Hash: cut.Hash, Time: clock.Now(), Signature: "sig"}))
	db := rawDB(t, path)
	for _, table := range []string{"audit_by_session", "audit_by_agent", "audit_by_tool", "audit_by_time"} {
		var n int
		noErr(t, db.QueryRow(`SELECT count(*) FROM `+table+` WHERE seq <= ?`, cut.Seq).Scan(&n))
		if n != 0 {
			t.Errorf("%s holds %d entries of pruned rows", table, n)
		}
	}
	checkIndexConsistent(t, path)
	all := scanAll(t, s)
	rng := rand.New(rand.NewPCG(3, 4))
	for _, q := range randomQueries(rng, 200, all) {
		checkQuery(t, s, all, q)
	}
	if v := verify(t, s); !v.OK() {
		t.Fatalf("VerifyAudit after prune = %+v", v)
	}
}

// TestMigrateAuditIndex opens a file of schema 4, whose audit table had
// indexes of its own: Open builds the index tables from its rows and drops
// the old indexes, queries find what a scan finds, and appends chain on.
func TestMigrateAuditIndex(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock()
	path := filepath.Join(t.TempDir(), "state.db")
	db := rawDB(t, path)
	stmts := r(sqlite.MigrationSQL(4)).must(t)
	for _, q := range stmts {
		_, err := db.Exec(q)
		noErr(t, err)
	}
	_, err := db.Exec(`PRAGMA user_version = 4; PRAGMA application_id = 0x50434c53`)
	noErr(t, err)
	base := clock.Now()
	prev := portcullis.GenesisHash
	const rows = 1500
	tx, err := db.Begin()
	noErr(t, err)
	for i := range rows {
		ev := indexEvent(i, base)
		body := r(portcullis.EncodeAuditBody(&ev)).must(t)
		seq := int64(i + 1)
		h := portcullis.ChainHash(prev, seq, body)
		_, err := tx.Exec(`INSERT INTO audit (seq, time, kind, decision_id, session, agent, tool, outcome, body, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			seq, ev.Time.UnixNano(), string(ev.Kind), ev.DecisionID, ev.Session, ev.Agent, ev.Tool, string(ev.Outcome), body, prev, h)
		noErr(t, err)
		prev = h
	}
	noErr(t, tx.Commit())
	noErr(t, db.Close())

	s := openAt(t, path, clock)
	db = rawDB(t, path)
	var version int
	noErr(t, db.QueryRow(`PRAGMA user_version`).Scan(&version))
	if version != sqlite.SchemaVersion() {
		t.Fatalf("schema after Open = %d; want %d", version, sqlite.SchemaVersion())
	}
	var old int
	noErr(t, db.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND name IN ('audit_session', 'audit_agent', 'audit_tool', 'audit_time')`).Scan(&old))
	if old != 0 {
		t.Fatalf("%d of the audit table's old indexes are left after the migration", old)
	}
	if wm := watermark(t, path); wm != rows {
		t.Fatalf("watermark after the migration = %d; want %d (every row indexed)", wm, rows)
	}
	for i := range 50 {
		r(s.AppendAudit(ctx, indexEvent(rows+i, base))).must(t)
	}
	checkIndexConsistent(t, path)
	all := scanAll(t, s)
	if len(all) != rows+50 {
		t.Fatalf("scan found %d rows; want %d", len(all), rows+50)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for _, q := range randomQueries(rng, 300, all) {
		checkQuery(t, s, all, q)
	}
	if v := verify(t, s); !v.OK() {
		t.Fatalf("VerifyAudit after the migration = %+v", v)
	}
}

// checkIndexConsistent checks the index tables against the audit table:
// each holds exactly the rows up to the watermark, under their own key.
func checkIndexConsistent(t testing.TB, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	noErr(t, err)
	defer db.Close()
	for _, ix := range []struct{ table, key string }{
		{"audit_by_session", "session"}, {"audit_by_agent", "agent"}, {"audit_by_tool", "tool"}, {"audit_by_time", "time"},
	} {
		var missing, stray int
		noErr(t, db.QueryRow(`SELECT count(*) FROM audit a WHERE a.seq <= (SELECT seq FROM audit_indexed)
			AND NOT EXISTS (SELECT 1 FROM `+ix.table+` x WHERE x.`+ix.key+` = a.`+ix.key+` AND x.seq = a.seq)`).Scan(&missing))
		noErr(t, db.QueryRow(`SELECT count(*) FROM `+ix.table+` x LEFT JOIN audit a ON a.seq = x.seq
			WHERE a.seq IS NULL OR a.`+ix.key+` IS NOT x.`+ix.key+` OR x.seq > (SELECT seq FROM audit_indexed)`).Scan(&stray))
		if missing != 0 || stray != 0 {
			t.Errorf("%s: %d rows up to the watermark missing, %d entries that match no row", ix.table, missing, stray)
		}
	}
}

// TestAuditIndexTwoStores appends through two stores on one file, as two
// processes do: each indexes the tail when it finds it long, from the
// file's watermark whichever of them moved it last, so the index holds
// every row once and the tail stays short.
func TestAuditIndexTwoStores(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock()
	path := filepath.Join(t.TempDir(), "state.db")
	stores := []*sqlite.Store{openAt(t, path, clock), openAt(t, path, clock)}
	base := clock.Now()
	const rows = 4 * sqlite.AuditIndexBatch
	for i := 0; i < rows; i += 100 {
		n := min(100, rows-i)
		evs := make([]portcullis.AuditEvent, n)
		for j := range evs {
			evs[j] = indexEvent(i+j, base)
		}
		// The one store appends three times as often as the other.
		r(stores[min(1, (i/100)%4)].AppendAudit(ctx, evs...)).must(t)
		if wm := watermark(t, path); int64(i+n)-wm >= sqlite.AuditIndexBatch {
			t.Fatalf("after %d rows the watermark is %d: the tail is longer than %d rows", i+n, wm, sqlite.AuditIndexBatch-1)
		}
	}
	checkIndexConsistent(t, path)
	all := scanAll(t, stores[0])
	rng := rand.New(rand.NewPCG(7, 8))
	for _, q := range randomQueries(rng, 200, all) {
		checkQuery(t, stores[1], all, q)
	}
}
