package sqlite

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
)

// WriterSynchronous returns PRAGMA synchronous on the writing connection:
// 1 is NORMAL, 2 is FULL.
func (s *Store) WriterSynchronous(ctx context.Context) (int, error) {
	var n int
	err := s.wdb.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&n)
	return n, err
}

// AuditIndexBatch is how many rows may wait after the audit index's
// watermark.
const AuditIndexBatch = auditIndexBatch

// MigrationSQL returns the statements of migrations 1 to upTo, to build a
// file of an older schema.
func MigrationSQL(upTo int) ([]string, error) {
	ms, err := migrations()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range ms[:upTo] {
		out = append(out, m.sql)
	}
	return out, nil
}

// DiscardWriteConn makes database/sql discard the write connection, as it
// does one the driver reports bad.
func (s *Store) DiscardWriteConn(ctx context.Context) error {
	conn, err := s.wdb.Conn(ctx)
	if err != nil {
		return err
	}
	err = conn.Raw(func(any) error { return driver.ErrBadConn })
	if !errors.Is(err, driver.ErrBadConn) {
		return fmt.Errorf("Raw = %v; want driver.ErrBadConn", err)
	}
	return nil
}

// WriteConnsOpened is how many write connections the store has opened.
func (s *Store) WriteConnsOpened() int64 {
	return s.wcon.opened.Load()
}

// LeaveWriteConnInTransaction begins a transaction on the write connection
// and gives the connection back to the pool inside it.
func (s *Store) LeaveWriteConnInTransaction(ctx context.Context) error {
	conn, err := s.wdb.Conn(ctx)
	if err != nil {
		return err
	}
	err = conn.Raw(func(dc any) error {
		_, err := dc.(driver.ExecerContext).ExecContext(ctx, "BEGIN", nil)
		return err
	})
	return errors.Join(err, conn.Close())
}

// LeaveWriteConnInReadTransaction begins a deferred transaction on the
// write connection, reads in it (taking a snapshot of the file), and gives
// the connection back to the pool inside it.
func (s *Store) LeaveWriteConnInReadTransaction(ctx context.Context) error {
	conn, err := s.wdb.Conn(ctx)
	if err != nil {
		return err
	}
	err = conn.Raw(func(dc any) error {
		if _, err := dc.(driver.ExecerContext).ExecContext(ctx, "BEGIN", nil); err != nil {
			return err
		}
		rows, err := dc.(driver.QueryerContext).QueryContext(ctx, "SELECT count(*) FROM audit", nil)
		if err != nil {
			return err
		}
		dest := make([]driver.Value, 1)
		return errors.Join(rows.Next(dest), rows.Close())
	})
	return errors.Join(err, conn.Close())
}

// WaitStartTrim waits for the trim the store runs at Open, which writes on
// the write connection: a test that then takes that connection over does
// not race with it.
func (s *Store) WaitStartTrim() { <-s.trimmed }
