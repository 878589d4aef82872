package sqlite

import "context"

// WriterSynchronous returns PRAGMA synchronous on the writing connection:
// 1 is NORMAL, 2 is FULL.
func (s *Store) WriterSynchronous(ctx context.Context) (int, error) {
	var n int
	err := s.wdb.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&n)
	return n, err
}
