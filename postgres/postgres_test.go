package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/postgres"
	"github.com/portcullis/portcullis/storetest"
)

const dsnEnv = "PORTCULLIS_TEST_POSTGRES_DSN"

// testDSN returns the test database's connection string, or skips.
func testDSN(tb testing.TB) string {
	tb.Helper()
	dsn := os.Getenv(dsnEnv)
	if dsn == "" {
		tb.Skipf("PostgreSQL tests need a database: set %s, e.g. %s=postgres://postgres@127.0.0.1:5432/portcullis_dev?sslmode=disable (the database must exist; each test uses a schema of its own)", dsnEnv, dsnEnv)
	}
	return dsn
}

// freshSchema returns a new schema name, dropped when the test ends (after
// the stores opened on it are closed).
func freshSchema(tb testing.TB) string {
	tb.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		tb.Fatal(err)
	}
	schema := "pt_" + hex.EncodeToString(b[:])
	dsn := testDSN(tb)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn := adminConn(tb, ctx, dsn)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			tb.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return schema
}

// adminConn is a connection of the test's own, closed when the test ends.
func adminConn(tb testing.TB, ctx context.Context, dsn string) *pgx.Conn {
	tb.Helper()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		tb.Fatalf("connect to the test database: %v", err)
	}
	tb.Cleanup(func() {
		if err := conn.Close(context.Background()); err != nil {
			tb.Errorf("close admin connection: %v", err)
		}
	})
	return conn
}

// openStore opens a store on schema and closes it when the test ends.
func openStore(tb testing.TB, dsn, schema string, clock portcullis.Clock) *postgres.Store {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := postgres.Open(ctx, dsn, postgres.Options{Clock: clock, Schema: schema})
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return s
}

func TestConformance(t *testing.T) {
	dsn := testDSN(t)
	t.Parallel()
	storetest.Run(t, func(tb testing.TB, clock portcullis.Clock) portcullis.Store {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s, err := postgres.Open(ctx, dsn, postgres.Options{Clock: clock, Schema: freshSchema(tb)})
		if err != nil {
			tb.Fatalf("Open: %v", err)
		}
		return s // the suite closes it
	})
}

func TestOpenMissingDatabase(t *testing.T) {
	dsn := testDSN(t)
	t.Parallel()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("%s is not a URL: %v", dsnEnv, err)
	}
	db := "portcullis_missing_" + strings.ToLower(rand.Text()[:8])
	u.Path = "/" + db
	u.User = url.UserPassword(u.User.Username(), "s3cret-pw")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := postgres.Open(ctx, u.String(), postgres.Options{Schema: "pt_unused"})
	if err == nil {
		s.Close()
		t.Fatalf("Open(database %s) succeeded; want an error", db)
	}
	msg := err.Error()
	for _, want := range []string{db, u.Host, "does not exist"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Open(missing database) = %q; want it to name %q", msg, want)
		}
	}
	if strings.Contains(msg, "s3cret-pw") {
		t.Errorf("Open(missing database) = %q; it shows the password", msg)
	}
}

func TestOpenRefused(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Port 1 on the loopback interface: nothing listens there.
	s, err := postgres.Open(ctx, "postgres://portcullis:s3cret-pw@127.0.0.1:1/statedb?sslmode=disable&connect_timeout=5", postgres.Options{})
	if err == nil {
		s.Close()
		t.Fatal("Open(refused) succeeded; want an error")
	}
	msg := err.Error()
	for _, want := range []string{"127.0.0.1:1", `"statedb"`, "cannot connect"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Open(refused) = %q; want it to say %q", msg, want)
		}
	}
	if strings.Contains(msg, "s3cret-pw") {
		t.Errorf("Open(refused) = %q; it shows the password", msg)
	}
}

func TestOpenBadSchemaName(t *testing.T) {
	t.Parallel()
	for _, schema := range []string{"Upper", "has-dash", "1digit", `quote"d`, "sp ace", "é", "a\x00", strings.Repeat("x", 49)} {
		_, err := postgres.Open(context.Background(), "postgres://127.0.0.1:1/x", postgres.Options{Schema: schema})
		if err == nil || !strings.Contains(err.Error(), "not a valid name") {
			t.Errorf("Open(schema %q) = %v; want an invalid-name error", schema, err)
		}
	}
	for _, schema := range []string{"_", "a", "x1_y2", "_9", strings.Repeat("x", 48)} {
		_, err := postgres.Open(context.Background(), "postgres://127.0.0.1:1/x", postgres.Options{Schema: schema})
		if err == nil || strings.Contains(err.Error(), "not a valid name") {
			t.Errorf("Open(schema %q, no server) = %v; want a connection error", schema, err)
		}
	}
}

