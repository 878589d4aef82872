// Package sqlite is the embedded, durable portcullis.Store: one SQLite file
// (modernc.org/sqlite, pure Go) in WAL mode with synchronous=FULL, so a write
// has reached the disk when its method returns (Options.Sync = SyncProcess
// trades that for speed: a write is then in the log, safe from a crash of
// the process but not of the machine). Several processes may share
// the file (the gateway and the `portcullis approve` CLI): every write runs
// in a BEGIN IMMEDIATE transaction, so read-modify-write operations are
// atomic across goroutines and processes alike, and Watch delivers changes
// made by any of them.
//
// Audit appends are batched: concurrent AppendAudit calls are committed
// together by one writer goroutine, one commit (and fsync) for the batch.
//
// The package adapts SQLite to the root package's Store interface and does
// nothing else: it imports only the standard library, the root package and
// the driver, never the gate or another adapter.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/portcullis/portcullis"
	sqlite3 "modernc.org/sqlite"
	sqlite3lib "modernc.org/sqlite/lib"
)

// Options configure a Store.
type Options struct {
	// Clock tells the time for approvals' expiry, grants' CreatedAt and the
	// trimming of old rows. Nil means the system clock.
	Clock portcullis.Clock
	// Logger receives what goes wrong in the background (a watch that
	// cannot poll, a failed trim). Nil discards.
	Logger *slog.Logger
	// NoQuickCheck skips PRAGMA quick_check at Open. quick_check reads the
	// whole file — seconds for a large audit log — which a process that
	// opens the store for a single decision (a host hook, the shell gate)
	// cannot pay every time. A damaged page is then found by the first
	// query that reads it, and that query's error denies the call.
	NoQuickCheck bool
	// Sync is how far a write has gone when its method returns: SyncFull
	// (the zero value's meaning) or SyncProcess.
	Sync Sync
}

// Sync is the durability of a write when the Store method that made it
// returns.
type Sync string

const (
	// SyncFull fsyncs the write-ahead log at every commit
	// (synchronous=FULL): a returned write survives a crash of the process
	// or of the machine (power loss, kernel panic). The default.
	SyncFull Sync = "full"
	// SyncProcess writes every commit to the write-ahead log, in the
	// operating system's page cache, without waiting for the disk
	// (synchronous=NORMAL): a returned write survives a crash or kill -9
	// of the process, but the last commits before a crash of the machine
	// may be lost. The file itself is never damaged: checkpoints still
	// fsync.
	SyncProcess Sync = "process"
)

// ParseSync reads a Sync by name ("" is SyncFull).
func ParseSync(s string) (Sync, error) {
	switch Sync(s) {
	case "", SyncFull:
		return SyncFull, nil
	case SyncProcess:
		return SyncProcess, nil
	}
	return "", fmt.Errorf("sync %q: want %q (a write survives power loss) or %q (a write survives a crash of the process, not of the machine)", s, SyncFull, SyncProcess)
}

// Store is a portcullis.Store in one SQLite file. It is safe for concurrent
// use, and for use by several processes on the same file.
type Store struct {
	path  string
	clock portcullis.Clock
	log   *slog.Logger

	noQuickCheck bool // Options.NoQuickCheck
	sync         Sync // Options.Sync, checked

	wdb  *sql.DB         // one connection: the writes of this process, in BEGIN IMMEDIATE transactions
	wcon *writeConnector // wdb's
	rdb  *sql.DB         // a pool of read-only connections
	ckdb *sql.DB         // one connection for WAL checkpoints, off the writers' path

	grantsStmt *sql.Stmt     // the candidates for UseGrant, on rdb
	blocks     *blockReaders // an agent's block, read by every decision: connections of rdb it holds

	audit   *auditWriter
	changed broadcast     // signalled after every local write to the changes table
	written chan struct{} // holds a token after a local commit: the WAL has frames to checkpoint
	commits atomic.Int64  // local commits since the last background checkpoint began

	done    chan struct{} // closed by Close: watches and maintenance end
	trimmed chan struct{} // closed when the first trim, at Open, has ended
	wg      sync.WaitGroup
	closeMu sync.Mutex
	closed  bool
}

