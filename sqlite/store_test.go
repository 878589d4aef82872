package sqlite_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/sqlite"
	"github.com/portcullis/portcullis/storetest"
)

// open opens a store in a fresh file of the test's temporary directory.
func open(t testing.TB, clock portcullis.Clock) portcullis.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"), sqlite.Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, open)
}

// openAt opens the store at path and closes it when the test ends.
func openAt(t testing.TB, path string, clock portcullis.Clock) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), path, sqlite.Options{Clock: clock})
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

// rawDB opens the file with database/sql alone, as someone editing it by
// hand would.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	// The store's own connections may hold the write lock for a moment
	// (its start-up work); wait for it as the store itself does.
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// res carries a value and an error so a call is checked in one expression:
// r(s.AddGrant(ctx, g)).must(t).
type res[T any] struct {
	v   T
	err error
}

func r[T any](v T, err error) res[T] { return res[T]{v, err} }

func (x res[T]) must(t testing.TB) T {
	t.Helper()
	if x.err != nil {
		t.Fatal(x.err)
	}
	return x.v
}

func noErr(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func event(i int, at time.Time, session string) portcullis.AuditEvent {
	return portcullis.AuditEvent{
		Kind: portcullis.AuditDecision, Time: at, DecisionID: fmt.Sprintf("d%d", i),
		Session: session, Agent: "bot", Tool: "write_file", Outcome: portcullis.OutcomeAllow,
		Request:    &portcullis.Call{Tool: "write_file", Session: session, Args: map[string]any{"path": "/tmp/x", "i": json.Number(fmt.Sprint(i))}},
		Decision:   &portcullis.Decision{DecisionID: fmt.Sprintf("d%d", i), Outcome: portcullis.OutcomeAllow, PermissionLevel: portcullis.AutoApprove},
		PolicyHash: "sha256:p", LatencyNS: int64(1000 + i),
	}
}

func verify(t testing.TB, s portcullis.Store) portcullis.AuditVerification {
	t.Helper()
	ctx := context.Background()
	var cp *portcullis.AuditCheckpoint
	if c, ok, err := s.AuditCheckpoint(ctx); err != nil {
		t.Fatal(err)
	} else if ok {
		cp = &c
	}
	return r(portcullis.VerifyAudit(ctx, s, cp)).must(t)
}

// TestDurable writes every kind of state, closes the store, and finds it
// all in the reopened file.
func TestDurable(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{Clock: clock})
	noErr(t, err)
	now := clock.Now().Add(123456789 * time.Nanosecond) // nanoseconds survive
	session := r(s.AddGrant(ctx, portcullis.Grant{Kind: portcullis.GrantSession, Tool: "create", Session: "s1", ElementType: "persona", GrantedBy: "ana", ExpiresAt: now.Add(time.Hour)})).must(t)
	clock.Advance(time.Second)
	single := r(s.AddGrant(ctx, portcullis.Grant{Kind: portcullis.GrantSingle, Tool: "write_file", Session: "s1", Args: map[string]any{"path": "/tmp/a"}})).must(t)
	block := portcullis.Block{Agent: "bot", Reason: "risk 95", ChallengeID: "chl_1", DecisionID: "d1", CreatedAt: now}
	noErr(t, s.PutBlock(ctx, block))
	chl := portcullis.Challenge{ID: "chl_1", Agent: "bot", Salt: "00ff", CodeHash: "abcd", Reason: "r", CreatedAt: now, ExpiresAt: now.Add(5 * time.Minute)}
	noErr(t, s.CreateChallenge(ctx, chl))
	apr := portcullis.Approval{ID: "apr_1", DecisionID: "d2", Status: portcullis.ApprovalPending, Tool: "write_file", Level: portcullis.ConfirmSingleUse,
		Call: portcullis.Call{Tool: "write_file", Session: "s1", Agent: "bot", Args: map[string]any{"n": json.Number("1.50")}}, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	noErr(t, s.CreateApproval(ctx, apr))
	r(s.RecordStep(ctx, "r1", "bot", now)).must(t)
	noErr(t, s.RecordOutcome(ctx, "r1", portcullis.StepFailure, now))
	r(s.RecordDenial(ctx, "r1", "sig", now)).must(t)
	r(s.AddFailedAttempt(ctx, "bot", now, now.Add(-time.Minute))).must(t)
	pin := portcullis.ToolPin{Upstream: "fs", Tool: "read_file", Hash: "sha256:1", Definition: json.RawMessage(`{"description":"reads"}`),
		PendingHash: "sha256:2", PendingDefinition: json.RawMessage(`{"description":"sends"}`), FirstSeen: now, UpdatedAt: now, AcceptedBy: "ana"}
	noErr(t, s.PutToolPin(ctx, pin))
	var last portcullis.AuditRecord
	for i := range 10 {
		last = r(s.AppendAudit(ctx, event(i, now, "s1"))).must(t)[0]
	}
	noErr(t, s.Close())

	s = openAt(t, path, clock)
	if got := r(s.Grants(ctx, "s1", clock.Now())).must(t); len(got) != 2 || got[0].ID != session.ID || got[1].ID != single.ID ||
		!got[0].ExpiresAt.Equal(session.ExpiresAt) || got[0].ElementType != "persona" || got[0].GrantedBy != "ana" || got[1].ArgsDigest != single.ArgsDigest {
		t.Errorf("Grants after reopen = %+v; want %+v and %+v", got, session, single)
	}
	if got, ok, err := s.Block(ctx, "bot"); err != nil || !ok || got != block {
		t.Errorf("Block after reopen = %+v, %v, %v; want %+v", got, ok, err, block)
	}
	if got, err := s.Challenge(ctx, "chl_1"); err != nil || got != chl {
		t.Errorf("Challenge after reopen = %+v, %v; want %+v", got, err, chl)
	}
	gotApr := r(s.Approval(ctx, "apr_1")).must(t)
	if a, b := r(json.Marshal(gotApr)).must(t), r(json.Marshal(apr)).must(t); string(a) != string(b) {
		t.Errorf("Approval after reopen:\n got %s\nwant %s", a, b)
	}
	if got, ok, err := s.RunState(ctx, "r1"); err != nil || !ok || got.Steps != 1 || got.LastOutcome != portcullis.StepFailure || !got.UpdatedAt.Equal(now) {
		t.Errorf("RunState after reopen = %+v, %v, %v", got, ok, err)
	}
	if n := r(s.RecordDenial(ctx, "r1", "sig", now)).must(t); n != 2 {
		t.Errorf("RecordDenial after reopen = %d; want 2", n)
	}
	if n := r(s.FailedAttempts(ctx, "bot", now)).must(t); n != 1 {
		t.Errorf("FailedAttempts after reopen = %d; want 1", n)
	}
	if got, ok, err := s.ToolPin(ctx, "fs", "read_file"); err != nil || !ok || string(r(json.Marshal(got)).must(t)) != string(r(json.Marshal(pin)).must(t)) {
		t.Errorf("ToolPin after reopen = %+v, %v, %v; want %+v", got, ok, err, pin)
	}
	if v := verify(t, s); !v.OK() || v.Rows != 10 || v.HeadHash != last.Hash {
		t.Errorf("VerifyAudit after reopen = %+v; want 10 rows ending in %s", v, last.Hash)
	}
	if next := r(s.AppendAudit(ctx, event(10, now, "s1"))).must(t); next[0].Seq != 11 || next[0].PrevHash != last.Hash {
		t.Errorf("append after reopen = %+v; want seq 11 chained to %s", next[0], last.Hash)
	}
}

// TestTwoProcesses shares one file between two stores, as the gateway and
// the approve CLI do.
func TestTwoProcesses(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clock := storetest.NewClock()
	path := filepath.Join(t.TempDir(), "state.db")
	a, b := openAt(t, path, clock), openAt(t, path, clock)

	ch := r(b.Watch(ctx)).must(t)
	g := r(a.AddGrant(ctx, portcullis.Grant{Kind: portcullis.GrantSession, Tool: "t", Session: "s"})).must(t)
	if _, ok, err := b.UseGrant(ctx, portcullis.GrantQuery{Session: "s", Tool: "t", Level: portcullis.ConfirmSession, Now: clock.Now()}); err != nil || !ok {
		t.Fatalf("grant made through one store, UseGrant through the other = %v, %v; want found", ok, err)
	}
	noErr(t, a.PutBlock(ctx, portcullis.Block{Agent: "bot", CreatedAt: clock.Now()}))
	if _, ok, err := b.Block(ctx, "bot"); err != nil || !ok {
		t.Fatalf("block made through one store, seen through the other = %v, %v", ok, err)
	}
	want := map[portcullis.Change]bool{{Kind: portcullis.ChangeGrant, ID: g.ID}: false, {Kind: portcullis.ChangeBlock, ID: "bot"}: false}
	deadline := time.After(5 * time.Second)
	for seen := 0; seen < len(want); {
		select {
		case c := <-ch:
			if done, ok := want[c]; ok && !done {
				want[c] = true
				seen++
			}
		case <-deadline:
			t.Fatalf("the other store's changes were not delivered: %v", want)
		}
	}

	// Single-use grants, consumed through both stores at once: each exactly once.
	const grants, callers = 4, 16
	for range grants {
		r(a.AddGrant(ctx, portcullis.Grant{Kind: portcullis.GrantSingle, Tool: "w", Session: "s", ArgsDigest: "sha256:x"})).must(t)
	}
	var used atomic.Int32
	var wg sync.WaitGroup
	for i := range 2 * callers {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, ok, err := s.UseGrant(ctx, portcullis.GrantQuery{Session: "s", Tool: "w", ArgsDigest: "sha256:x", Level: portcullis.ConfirmSingleUse, Consume: true, Now: clock.Now()})
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
		t.Fatalf("%d callers in two stores used %d single-use grants; want exactly %d", 2*callers, got, grants)
	}

	// Audit appends through both stores make one chain.
	for i := range 2 * callers {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 5 {
				if _, err := s.AppendAudit(ctx, event(i*5+j, clock.Now(), "s")); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if v := verify(t, a); !v.OK() || v.Rows != 2*callers*5 {
		t.Fatalf("chain written by two stores = %+v; want %d rows verified", v, 2*callers*5)
	}
}

// TestAuditBatchAllOrNothing fails some batches with a trigger: a caller
// told its rows were written finds them, a caller told they were not finds
// none, and the chain still verifies.
func TestAuditBatchAllOrNothing(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock()
	path := filepath.Join(t.TempDir(), "state.db")
	s := openAt(t, path, clock)
	_, err := rawDB(t, path).Exec(`CREATE TRIGGER boom BEFORE INSERT ON audit WHEN NEW.session = 'boom' BEGIN SELECT RAISE(ABORT, 'boom'); END`)
	noErr(t, err)

	if _, err := s.AppendAudit(ctx, event(1, clock.Now(), "ok"), event(2, clock.Now(), "boom"), event(3, clock.Now(), "ok")); err == nil {
		t.Fatal("AppendAudit of a batch with a failing row succeeded")
	}
	if rows := r(s.QueryAudit(ctx, portcullis.AuditQuery{})).must(t); len(rows) != 0 {
		t.Fatalf("a failed append left %d rows; want none", len(rows))
	}

	const writers = 16
	var mu sync.Mutex
	written := map[string]bool{} // decision id → acknowledged
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				session := "ok"
				if w == 0 && i%4 == 0 {
					session = "boom"
				}
				ev := event(w*100+i, clock.Now(), session)
				_, err := s.AppendAudit(ctx, ev)
				if session == "boom" && err == nil {
					t.Errorf("append of a failing row succeeded")
				}
				mu.Lock()
				written[ev.DecisionID] = err == nil
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	found := map[string]bool{}
	noErr(t, s.ScanAudit(ctx, 0, func(r portcullis.AuditRecord) (bool, error) {
		ev, err := r.Event()
		found[ev.DecisionID] = true
		return true, err
	}))
	for id, ok := range written {
		if ok != found[id] {
			t.Errorf("row %s: acknowledged %v, in the log %v", id, ok, found[id])
		}
	}
	if v := verify(t, s); !v.OK() || v.Rows != int64(len(found)) {
		t.Fatalf("VerifyAudit = %+v; want %d rows verified", v, len(found))
	}
}

// TestCloseDrains appends while the store closes: every append either
// fails or its row is in the reopened file.
func TestCloseDrains(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{Clock: clock})
	noErr(t, err)
	ch := r(s.Watch(ctx)).must(t)
	var acked sync.Map
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				recs, err := s.AppendAudit(ctx, event(w*10000+i, clock.Now(), "s"))
				if err != nil {
					return
				}
				acked.Store(recs[0].Seq, true)
			}
		}()
	}
	time.Sleep(100 * time.Millisecond)
	noErr(t, s.Close())
	wg.Wait()
	for range ch { // the watch ends with the store
	}
	if _, err := s.AppendAudit(ctx, event(0, clock.Now(), "s")); err == nil {
		t.Fatal("AppendAudit after Close succeeded")
	}
	if _, _, err := s.Block(ctx, "bot"); err == nil {
		t.Fatal("Block after Close succeeded")
	}
	noErr(t, s.Close()) // a second Close is harmless

	s2 := openAt(t, path, clock)
	present := map[int64]bool{}
	noErr(t, s2.ScanAudit(ctx, 0, func(r portcullis.AuditRecord) (bool, error) {
		present[r.Seq] = true
		return true, nil
	}))
	n := 0
	acked.Range(func(k, _ any) bool {
		n++
		if !present[k.(int64)] {
			t.Errorf("acknowledged row %d is missing after Close", k)
		}
		return true
	})
	if n == 0 {
		t.Fatal("no append was acknowledged before Close")
	}
	if v := verify(t, s2); !v.OK() {
		t.Fatalf("VerifyAudit after Close = %+v", v)
	}
}

