package sqlite_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/sqlite"
	"github.com/portcullis/portcullis/storetest"
)

// openSync opens the store at path with the given sync and closes it when
// the test ends.
func openSync(t *testing.T, path string, clock portcullis.Clock, mode sqlite.Sync) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), path, sqlite.Options{Clock: clock, Sync: mode})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// events returns n events of session "ok", but for those at the indexes
// in boom, of session "boom".
func events(n int, at time.Time, boom ...int) []portcullis.AuditEvent {
	evs := make([]portcullis.AuditEvent, n)
	for i := range evs {
		evs[i] = event(i, at, "ok")
	}
	for _, i := range boom {
		evs[i] = event(i, at, "boom")
	}
	return evs
}

// checkWritesAfterFailure appends after a failed one and checks that the
// log holds exactly the rows acknowledged, chained, and that the store's
// other writes, which share the write connection, work.
func checkWritesAfterFailure(t *testing.T, s *sqlite.Store, clock *storetest.Clock, before int) {
	t.Helper()
	ctx := context.Background()
	recs := r(s.AppendAudit(ctx, events(17, clock.Now())...)).must(t)
	if recs[0].Seq != int64(before)+1 {
		t.Errorf("the append after the failure starts at row %d; want %d", recs[0].Seq, before+1)
	}
	if v := verify(t, s); !v.OK() || v.Rows != int64(before+17) {
		t.Errorf("VerifyAudit = %+v; want %d rows verified", v, before+17)
	}
	noErr(t, s.PutBlock(ctx, portcullis.Block{Agent: "bot", Reason: "test", CreatedAt: clock.Now()}))
	if _, found, err := s.Block(ctx, "bot"); err != nil || !found {
		t.Errorf("the block written after the failure: found %v, %v", found, err)
	}
}

// TestAuditWriteFailsMidChunk: a row that fails after a whole chunk of
// rows was inserted in the same transaction leaves none of the batch; the
// connection stays in use, and the next append continues the chain.
func TestAuditWriteFailsMidChunk(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock()
	path := filepath.Join(t.TempDir(), "state.db")
	s := openSync(t, path, clock, sqlite.SyncProcess)
	r(s.AppendAudit(ctx, events(3, clock.Now())...)).must(t)
	_, err := rawDB(t, path).Exec(`CREATE TRIGGER boom BEFORE INSERT ON audit WHEN NEW.session = 'boom' BEGIN SELECT RAISE(ABORT, 'boom'); END`)
	noErr(t, err)
	opened := s.WriteConnsOpened()

	// Rows 4 to 19 go in one statement, rows 20 and 21 one by one.
	_, err = s.AppendAudit(ctx, events(18, clock.Now(), 17)...)
	if err == nil || !strings.Contains(err.Error(), "insert rows 21 to 21") || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("AppendAudit with a failing 18th row = %v; want the insert of row 21 refused by the trigger", err)
	}
	if all := scanAll(t, s); len(all) != 3 {
		t.Fatalf("the log holds %d rows after the failed append; want the 3 before it", len(all))
	}
	if n := s.WriteConnsOpened(); n != opened {
		t.Errorf("the write connection was replaced (%d opened, %d before) after a failure its rollback undid", n, opened)
	}
	checkWritesAfterFailure(t, s, clock, 3)
}