var _ portcullis.Store = (*Store)(nil)

// busyTimeout is how long a write waits for another process's transaction.
const busyTimeout = 5 * time.Second

// applicationID marks a SQLite file as a Portcullis store ("PCLS").
const applicationID = 0x50434c53

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Open opens the store in the SQLite file at path, creating the file (mode
// 0600) and its directory (mode 0700) when they do not exist, and brings the
// schema up to date. It fails, naming the file, when the file is not a
// SQLite database, is damaged, belongs to another program, or was written by
// a newer Portcullis.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if path == "" {
		return nil, errors.New("sqlite: open: empty path (name the state file, e.g. $XDG_STATE_HOME/portcullis/portcullis.db)")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	mode, err := ParseSync(string(opts.Sync))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	s := &Store{path: abs, clock: opts.Clock, log: opts.Logger, noQuickCheck: opts.NoQuickCheck, sync: mode, done: make(chan struct{}), trimmed: make(chan struct{}), written: make(chan struct{}, 1)}
	if s.clock == nil {
		s.clock = portcullis.SystemClock{}
	}
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := s.createFile(); err != nil {
		return nil, err
	}
	if err := s.openRetrying(ctx); err != nil {
		return nil, err
	}
	if s.audit, err = newAuditWriter(ctx, s); err != nil {
		s.abandon()
		return nil, s.openErr(err)
	}
	s.wg.Add(2)
	go s.maintain()
	go s.checkpoint()
	return s, nil
}

// createFile makes the directory (0700) and an empty file (0600) when they
// are missing, so that SQLite and its -wal and -shm files inherit the mode.
func (s *Store) createFile() error {
	dir := filepath.Dir(s.path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("sqlite: open %s: create directory: %w", s.path, err)
	}
	f, err := os.OpenFile(s.path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("sqlite: open %s: %w", s.path, err)
	}
	st, err := f.Stat()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sqlite: open %s: %w", s.path, err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		s.log.Warn("state file was readable by others; restricting it to its owner", "path", s.path, "mode", st.Mode().Perm().String())
		if err := os.Chmod(s.path, 0o600); err != nil {
			return fmt.Errorf("sqlite: open %s: restrict mode to 0600: %w", s.path, err)
		}
	}
	return nil
}

// The kinds of connection.
const (
	connRead = iota
	connWrite
	connCheckpoint
)

// autoCheckpoint is the WAL size, in pages, at which a committing writer
// checkpoints itself. The background checkpointer normally keeps the WAL
// well below it, so commits do not pay for checkpoints; it is the safety
// net when the checkpointer cannot keep up.
const autoCheckpoint = 10000

// dsn returns the driver's name for the file: a file: URI (so no character
// of the path is taken for a parameter) with the connection's pragmas.
func (s *Store) dsn(kind int) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout("+strconv.Itoa(int(busyTimeout/time.Millisecond))+")")
	q.Add("_pragma", "foreign_keys(1)")
	if s.sync == SyncProcess {
		// In WAL mode NORMAL writes each commit to the log without an
		// fsync; the checkpoint that copies the log into the file fsyncs.
		q.Add("_pragma", "synchronous(NORMAL)")
	} else {
		q.Add("_pragma", "synchronous(FULL)")
	}
	q.Add("_pragma", "temp_store(MEMORY)")
	switch kind {
	case connWrite:
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "wal_autocheckpoint("+strconv.Itoa(autoCheckpoint)+")")
		q.Set("_txlock", "immediate")
	case connCheckpoint:
		q.Add("_pragma", "wal_autocheckpoint("+strconv.Itoa(autoCheckpoint)+")")
	default:
		q.Add("_pragma", "query_only(1)")
	}
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(s.path), RawQuery: q.Encode()}
	return u.String()
}