func TestOpenNewerSchema(t *testing.T) {
	dsn := testDSN(t)
	t.Parallel()
	schema := freshSchema(t)
	ctx := context.Background()
	s, err := postgres.Open(ctx, dsn, postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	admin := adminConn(t, ctx, dsn)
	next := postgres.SchemaVersion() + 1
	if _, err := admin.Exec(ctx, "INSERT INTO "+schema+".schema_migrations (version, name) VALUES ($1, 'from_the_future.sql')", next); err != nil {
		t.Fatal(err)
	}
	s, err = postgres.Open(ctx, dsn, postgres.Options{Schema: schema})
	if err == nil {
		s.Close()
		t.Fatalf("Open(schema at version %d) succeeded; want an error", next)
	}
	for _, want := range []string{fmt.Sprintf("version %d", next), "newer", schema} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Open(newer schema) = %q; want it to say %q", err, want)
		}
	}
}

func TestOpenConcurrentMigration(t *testing.T) {
	dsn := testDSN(t)
	t.Parallel()
	schema := freshSchema(t)
	const replicas = 6
	errs := make(chan error, replicas)
	stores := make(chan *postgres.Store, replicas)
	for range replicas {
		go func() {
			s, err := postgres.Open(context.Background(), dsn, postgres.Options{Schema: schema})
			errs <- err
			stores <- s
		}()
	}
	for range replicas {
		if err := <-errs; err != nil {
			t.Errorf("Open of one of %d replicas starting at once: %v", replicas, err)
		}
		if s := <-stores; s != nil {
			t.Cleanup(func() { s.Close() })
		}
	}
	admin := adminConn(t, context.Background(), dsn)
	var n int
	if err := admin.QueryRow(context.Background(), "SELECT count(*) FROM "+schema+".schema_migrations").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != postgres.SchemaVersion() {
		t.Fatalf("schema_migrations has %d rows after %d concurrent opens; want %d", n, replicas, postgres.SchemaVersion())
	}
}

// TestTamper edits the audit table of a real database through a connection
// of its own, as anyone who can log in to the database can.
func TestTamper(t *testing.T) {
	dsn := testDSN(t)
	t.Parallel()
	storetest.RunTamper(t, func(tb testing.TB, clock portcullis.Clock) (portcullis.Store, storetest.ColumnEditor) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		schema := freshSchema(tb)
		s, err := postgres.Open(ctx, dsn, postgres.Options{Clock: clock, Schema: schema})
		if err != nil {
			tb.Fatalf("Open: %v", err)
		}
		conn := adminConn(tb, ctx, dsn)
		table := pgx.Identifier{schema, "audit"}.Sanitize()
		return s, func(t testing.TB, seq int64, column string, value any) {
			t.Helper()
			tag, err := conn.Exec(context.Background(), `UPDATE `+table+` SET `+pgx.Identifier{column}.Sanitize()+` = $1 WHERE seq = $2`, value, seq)
			if err != nil {
				t.Fatalf("edit row %d's %s: %v", seq, column, err)
			}
			if tag.RowsAffected() != 1 {
				t.Fatalf("edit row %d's %s: %d rows", seq, column, tag.RowsAffected())
			}
		}
	})
}

// TestSync opens the store with each durability and checks the
// connections' synchronous_commit, and refuses an unknown one by name.
func TestSync(t *testing.T) {
	dsn := testDSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	schema := freshSchema(t)
	for _, tc := range []struct {
		sync postgres.Sync
		want string
	}{{"", "on"}, {postgres.SyncFull, "on"}, {postgres.SyncProcess, "off"}} {
		s, err := postgres.Open(ctx, dsn, postgres.Options{Schema: schema, Sync: tc.sync})
		if err != nil {
			t.Fatal(err)
		}
		v, err := s.SynchronousCommit(ctx)
		if cerr := s.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
		if v != tc.want {
			t.Errorf("Sync %q: synchronous_commit = %q; want %q", tc.sync, v, tc.want)
		}
	}
	_, err := postgres.Open(ctx, dsn, postgres.Options{Schema: schema, Sync: "normal"})
	if err == nil || !strings.Contains(err.Error(), `sync "normal": want "full"`) {
		t.Errorf("Open with Sync normal = %v; want it refused by name", err)
	}
}