// TestAuditWriteRolledBackBySQLite: when SQLite itself rolls the
// transaction back (here a trigger's RAISE(ROLLBACK), as after a full disk
// or an I/O error), the writer's ROLLBACK fails: the connection's state is
// not known, so it is discarded. The append fails with no row written, and
// the next one runs on a new connection, with the store's pragmas.
func TestAuditWriteRolledBackBySQLite(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock()
	path := filepath.Join(t.TempDir(), "state.db")
	s := openSync(t, path, clock, sqlite.SyncProcess)
	r(s.AppendAudit(ctx, events(3, clock.Now())...)).must(t)
	_, err := rawDB(t, path).Exec(`CREATE TRIGGER boom BEFORE INSERT ON audit WHEN NEW.session = 'boom' BEGIN SELECT RAISE(ROLLBACK, 'boom'); END`)
	noErr(t, err)
	opened := s.WriteConnsOpened()

	_, err = s.AppendAudit(ctx, events(18, clock.Now(), 17)...)
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("AppendAudit with a failing 18th row = %v; want it refused by the trigger", err)
	}
	if all := scanAll(t, s); len(all) != 3 {
		t.Fatalf("the log holds %d rows after the failed append; want the 3 before it", len(all))
	}
	checkWritesAfterFailure(t, s, clock, 3)
	if n := s.WriteConnsOpened(); n != opened+1 {
		t.Errorf("%d write connections opened after the failed rollback; want the one discarded replaced: %d", n, opened+1)
	}
	if n := r(s.WriterSynchronous(ctx)).must(t); n != 1 {
		t.Errorf("PRAGMA synchronous on the new write connection = %d; want 1 (NORMAL, sync process)", n)
	}
}

// TestAuditWriteConnReplaced: database/sql replaces a write connection it
// finds bad (as after an interrupted statement of another write); the
// writer's statements belonged to the old one, and the next commit
// prepares them on the new one.
func TestAuditWriteConnReplaced(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock()
	path := filepath.Join(t.TempDir(), "state.db")
	s := openSync(t, path, clock, sqlite.SyncFull)
	for round := range 3 {
		r(s.AppendAudit(ctx, events(20, clock.Now())...)).must(t)
		r(s.AppendAudit(ctx, event(0, clock.Now(), "ok"))).must(t)
		noErr(t, s.DiscardWriteConn(ctx))
		if v := verify(t, s); !v.OK() || v.Rows != int64(21*(round+1)) {
			t.Fatalf("round %d: VerifyAudit = %+v; want %d rows verified", round, v, 21*(round+1))
		}
	}
	checkWritesAfterFailure(t, s, clock, 63)
	if n := r(s.WriterSynchronous(ctx)).must(t); n != 2 {
		t.Errorf("PRAGMA synchronous on the new write connection = %d; want 2 (FULL)", n)
	}
}

// TestCloseFinalizesWriterStatements: Close, with the writer's statements
// prepared on the write connection (and on connections discarded before),
// closes the file: SQLite removes the write-ahead log when the last
// connection to the file closes, which an unfinalized statement keeps open.
func TestCloseFinalizesWriterStatements(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock()
	for _, discard := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "state.db")
		s, err := sqlite.Open(ctx, path, sqlite.Options{Clock: clock})
		noErr(t, err)
		r(s.AppendAudit(ctx, events(20, clock.Now())...)).must(t)
		if discard {
			noErr(t, s.DiscardWriteConn(ctx))
			r(s.AppendAudit(ctx, events(2, clock.Now())...)).must(t)
		}
		if _, err := os.Stat(path + "-wal"); err != nil {
			t.Fatalf("the open store has no write-ahead log: %v", err)
		}
		noErr(t, s.Close())
		if _, err := os.Stat(path + "-wal"); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("discarded a connection %v: after Close, the write-ahead log is still there (%v): a connection to the file is still open", discard, err)
		}
	}
}

// TestAuditWriteConnLeftInTransaction: a write connection left inside a
// transaction (a failed rollback elsewhere) fails the writer's BEGIN for a
// reason other than a busy lock; the writer discards it rather than fail
// every append after, and the next append runs on a new connection.
func TestAuditWriteConnLeftInTransaction(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock()
	path := filepath.Join(t.TempDir(), "state.db")
	s := openSync(t, path, clock, sqlite.SyncProcess)
	r(s.AppendAudit(ctx, events(3, clock.Now())...)).must(t)
	s.WaitStartTrim()
	noErr(t, s.LeaveWriteConnInTransaction(ctx))
	opened := s.WriteConnsOpened()

	_, err := s.AppendAudit(ctx, events(2, clock.Now())...)
	if err == nil || !strings.Contains(err.Error(), "begin") {
		t.Fatalf("AppendAudit on a connection inside a transaction = %v; want BEGIN refused", err)
	}
	checkWritesAfterFailure(t, s, clock, 3)
	if n := s.WriteConnsOpened(); n != opened+1 {
		t.Errorf("%d write connections opened after the failed BEGIN; want the one discarded replaced: %d", n, opened+1)
	}
}