// TestTamperDetected edits and deletes rows by hand: verification names
// the row.
func TestTamperDetected(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock()
	path := filepath.Join(t.TempDir(), "state.db")
	s := openAt(t, path, clock)
	for i := 1; i <= 6; i++ {
		r(s.AppendAudit(ctx, event(i, clock.Now(), "s"))).must(t)
	}
	if v := verify(t, s); !v.OK() || v.Rows != 6 {
		t.Fatalf("VerifyAudit before tampering = %+v", v)
	}
	db := rawDB(t, path)

	_, err := db.Exec(`UPDATE audit SET body = CAST(replace(CAST(body AS TEXT), '"outcome":"allow"', '"outcome":"deny"') AS BLOB) WHERE seq = 3`)
	noErr(t, err)
	if v := verify(t, s); v.OK() || v.BadSeq != 3 || !strings.Contains(v.Problem, "edited") {
		t.Fatalf("VerifyAudit after editing row 3 = %+v; want row 3 reported as edited", v)
	}
	_, err = db.Exec(`UPDATE audit SET body = CAST(replace(CAST(body AS TEXT), '"outcome":"deny"', '"outcome":"allow"') AS BLOB) WHERE seq = 3`)
	noErr(t, err)
	if v := verify(t, s); !v.OK() {
		t.Fatalf("VerifyAudit after undoing the edit = %+v; want ok", v)
	}

	_, err = db.Exec(`DELETE FROM audit WHERE seq = 4`)
	noErr(t, err)
	if v := verify(t, s); v.OK() || v.BadSeq != 4 || !strings.Contains(v.Problem, "missing") {
		t.Fatalf("VerifyAudit after deleting row 4 = %+v; want row 4 reported missing", v)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	noErr(t, err)
	noErr(t, s.Close())
	_, err = rawDB(t, path).Exec(`PRAGMA user_version = 7`)
	noErr(t, err)
	_, err = sqlite.Open(ctx, path, sqlite.Options{})
	want := fmt.Sprintf("was written by a newer Portcullis (schema 7, this binary knows up to %d); upgrade Portcullis", sqlite.SchemaVersion())
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Open(schema 7) = %v; want an error naming %s and saying %q", err, path, want)
	}
}

