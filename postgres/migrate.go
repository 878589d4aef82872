package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// migrationFiles are the schema's versions, applied in order: NNNN_name.sql
// brings the schema to version NNNN. A released file is never edited; a
// change is a new file.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the embedded migrations in version order.
func migrations() ([]migration, error) {
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		return nil, fmt.Errorf("list migrations: %w", err)
	}
	var out []migration
	for _, path := range names {
		name := strings.TrimPrefix(path, "migrations/")
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must start with its version number and _", name)
		}
		b, err := migrationFiles.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", name, err)
		}
		out = append(out, migration{version: v, name: name, sql: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i, m := range out {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %s: want version %d (versions are consecutive from 1)", m.name, i+1)
		}
	}
	return out, nil
}

// SchemaVersion is the schema version this binary migrates to.
func SchemaVersion() int {
	ms, err := migrations()
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].version
}

// migrate creates the schema when needed and applies the migrations it
// lacks, in one transaction under an advisory lock of the schema: replicas
// that start at once wait for each other, and the first one migrates.
func (s *Store) migrate(ctx context.Context) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer s.rollback(tx)
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", s.lockKey("migrate")); err != nil {
		return fmt.Errorf("lock the schema for migration: %w", err)
	}
	ident := pgx.Identifier{s.schema}.Sanitize()
	if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+ident); err != nil {
		return fmt.Errorf("create schema %s: %w", s.schema, err)
	}
	// The connection's search_path named the schema before it existed; name
	// it again for this transaction.
	if _, err := tx.Exec(ctx, "SELECT set_config('search_path', $1, true)", ident); err != nil {
		return fmt.Errorf("set search_path: %w", err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    integer PRIMARY KEY,
		name       text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	var have int
	if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&have); err != nil {
		return fmt.Errorf("read the schema version: %w", err)
	}
	latest := len(ms)
	if have > latest {
		return fmt.Errorf("schema %q is at version %d, newer than this portcullis knows (version %d): upgrade portcullis, or point it at another schema", s.schema, have, latest)
	}
	if have == 0 {
		// A new schema: nothing that existed has changed.
		s.log.Info("schema created", "schema", s.schema, "version", latest)
	}
	for _, m := range ms[have:] {
		if _, err := tx.Exec(ctx, m.sql); err != nil {
			return fmt.Errorf("apply migration %s: %w", m.name, err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.version, m.name); err != nil {
			return fmt.Errorf("record migration %s: %w", m.name, err)
		}
		if have > 0 {
			s.log.Info("migrated", "version", m.version, "migration", m.name)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit migrations: %w", err)
	}
	return nil
}