// openRetrying opens the file's connections, starting again while another
// process holds a lock SQLite does not wait for. Setting a new file into
// WAL mode, and a first read that meets another's schema change, fail at
// once with SQLITE_BUSY instead of calling the busy handler; when a host
// runs several hooks at once on a new machine, every one of them must
// still open the store. It gives up after busyTimeout, like a wait for an
// ordinary lock.
func (s *Store) openRetrying(ctx context.Context) error {
	deadline := time.Now().Add(busyTimeout)
	wait := 5 * time.Millisecond
	for {
		err := s.open(ctx)
		if err == nil {
			return nil
		}
		s.abandon()
		s.wdb, s.rdb, s.ckdb, s.grantsStmt, s.blocks = nil, nil, nil, nil, nil
		if !isBusy(err) || time.Now().Add(wait).After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, 200*time.Millisecond)
	}
}

// isBusy reports whether err is SQLite's SQLITE_BUSY or SQLITE_LOCKED.
func isBusy(err error) bool {
	var se *sqlite3.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff {
	case sqlite3lib.SQLITE_BUSY, sqlite3lib.SQLITE_LOCKED:
		return true
	}
	return false
}

func (s *Store) open(ctx context.Context) error {
	var err error
	base, err := sqlite3.NewConnector(s.dsn(connWrite))
	if err != nil {
		return s.openErr(err)
	}
	s.wcon = &writeConnector{Connector: base}
	s.wdb = sql.OpenDB(s.wcon)
	s.wdb.SetMaxOpenConns(1)
	s.wdb.SetMaxIdleConns(1)
	s.wdb.SetConnMaxLifetime(0)
	s.wdb.SetConnMaxIdleTime(0)
	if err := s.wdb.PingContext(ctx); err != nil {
		return s.openErr(err)
	}
	var mode string
	if err := s.wdb.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return s.openErr(err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("sqlite: open %s: the file is in journal mode %q, not WAL; keep the state directory on a local file system", s.path, mode)
	}
	if !s.noQuickCheck {
		if err := s.quickCheck(ctx); err != nil {
			return err
		}
	}
	if err := s.migrate(ctx); err != nil {
		return err
	}

	if s.rdb, err = sql.Open("sqlite", s.dsn(connRead)); err != nil {
		return s.openErr(err)
	}
	n := max(4, runtime.GOMAXPROCS(0))
	// Up to n connections for queries, and up to n held by s.blocks.
	s.rdb.SetMaxOpenConns(2 * n)
	s.rdb.SetMaxIdleConns(n)
	s.rdb.SetConnMaxLifetime(0)
	s.rdb.SetConnMaxIdleTime(0)
	if s.grantsStmt, err = s.rdb.PrepareContext(ctx, coveringGrant); err != nil {
		return s.openErr(err)
	}
	if s.blocks, err = newBlockReaders(ctx, s.rdb, n); err != nil {
		return s.openErr(err)
	}
	if s.ckdb, err = sql.Open("sqlite", s.dsn(connCheckpoint)); err != nil {
		return s.openErr(err)
	}
	s.ckdb.SetMaxOpenConns(1)
	s.ckdb.SetMaxIdleConns(1)
	s.ckdb.SetConnMaxLifetime(0)
	s.ckdb.SetConnMaxIdleTime(0)
	return nil
}

// openErr explains an error met while opening the file.
func (s *Store) openErr(err error) error {
	var se *sqlite3.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3lib.SQLITE_NOTADB, sqlite3lib.SQLITE_CORRUPT:
			return fmt.Errorf("sqlite: open %s: the file is not a SQLite database or is damaged (%w); move it aside and restore it from a backup, or start with an empty store", s.path, err)
		case sqlite3lib.SQLITE_CANTOPEN, sqlite3lib.SQLITE_PERM, sqlite3lib.SQLITE_READONLY:
			return fmt.Errorf("sqlite: open %s: cannot open the file for writing (%w); check its owner and mode", s.path, err)
		}
	}
	return fmt.Errorf("sqlite: open %s: %w", s.path, err)
}