func TestBadFilesRefused(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()

	garbage := filepath.Join(dir, "garbage.db")
	junk := make([]byte, 16384)
	r(rand.Read(junk)).must(t)
	noErr(t, os.WriteFile(garbage, junk, 0o600))
	_, err := sqlite.Open(ctx, garbage, sqlite.Options{})
	if err == nil || !strings.Contains(err.Error(), garbage) || !strings.Contains(err.Error(), "not a SQLite database or is damaged") {
		t.Errorf("Open(garbage) = %v; want an error naming the file", err)
	}
	t.Logf("Open(garbage): %v", err)
	if b := r(os.ReadFile(garbage)).must(t); string(b) != string(junk) {
		t.Error("Open(garbage) changed the file")
	}

	other := filepath.Join(dir, "other.db")
	db := rawDB(t, other)
	_, err = db.Exec(`CREATE TABLE notes (body TEXT)`)
	noErr(t, err)
	noErr(t, db.Close())
	_, err = sqlite.Open(ctx, other, sqlite.Options{})
	if err == nil || !strings.Contains(err.Error(), other) || !strings.Contains(err.Error(), "another program") {
		t.Errorf("Open(another program's database) = %v; want it refused", err)
	}

	// A real store whose pages are overwritten in the middle.
	damaged := filepath.Join(dir, "damaged.db")
	s, err := sqlite.Open(ctx, damaged, sqlite.Options{})
	noErr(t, err)
	clock := storetest.NewClock()
	for i := range 20 {
		evs := make([]portcullis.AuditEvent, 100)
		for j := range evs {
			evs[j] = event(i*100+j, clock.Now(), fmt.Sprintf("s%d", j))
		}
		r(s.AppendAudit(ctx, evs...)).must(t)
	}
	noErr(t, s.Close())
	st := r(os.Stat(damaged)).must(t)
	if st.Size() < 64*4096 {
		t.Fatalf("damaged.db is %d bytes; want a bigger file to damage", st.Size())
	}
	f := r(os.OpenFile(damaged, os.O_RDWR, 0)).must(t)
	for page := int64(10); page*4096 < st.Size()-4096; page += 7 {
		r(f.WriteAt(junk[:4096], page*4096)).must(t)
	}
	noErr(t, f.Close())
	_, err = sqlite.Open(ctx, damaged, sqlite.Options{})
	if err == nil || !strings.Contains(err.Error(), damaged) || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("Open(damaged) = %v; want an error naming the file", err)
	}
	t.Logf("Open(damaged): %v", err)
}

