// Package postgres is a portcullis.Store on PostgreSQL (pgx/v5), for several
// gateway replicas sharing one state: a grant, approval or block written
// through one replica holds on every other at once, and watchers on every
// replica hear of it through LISTEN/NOTIFY.
//
// Every object lives in one schema (Options.Schema, "portcullis" by
// default), created and migrated by Open with the embedded, versioned
// migrations under migrations/. Atomicity holds across replicas, not only
// within a process: single-use grants are consumed with
// DELETE ... FOR UPDATE SKIP LOCKED, approvals are decided with a
// conditional UPDATE, counters are upserts, and the audit chain's head is a
// row that every append locks. Concurrent audit appends of one process are
// committed together (group commit) by one writer goroutine.
//
// It must never report success for a write that did not commit, and never
// open an empty store in place of an unreachable one: any error is returned
// (the gate then fails closed), and the store recovers by itself when the
// server comes back. It imports the root package only, never a sibling.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/portcullis/portcullis"
)

// Options configures a Store. The zero value is usable.
type Options struct {
	// Clock stamps CreatedAt on grants and decides expiry of approval
	// requests; nil means the system clock.
	Clock portcullis.Clock
	// Logger receives the store's own events (a lost listener connection, a
	// failed audit commit); nil discards them.
	Logger *slog.Logger
	// Schema is the PostgreSQL schema that holds every table; "" means
	// "portcullis". Lower-case letters, digits and underscores, starting
	// with a letter or an underscore, at most 48 characters. Replicas that
	// share state use the same schema.
	Schema string
	// Sync is how far a write has gone when its method returns: SyncFull
	// (the zero value's meaning) or SyncProcess.
	Sync Sync
}

// Sync is the durability of a write when the Store method that made it
// returns.
type Sync string

const (
	// SyncFull leaves synchronous_commit as the server and the connection
	// string set it ("on" by default: a commit returns once its WAL is
	// flushed to the server's disk, so it survives a crash of the server's
	// machine). The default.
	SyncFull Sync = "full"
	// SyncProcess sets synchronous_commit = off on the store's
	// connections: a commit returns before the server flushes its WAL, so
	// it survives a crash of Portcullis but the last commits (up to three
	// times wal_writer_delay) may be lost if the database server or its
	// machine crashes. The database stays consistent either way.
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
	return "", fmt.Errorf("sync %q: want %q (a commit is flushed to the database server's disk) or %q (synchronous_commit = off: a commit survives a crash of Portcullis, not of the database server)", s, SyncFull, SyncProcess)
}

// DefaultSchema is the schema used when Options.Schema is empty.
const DefaultSchema = "portcullis"

// Store is a portcullis.Store on PostgreSQL. It is safe for concurrent use.
// Open one per process; Close it to flush the audit queue.
type Store struct {
	pool    *pgxpool.Pool
	connCfg *pgx.ConnConfig // for the listener's own connection
	clock   portcullis.Clock
	log     *slog.Logger
	schema  string
	channel string // LISTEN/NOTIFY channel of the schema

	// life ends with Close: the listener and the watchers stop.
	life     context.Context
	stopLife context.CancelFunc
	wg       sync.WaitGroup

	// mu guards closed and the sends on appends.
	mu      sync.RWMutex
	closed  bool
	appends chan *appendReq
	writer  chan struct{} // closed when the audit writer has drained
	head    chainHead     // the audit writer's own

	watchMu  sync.Mutex
	watchers map[*watcher]struct{}

	lastReset atomic.Int64 // unix nanoseconds of the last pool reset
}

var _ portcullis.Store = (*Store)(nil)

// validSchema reports whether schema is a name Open accepts: 1 to 48
// lower-case ASCII letters, digits and '_', not starting with a digit.
// (A check by hand: the regular expression it replaces compiled its bounded
// repetition into 44 KB of program at every start.)
func validSchema(schema string) bool {
	if len(schema) == 0 || len(schema) > 48 {
		return false
	}
	for i := 0; i < len(schema); i++ {
		c := schema[i]
		switch {
		case 'a' <= c && c <= 'z', c == '_':
		case i > 0 && '0' <= c && c <= '9':
		default:
			return false
		}
	}
	return true
}

// Open connects to the database named by dsn (a postgres:// URL or a
// key=value string, as libpq and pgx take them), creates Options.Schema
// when it does not exist, and applies the migrations it lacks. It fails,
// naming the host and database (never the password), when the server
// cannot be reached, refuses the login, has no such database, or holds a
// schema newer than this binary knows.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	schema := opts.Schema
	if schema == "" {
		schema = DefaultSchema
	}
	if !validSchema(schema) {
		return nil, fmt.Errorf("open postgres store: schema %q is not a valid name (lower-case letters, digits and _, starting with a letter or _, at most 48 characters)", schema)
	}
	mode, err := ParseSync(string(opts.Sync))
	if err != nil {
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx masks the password in the connection string it quotes.
		return nil, fmt.Errorf("open postgres store: parse the connection string: %w", err)
	}
	cc := cfg.ConnConfig
	where := fmt.Sprintf("PostgreSQL at %s, database %q, user %q", hostPort(cc.Host, cc.Port), cc.Database, cc.User)
	cc.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize()
	if cc.RuntimeParams["application_name"] == "" {
		cc.RuntimeParams["application_name"] = "portcullis"
	}
	if mode == SyncProcess {
		cc.RuntimeParams["synchronous_commit"] = "off"
	}
	if opts.Clock == nil {
		opts.Clock = portcullis.SystemClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}

	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres store: %s: %w", where, err)
	}
	s := &Store{
		pool:     pool,
		connCfg:  cc.Copy(),
		clock:    opts.Clock,
		log:      opts.Logger.With("store", "postgres", "schema", schema),
		schema:   schema,
		channel:  schema + ".changes",
		appends:  make(chan *appendReq, 1024),
		writer:   make(chan struct{}),
		watchers: map[*watcher]struct{}{},
	}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres store: %s: %w", where, describeConnectError(err))
	}
	s.life, s.stopLife = context.WithCancel(context.Background())
	l, err := s.listen(ctx)
	if err != nil {
		s.stopLife()
		pool.Close()
		return nil, fmt.Errorf("open postgres store: %s: listen for changes: %w", where, describeConnectError(err))
	}
	s.wg.Add(2)
	go s.runListener(l)
	go s.runJanitor()
	go s.runWriter()
	return s, nil
}