// quickCheck runs PRAGMA quick_check, so a damaged file is refused at
// Open rather than failing later, one decision at a time.
func (s *Store) quickCheck(ctx context.Context) error {
	rows, err := s.wdb.QueryContext(ctx, "PRAGMA quick_check(5)")
	if err != nil {
		return s.openErr(err)
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			return s.openErr(err)
		}
		if p != "ok" {
			problems = append(problems, strings.Join(strings.Fields(p), " "))
		}
	}
	if err := rows.Err(); err != nil {
		return s.openErr(err)
	}
	if len(problems) > 0 {
		return fmt.Errorf("sqlite: open %s: the database is damaged (quick_check: %s); move it aside and restore it from a backup, or start with an empty store", s.path, strings.Join(problems, "; "))
	}
	return nil
}

type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the embedded migrations in order; their numbers run
// from 1 without a gap.
func migrations() ([]migration, error) {
	entries, err := migrationFiles.ReadDir("migrations")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || !strings.HasSuffix(e.Name(), ".sql") {
			return nil, fmt.Errorf("migration %s: name is not NNNN_name.sql", e.Name())
		}
		b, err := migrationFiles.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: e.Name(), sql: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i, m := range out {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %s: want number %d", m.name, i+1)
		}
	}
	return out, nil
}

// SchemaVersion is the newest schema this package knows.
func SchemaVersion() int {
	ms, err := migrations()
	if err != nil {
		return 0
	}
	return len(ms)
}

// migrate applies the pending migrations in one transaction, after checking
// that the file is a Portcullis store of a schema this binary knows.
func (s *Store) migrate(ctx context.Context) error {
	ms, err := migrations()
	if err != nil {
		return fmt.Errorf("sqlite: open %s: %w", s.path, err)
	}
	latest := len(ms)
	// Most opens find the schema current and need no write lock.
	version, err := s.checkSchema(ctx, s.wdb, latest)
	if err != nil || version == latest {
		return err
	}
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return s.openErr(err)
	}
	defer func() {
		if err := tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
			s.log.Warn("rollback of the migration failed", "path", s.path, "err", err)
		}
	}()
	// Another process may have migrated between the check and the lock.
	if version, err = s.checkSchema(ctx, tx, latest); err != nil || version == latest {
		return err
	}
	for _, m := range ms[version:] {
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			return fmt.Errorf("sqlite: open %s: migration %s: %w", s.path, m.name, err)
		}
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", latest)); err != nil {
		return fmt.Errorf("sqlite: open %s: record schema version: %w", s.path, err)
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA application_id = %d", applicationID)); err != nil {
		return fmt.Errorf("sqlite: open %s: record application id: %w", s.path, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite: open %s: migrate: %w", s.path, err)
	}
	if version == 0 {
		// A new file: nothing that existed has changed.
		s.log.Info("state file created", "path", s.path, "schema", latest)
	} else {
		s.log.Info("state file migrated", "path", s.path, "from", version, "to", latest)
	}
	return nil
}

type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// checkSchema returns the file's schema version, refusing a file of a newer
// schema or of another program.
func (s *Store) checkSchema(ctx context.Context, q queryer, latest int) (int, error) {
	// One statement, so one snapshot: read apart, another process's
	// migration could commit between the version and the count of tables,
	// and a new store would look like another program's file.
	var version, appID, tables int
	err := q.QueryRowContext(ctx, `SELECT (SELECT user_version FROM pragma_user_version),
		(SELECT application_id FROM pragma_application_id), (SELECT count(*) FROM sqlite_schema)`).Scan(&version, &appID, &tables)
	if err != nil {
		return 0, s.openErr(err)
	}
	if appID != 0 && appID != applicationID {
		return 0, fmt.Errorf("sqlite: open %s: the file is a SQLite database of another program (application id %#x), not a Portcullis store", s.path, appID)
	}
	if version > latest {
		return 0, fmt.Errorf("sqlite: open %s: the database was written by a newer Portcullis (schema %d, this binary knows up to %d); upgrade Portcullis", s.path, version, latest)
	}
	if version == 0 {
		if tables > 0 {
			return 0, fmt.Errorf("sqlite: open %s: the file is a SQLite database of another program (it has tables but no Portcullis schema version), not a Portcullis store", s.path)
		}
	}
	return version, nil
}

