package sqlite

import "context"

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
