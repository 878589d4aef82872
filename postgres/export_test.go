package postgres

import "context"

// SynchronousCommit returns synchronous_commit on one of the pool's
// connections.
func (s *Store) SynchronousCommit(ctx context.Context) (string, error) {
	var v string
	err := s.pool.QueryRow(ctx, "SHOW synchronous_commit").Scan(&v)
	return v, err
}