// TestAuditWriteConnLeftInReadTransaction: a write connection left inside
// a deferred transaction that has read holds a snapshot of the file; once
// another process commits, that snapshot is stale, and the writer's BEGIN
// IMMEDIATE fails with SQLITE_BUSY_SNAPSHOT, a busy code, though no wait
// would help. The writer must discard the connection rather than fail every
// append after on it.
func TestAuditWriteConnLeftInReadTransaction(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock()
	path := filepath.Join(t.TempDir(), "state.db")
	s := openSync(t, path, clock, sqlite.SyncProcess)
	r(s.AppendAudit(ctx, events(3, clock.Now())...)).must(t)
	s.WaitStartTrim()
	noErr(t, s.LeaveWriteConnInReadTransaction(ctx))
	_, err := rawDB(t, path).Exec(`INSERT INTO changes (kind, ref, time) VALUES ('test', 'another process', 0)`)
	noErr(t, err)
	opened := s.WriteConnsOpened()

	_, err = s.AppendAudit(ctx, events(2, clock.Now())...)
	if err == nil || !strings.Contains(err.Error(), "begin") {
		t.Fatalf("AppendAudit on a connection inside a stale read transaction = %v; want BEGIN refused", err)
	}
	checkWritesAfterFailure(t, s, clock, 3)
	if n := s.WriteConnsOpened(); n != opened+1 {
		t.Errorf("%d write connections opened after the failed BEGIN; want the one discarded replaced: %d", n, opened+1)
	}
}

// TestAuditCommitFails: a COMMIT that SQLite refuses (here a deferred
// foreign key still violated, which needs foreign_keys on the write
// connection, as the store's DSN sets it) leaves the transaction open: the
// writer rolls it back, the append fails with no row written, the
// connection is kept, and the next append continues the chain. The same
// holds on a connection opened after one was discarded.
func TestAuditCommitFails(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock()
	path := filepath.Join(t.TempDir(), "state.db")
	s := openSync(t, path, clock, sqlite.SyncProcess)
	r(s.AppendAudit(ctx, events(3, clock.Now())...)).must(t)
	_, err := rawDB(t, path).Exec(`CREATE TABLE fk_parent (id INTEGER PRIMARY KEY);
		CREATE TABLE fk_child (p INTEGER REFERENCES fk_parent (id) DEFERRABLE INITIALLY DEFERRED);
		CREATE TRIGGER boom AFTER INSERT ON audit WHEN NEW.session = 'boom' BEGIN INSERT INTO fk_child VALUES (NEW.seq); END`)
	noErr(t, err)
	rows := 3
	for round, discard := range []bool{false, true} {
		if discard {
			noErr(t, s.DiscardWriteConn(ctx))
			r(s.AppendAudit(ctx, events(1, clock.Now())...)).must(t)
			rows++
		}
		opened := s.WriteConnsOpened()
		_, err = s.AppendAudit(ctx, events(18, clock.Now(), 17)...)
		if err == nil || !strings.Contains(err.Error(), "commit") || !strings.Contains(err.Error(), "FOREIGN KEY") {
			t.Fatalf("round %d: AppendAudit whose COMMIT fails = %v; want the COMMIT refused", round, err)
		}
		if all := scanAll(t, s); len(all) != rows {
			t.Fatalf("round %d: the log holds %d rows after the failed append; want the %d before it", round, len(all), rows)
		}
		if n := s.WriteConnsOpened(); n != opened {
			t.Errorf("round %d: the write connection was replaced (%d opened, %d before) after a COMMIT its rollback undid", round, n, opened)
		}
		checkWritesAfterFailure(t, s, clock, rows)
		rows += 17
	}
}