// Close drains the audit queue, ends every watch and closes the file. It is
// safe to call more than once.
func (s *Store) Close() error {
	s.closeMu.Lock()
	if s.closed {
		s.closeMu.Unlock()
		return nil
	}
	s.closed = true
	s.closeMu.Unlock()
	s.audit.close()
	close(s.done)
	s.wg.Wait()
	// Commits the checkpointer has not copied yet are copied now: a
	// short-lived process (a hook, the CLI) would otherwise leave them in
	// the log of a file another process keeps open, where only a later
	// commit of that process, or the log's safety net, checkpoints them.
	if s.commits.Load() > 0 {
		if err := s.checkpointWAL(); err != nil {
			s.log.Warn("checkpoint the WAL at close", "path", s.path, "err", err)
		}
	}
	return s.closeDBs()
}

// abandon closes what a failed Open opened; the error that failed it is
// the one reported.
func (s *Store) abandon() {
	if err := s.closeDBs(); err != nil {
		s.log.Warn("close after a failed open", "path", s.path, "err", err)
	}
}

func (s *Store) closeDBs() error {
	var errs []error
	if s.grantsStmt != nil {
		errs = append(errs, s.grantsStmt.Close())
	}
	if s.blocks != nil {
		errs = append(errs, s.blocks.close())
	}
	if s.rdb != nil {
		errs = append(errs, s.rdb.Close())
	}
	if s.wdb != nil {
		errs = append(errs, s.wdb.Close())
	}
	if s.ckdb != nil {
		errs = append(errs, s.ckdb.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sqlite: close %s: %w", s.path, err)
	}
	return nil
}

// isClosed reports whether Close has begun.
func (s *Store) isClosed() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// errClosed is returned by a method called after Close.
var errClosed = errors.New("the store is closed")

// tx is a write transaction. change records a Change for watchers in it.
type tx struct {
	*sql.Tx
	now     int64
	changed bool
}

func (t *tx) change(ctx context.Context, kind portcullis.ChangeKind, ref string) error {
	if _, err := t.ExecContext(ctx, `INSERT INTO changes (kind, ref, time) VALUES (?, ?, ?)`, string(kind), ref, t.now); err != nil {
		return fmt.Errorf("record change: %w", err)
	}
	t.changed = true
	return nil
}

// write runs fn in a BEGIN IMMEDIATE transaction (fn uses the ctx given to
// write) and commits it: what must read and then write (consuming a grant,
// deciding an approval, counting a step) is atomic across goroutines and
// processes. Errors are wrapped with op.
func (s *Store) write(ctx context.Context, op string, fn func(*tx) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlite: %s: %w", op, err)
	}
	if s.isClosed() {
		return fmt.Errorf("sqlite: %s: %w", op, errClosed)
	}
	sqlTx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite: %s: begin: %w", op, err)
	}
	t := &tx{Tx: sqlTx, now: nanos(s.clock.Now())}
	if err := fn(t); err != nil {
		if rerr := sqlTx.Rollback(); rerr != nil {
			s.log.Warn("rollback failed", "op", op, "err", rerr)
		}
		return fmt.Errorf("sqlite: %s: %w", op, err)
	}
	if err := sqlTx.Commit(); err != nil {
		return fmt.Errorf("sqlite: %s: commit: %w", op, err)
	}
	s.wrote()
	if t.changed {
		s.changed.notify()
	}
	return nil
}

// read checks ctx and the store's state before a read.
func (s *Store) read(ctx context.Context, op string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlite: %s: %w", op, err)
	}
	if s.isClosed() {
		return fmt.Errorf("sqlite: %s: %w", op, errClosed)
	}
	return nil
}

// nanos is t as Unix nanoseconds, 0 for the zero time. Times outside the
// years 1678–2262 do not fit; Portcullis stores none.
func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// fromNanos is the inverse of nanos, in UTC.
func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// broadcast wakes every waiter at once: notify closes the current channel
// and makes a new one.
type broadcast struct {
	mu sync.Mutex
	ch chan struct{}
}

func (b *broadcast) wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	return b.ch
}

func (b *broadcast) notify() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch != nil {
		close(b.ch)
	}
	b.ch = make(chan struct{})
}