func TestFileModes(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "state", "portcullis")
	path := filepath.Join(dir, "state.db")
	s := openAt(t, path, nil)
	r(s.AddGrant(ctx, portcullis.Grant{Kind: portcullis.GrantSession, Tool: "t"})).must(t)
	if st := r(os.Stat(dir)).must(t); st.Mode().Perm() != 0o700 {
		t.Errorf("state directory mode = %v; want 0700", st.Mode().Perm())
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if st := r(os.Stat(p)).must(t); st.Mode().Perm() != 0o600 {
			t.Errorf("%s mode = %v; want 0600", filepath.Base(p), st.Mode().Perm())
		}
	}

	// A file left readable by others is restricted at open.
	loose := filepath.Join(t.TempDir(), "loose.db")
	noErr(t, os.WriteFile(loose, nil, 0o644))
	noErr(t, os.Chmod(loose, 0o644))
	openAt(t, loose, nil)
	if st := r(os.Stat(loose)).must(t); st.Mode().Perm() != 0o600 {
		t.Errorf("loose.db mode after open = %v; want 0600", st.Mode().Perm())
	}
}

// TestErrorsWrapped checks the codes callers rely on survive the wrapping.
func TestErrorsWrapped(t *testing.T) {
	ctx := context.Background()
	s := openAt(t, filepath.Join(t.TempDir(), "state.db"), nil)
	err := s.RevokeGrant(ctx, "grt_none")
	var pe *portcullis.Error
	if !errors.As(err, &pe) || pe.Code != portcullis.CodeNotFound || !strings.HasPrefix(err.Error(), "sqlite: revoke grant: ") {
		t.Errorf("RevokeGrant(missing) = %v; want NOT_FOUND with context", err)
	}
	noErr(t, s.CreateChallenge(ctx, portcullis.Challenge{ID: "c", Salt: "s", CodeHash: "h"}))
	if err := s.CreateChallenge(ctx, portcullis.Challenge{ID: "c", Salt: "s", CodeHash: "h"}); portcullis.ErrorCode(err) != portcullis.CodeConflict {
		t.Errorf("CreateChallenge(duplicate) = %v; want CONFLICT", err)
	}
}

