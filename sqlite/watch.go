package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/portcullis/portcullis"
)

const (
	// pollInterval is how often a watch reads the changes table for what
	// other processes wrote; a write through this Store wakes it at once.
	pollInterval = 200 * time.Millisecond
	// changesKept is how long change rows are kept for watchers.
	changesKept = time.Hour
	// maintainInterval is how often old change rows and long-expired grants
	// are deleted.
	maintainInterval = 10 * time.Minute
	// watchBuffer is a watch channel's capacity; a reader further behind
	// misses changes and is sent a resync.
	watchBuffer = 64
	// pollBatch bounds the change rows read at once.
	pollBatch = 512
)

// Watch delivers a Change for every grant, approval, block and pin written
// through any Store on this file, other processes included, from the call
// on, until ctx ends or the store closes; then the channel closes. Changes
// made through this Store arrive at once, others' within 200 ms. A reader
// that falls behind misses changes and is then sent a Change of kind
// "resync".
func (s *Store) Watch(ctx context.Context) (<-chan portcullis.Change, error) {
	if err := s.read(ctx, "watch"); err != nil {
		return nil, err
	}
	var last int64
	if err := s.rdb.QueryRowContext(ctx, `SELECT coalesce(max(id), 0) FROM changes`).Scan(&last); err != nil {
		return nil, fmt.Errorf("sqlite: watch: %w", err)
	}
	ch := make(chan portcullis.Change, watchBuffer)
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("sqlite: watch: %w", errClosed)
	}
	s.wg.Add(1)
	go s.watch(ctx, ch, last)
	return ch, nil
}

func (s *Store) watch(ctx context.Context, ch chan<- portcullis.Change, last int64) {
	defer s.wg.Done()
	defer close(ch)
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	missed := false
	// send delivers c without blocking; a full channel marks the watcher
	// behind, and it is sent a resync as soon as there is room.
	send := func(c portcullis.Change) {
		if missed {
			select {
			case ch <- portcullis.Change{Kind: portcullis.ChangeResync}:
				missed = false
			default:
				return
			}
		}
		select {
		case ch <- c:
		default:
			missed = true
		}
	}
	for {
		wake := s.changed.wait()
		for {
			changes, next, gap, err := s.pollChanges(ctx, last)
			if err != nil {
				if ctx.Err() == nil && !s.isClosed() {
					s.log.Warn("watch: cannot read changes", "path", s.path, "err", err)
				}
				break
			}
			if gap {
				// Rows were trimmed before this watcher read them.
				missed = true
			}
			for _, c := range changes {
				send(c)
			}
			last = next
			if len(changes) < pollBatch {
				break
			}
		}
		if missed {
			select {
			case ch <- portcullis.Change{Kind: portcullis.ChangeResync}:
				missed = false
			default:
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-s.done:
			return
		case <-wake:
		case <-tick.C:
		}
	}
}

// pollChanges reads the change rows after last. gap reports that rows
// after last were trimmed before they were read: ids are dense, since each
// is taken under the write lock.
func (s *Store) pollChanges(ctx context.Context, last int64) (changes []portcullis.Change, next int64, gap bool, err error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT id, kind, ref FROM changes WHERE id > ? ORDER BY id LIMIT ?`, last, pollBatch)
	if err != nil {
		return nil, last, false, err
	}
	defer rows.Close()
	next = last
	for rows.Next() {
		var id int64
		var kind, ref string
		if err := rows.Scan(&id, &kind, &ref); err != nil {
			return nil, last, false, err
		}
		if id != next+1 {
			gap = true
		}
		next = id
		changes = append(changes, portcullis.Change{Kind: portcullis.ChangeKind(kind), ID: ref})
	}
	if err := rows.Err(); err != nil {
		return nil, last, false, err
	}
	return changes, next, gap, nil
}

// maintain deletes change rows older than an hour and grants that expired
// more than an hour ago, at start and every ten minutes, until Close.
func (s *Store) maintain() {
	defer s.wg.Done()
	t := time.NewTicker(maintainInterval)
	defer t.Stop()
	first := true
	for {
		if err := s.trim(); err != nil && !s.isClosed() {
			s.log.Warn("trim old rows", "path", s.path, "err", err)
		}
		if first {
			close(s.trimmed)
			first = false
		}
		select {
		case <-s.done:
			return
		case <-t.C:
		}
	}
}

func (s *Store) trim() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*busyTimeout)
	defer cancel()
	before := nanos(s.clock.Now().Add(-changesKept))
	return s.write(ctx, "trim", func(t *tx) error {
		// The newest row stays, so a new watch starts from its id and does
		// not take the ids trimmed before it for a gap.
		if _, err := t.ExecContext(ctx, `DELETE FROM changes WHERE time < ? AND id < (SELECT max(id) FROM changes)`, before); err != nil {
			return err
		}
		_, err := t.ExecContext(ctx, `DELETE FROM grants WHERE expires_at <> 0 AND expires_at < ?`, before)
		return err
	})
}

// When the background checkpointer runs: once the WAL holds
// checkpointCommits of this store's commits, or checkpointAfter after the
// first of them, whichever comes first, and never sooner than
// checkpointInterval after its last checkpoint.
const (
	checkpointInterval = 100 * time.Millisecond
	checkpointCommits  = 64
	checkpointAfter    = 10 * time.Second
)

// wrote tells the checkpointer that a commit added frames to the WAL.
func (s *Store) wrote() {
	s.commits.Add(1)
	select {
	case s.written <- struct{}{}:
	default:
	}
}

// checkpoint copies committed frames from the WAL into the database file
// (PRAGMA wal_checkpoint(PASSIVE)) on a connection of its own, so that no
// commit waits for a checkpoint. A passive checkpoint never blocks writers
// or readers; frames a reader still needs are left for the next one.
//
// It waits for checkpointCommits commits, or checkpointAfter after the
// first commit it has not copied, rather than running after each commit:
// the first commit after a checkpoint that emptied the log starts the log
// anew, and under synchronous=FULL writes and fsyncs its header before its
// own frames, so isolated commits (an agent's calls, a hook's decisions
// seconds apart) would pay two fsyncs instead of one (docs/STORAGE.md,
// "Checkpoints"). The log stays small all the same: 64 commits of a lone
// writer are a few hundred pages, and under load they come within
// checkpointInterval; the writer's own checkpoint at autoCheckpoint pages
// remains the safety net. The deadline is not moved by later commits, so
// under `sync: process`, whose commits reach the disk with a checkpoint,
// no commit waits more than checkpointAfter for it.
func (s *Store) checkpoint() {
	defer s.wg.Done()
	deadline := time.NewTimer(checkpointAfter)
	deadline.Stop()
	defer deadline.Stop()
	armed := false
	for {
		select {
		case <-s.done:
			return
		case <-s.written:
			if s.commits.Load() < checkpointCommits {
				if !armed {
					deadline.Reset(checkpointAfter)
					armed = true
				}
				continue
			}
		case <-deadline.C:
			armed = false
			if s.commits.Load() == 0 {
				continue
			}
		}
		deadline.Stop()
		armed = false
		s.commits.Store(0)
		if err := s.checkpointWAL(); err != nil && !s.isClosed() {
			s.log.Warn("checkpoint the WAL", "path", s.path, "err", err)
		}
		select {
		case <-s.done:
			return
		case <-time.After(checkpointInterval):
		}
	}
}

// checkpointWAL runs a passive checkpoint.
func (s *Store) checkpointWAL() error {
	var busy, logFrames, done int
	return s.ckdb.QueryRow(`PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &logFrames, &done)
}