func hostPort(host string, port uint16) string {
	if strings.HasPrefix(host, "/") {
		return fmt.Sprintf("%s (socket, port %d)", host, port)
	}
	return fmt.Sprintf("%s:%d", host, port)
}

// describeConnectError says in words what went wrong when the server could
// not be used at all, keeping the driver's error for detail.
func describeConnectError(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "3D000":
			return fmt.Errorf("the database does not exist (create it, or fix the database name in the connection string): %w", err)
		case "28P01", "28000":
			return fmt.Errorf("the server refused the login (check the user and password): %w", err)
		case "42501":
			return fmt.Errorf("permission denied (the user needs CREATE on the database, or an existing schema it owns): %w", err)
		}
		return err
	}
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) {
		return fmt.Errorf("cannot connect (is PostgreSQL running and accepting connections there?): %w", err)
	}
	return err
}

// Close stops the watchers and the listener, commits the audit appends
// already queued, and closes the connections. Appends after Close fail.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.appends)
	s.mu.Unlock()
	<-s.writer
	s.stopLife()
	s.wg.Wait()
	s.pool.Close()
	return nil
}

// janitorEvery is how often expired grants are deleted; janitorGrace is how
// long after its expiry a grant is kept (it no longer matches anyway).
const (
	janitorEvery = 10 * time.Minute
	janitorGrace = time.Hour
)

// runJanitor deletes long-expired grants until the store closes.
func (s *Store) runJanitor() {
	defer s.wg.Done()
	t := time.NewTicker(janitorEvery)
	defer t.Stop()
	for {
		select {
		case <-s.life.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(s.life, time.Minute)
		tag, err := s.pool.Exec(ctx, `DELETE FROM grants WHERE expires_at < $1`, s.now().Add(-janitorGrace))
		cancel()
		if err != nil {
			s.log.Warn("delete expired grants", "err", err)
			continue
		}
		if n := tag.RowsAffected(); n > 0 {
			s.log.Debug("deleted expired grants", "grants", n)
		}
	}
}

// errClosed is returned by calls on a closed store.
var errClosed = errors.New("postgres store is closed")

// now is the store clock's time as stored: microsecond precision, UTC.
func (s *Store) now() time.Time { return ts(s.clock.Now()) }

// ts truncates t to what timestamptz keeps.
func ts(t time.Time) time.Time { return t.Truncate(time.Microsecond).UTC() }

// nullTime is t for a timestamptz column, or NULL for the zero time.
func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return ts(t)
}

// fromNull is a nullable timestamptz as read, in UTC; NULL is the zero time.
func fromNull(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// fail wraps err with what was being done. A connection-level failure
// (server gone, backend terminated) also discards the pool's idle
// connections, which are likely dead too, so the next call starts afresh.
func (s *Store) fail(what string, err error) error {
	if isConnError(err) {
		s.resetPool()
	}
	return fmt.Errorf("%s: %w", what, err)
}

// isConnError reports whether err means the connection (not the statement)
// failed: the server went away, the backend was terminated, the network
// broke, or no connection could be made.
func isConnError(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// 08: connection exception; 57P01-57P03: admin shutdown, crash
		// shutdown, cannot connect now.
		return pgErr.Severity == "FATAL" || pgErr.Severity == "PANIC" ||
			strings.HasPrefix(pgErr.Code, "08") || strings.HasPrefix(pgErr.Code, "57P")
	}
	var netErr net.Error
	var connErr *pgconn.ConnectError
	return errors.As(err, &netErr) || errors.As(err, &connErr) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		pgconn.SafeToRetry(err) // e.g. the connection was already closed
}

func (s *Store) resetPool() {
	now := time.Now().UnixNano()
	last := s.lastReset.Load()
	if now-last < int64(time.Second) || !s.lastReset.CompareAndSwap(last, now) {
		return
	}
	s.log.Warn("connection lost; reconnecting")
	s.pool.Reset()
}

// lockKey is the advisory-lock key of a named purpose in this schema.
func (s *Store) lockKey(purpose string) int64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "portcullis %s %s", purpose, s.schema)
	return int64(h.Sum64())
}

// isUniqueViolation reports whether err is a duplicate key.
func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}

// rollback ends tx if it is still open (a no-op after Commit). It runs in
// a defer, after the error that matters was returned; its own failure only
// means the connection is gone, which the pool notices.
func (s *Store) rollback(tx pgx.Tx) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tx.Rollback(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		s.log.Debug("rollback", "err", err)
	}
}