// TestWatchResync lets a watcher fall behind: it is told to resync.
func TestWatchResync(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := openAt(t, filepath.Join(t.TempDir(), "state.db"), nil)
	ch := r(s.Watch(ctx)).must(t)
	for range 100 { // more than the channel holds, unread
		r(s.AddGrant(ctx, portcullis.Grant{Kind: portcullis.GrantSession, Tool: "t", Session: "s"})).must(t)
	}
	time.Sleep(300 * time.Millisecond) // at least one poll
	deadline := time.After(5 * time.Second)
	for {
		select {
		case c := <-ch:
			if c.Kind == portcullis.ChangeResync {
				return
			}
		case <-deadline:
			t.Fatal("a watcher that fell behind was not sent a resync")
		}
	}
}

// TestTwoProcessesKeepThePendingCap: approval requests of one agent
// recorded through two stores on one file at once (as the gateway and the
// host hooks' processes do) never exceed the cap, and exactly one refusal
// asks for a notice.
func TestTwoProcessesKeepThePendingCap(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock()
	path := filepath.Join(t.TempDir(), "state.db")
	stores := []portcullis.Store{openAt(t, path, clock), openAt(t, path, clock)}
	const limit, callers = 6, 48
	lim := portcullis.PendingLimit{PerAgent: limit, PerSession: limit}
	var created, notified atomic.Int32
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			apr := portcullis.Approval{
				ID: "apr_" + strconv.Itoa(i), Status: portcullis.ApprovalPending, Tool: "w", Level: portcullis.ConfirmSingleUse,
				Call:      portcullis.Call{Tool: "w", Session: "s" + strconv.Itoa(i%3), Agent: "flood", Args: map[string]any{"n": i}},
				CreatedAt: clock.Now(), ExpiresAt: clock.Now().Add(time.Minute), ArgsDigest: "sha256:" + strconv.Itoa(i),
			}
			adm, err := stores[i%2].CreateApprovalWithin(ctx, apr, lim)
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
	wg.Wait()
	if got := created.Load(); got != limit {
		t.Errorf("%d requests of one agent through two stores, cap %d: %d created; want exactly %d", callers, limit, got, limit)
	}
	if got := notified.Load(); got != 1 {
		t.Errorf("refusals through two stores asked for %d notices; want exactly 1", got)
	}
}

// TestTamper edits the audit table of a real SQLite file through a
// connection of its own, as anyone who can write the file can.
func TestTamper(t *testing.T) {
	storetest.RunTamper(t, func(t testing.TB, clock portcullis.Clock) (portcullis.Store, storetest.ColumnEditor) {
		path := filepath.Join(t.TempDir(), "state.db")
		s, err := sqlite.Open(context.Background(), path, sqlite.Options{Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := db.Close(); err != nil {
				t.Errorf("close the editing connection: %v", err)
			}
		})
		return s, func(t testing.TB, seq int64, column string, value any) {
			t.Helper()
			if at, ok := value.(time.Time); ok {
				value = at.UnixNano()
			}
			res, err := db.Exec(`UPDATE audit SET `+column+` = ? WHERE seq = ?`, value, seq)
			if err != nil {
				t.Fatalf("edit row %d's %s: %v", seq, column, err)
			}
			if n, err := res.RowsAffected(); err != nil || n != 1 {
				t.Fatalf("edit row %d's %s: %d rows, %v", seq, column, n, err)
			}
		}
	})
}

// TestSync opens the store with each durability and checks the writing
// connection's synchronous setting, and refuses an unknown one by name.
func TestSync(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		sync sqlite.Sync
		want int
	}{{"", 2}, {sqlite.SyncFull, 2}, {sqlite.SyncProcess, 1}} {
		s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "state.db"), sqlite.Options{Sync: tc.sync})
		if err != nil {
			t.Fatal(err)
		}
		n, err := s.WriterSynchronous(ctx)
		if cerr := s.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
		if n != tc.want {
			t.Errorf("Sync %q: PRAGMA synchronous = %d; want %d", tc.sync, n, tc.want)
		}
	}
	_, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "state.db"), sqlite.Options{Sync: "normal"})
	if err == nil || !strings.Contains(err.Error(), `sync "normal": want "full"`) {
		t.Errorf("Open with Sync normal = %v; want it refused by name", err)
	}
}

// TestManyOpenAFreshFileAtOnce: hooks run as separate processes, one per
// tool call, and a host runs several at once; the first calls of a new
// machine all open a state file that does not exist yet. Every one of them
// opens it: none fails with "database is locked" while another sets the
// file up.
func TestManyOpenAFreshFileAtOnce(t *testing.T) {
	ctx := context.Background()
	const rounds, openers = 10, 8
	for round := range rounds {
		path := filepath.Join(t.TempDir(), "state.db")
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make(chan error, openers)
		for range openers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				s, err := sqlite.Open(ctx, path, sqlite.Options{})
				if err != nil {
					errs <- err
					return
				}
				_, err = s.AppendAudit(ctx, event(1, time.Now(), "s"))
				if cerr := s.Close(); err == nil {
					err = cerr
				}
				errs <- err
			}()
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Errorf("round %d: %v", round, err)
			}
		}
	}
}
