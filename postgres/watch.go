package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/portcullis/portcullis"
)

// Changes travel as NOTIFY payloads "kind:id" on the schema's channel, sent
// in the transaction of the write, so they are heard exactly when the write
// commits, by every replica's listener.

// notifying wraps a data-modifying statement that ends in RETURNING and
// takes n parameters so that it also notifies the channel ($n+1) with the
// payload ($n+2) when it writes a row, in the same statement. Its command
// tag counts the rows written.
func notifying(write string, n int) string {
	return fmt.Sprintf("WITH written AS (%s) SELECT pg_notify($%d, $%d) FROM written", write, n+1, n+2)
}

// maxPayload is well under PostgreSQL's limit of 8000 bytes.
const maxPayload = 1000

// payload is the notification of a change; a change too long to name is
// sent as a resync.
func payload(kind portcullis.ChangeKind, id string) string {
	p := string(kind) + ":" + id
	if len(p) > maxPayload {
		return string(portcullis.ChangeResync) + ":"
	}
	return p
}

func parsePayload(p string) portcullis.Change {
	kind, id, _ := strings.Cut(p, ":")
	switch k := portcullis.ChangeKind(kind); k {
	case portcullis.ChangeGrant, portcullis.ChangeApproval, portcullis.ChangeBlock, portcullis.ChangePin:
		return portcullis.Change{Kind: k, ID: id}
	}
	return portcullis.Change{Kind: portcullis.ChangeResync}
}

// watchBuffer is how many changes a watcher may fall behind before it
// misses some and is sent a resync.
const watchBuffer = 64

// heartbeat is how often an idle listener checks its connection.
const heartbeat = 15 * time.Second

type watcher struct {
	in     chan portcullis.Change
	missed chan struct{} // holds a token when changes were dropped
}

// Watch delivers a Change for every grant, approval, block and pin written
// through any store on this database and schema, this one or another
// replica's, until ctx ends or the store closes; then the channel closes. A
// watcher that falls behind, or that may have missed changes while the
// listener reconnected, is sent a resync: re-read what you show.
func (s *Store) Watch(ctx context.Context) (<-chan portcullis.Change, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("watch: %w", err)
	}
	w := &watcher{in: make(chan portcullis.Change, watchBuffer), missed: make(chan struct{}, 1)}
	out := make(chan portcullis.Change)
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, fmt.Errorf("watch: %w", errClosed)
	}
	s.watchMu.Lock()
	s.watchers[w] = struct{}{}
	s.watchMu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(out)
		defer func() {
			s.watchMu.Lock()
			delete(s.watchers, w)
			s.watchMu.Unlock()
		}()
		send := func(c portcullis.Change) bool {
			select {
			case out <- c:
				return true
			case <-ctx.Done():
			case <-s.life.Done():
			}
			return false
		}
		for {
			// A resync goes out before anything queued after the loss, and
			// as soon as the reader has room for it.
			select {
			case <-w.missed:
				if !send(portcullis.Change{Kind: portcullis.ChangeResync}) {
					return
				}
				continue
			default:
			}
			select {
			case <-w.missed:
				if !send(portcullis.Change{Kind: portcullis.ChangeResync}) {
					return
				}
			case c := <-w.in:
				if !send(c) {
					return
				}
			case <-ctx.Done():
				return
			case <-s.life.Done():
				return
			}
		}
	}()
	return out, nil
}

// broadcast hands c to every watcher without waiting; a watcher whose
// buffer is full is marked as having missed changes.
func (s *Store) broadcast(c portcullis.Change) {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	for w := range s.watchers {
		if c.Kind == portcullis.ChangeResync {
			markMissed(w)
			continue
		}
		select {
		case w.in <- c:
		default:
			markMissed(w)
		}
	}
}

func markMissed(w *watcher) {
	select {
	case w.missed <- struct{}{}:
	default: // already marked
	}
}

// listen opens the listener's own connection (outside the pool, which
// would hand it to other callers) and subscribes it to the channel.
func (s *Store) listen(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, s.connCfg.Copy())
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if cerr := conn.Close(closeCtx); cerr != nil {
			s.log.Debug("close listener connection", "err", cerr)
		}
		return nil, fmt.Errorf("listen on channel %q: %w", s.channel, err)
	}
	return conn, nil
}

// runListener fans the notifications heard on conn out to the watchers
// until the store closes. When the connection is lost it reconnects with
// backoff and sends every watcher a resync: changes may have been missed.
func (s *Store) runListener(conn *pgx.Conn) {
	defer s.wg.Done()
	defer func() {
		if conn != nil {
			closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			if err := conn.Close(closeCtx); err != nil {
				s.log.Debug("close listener connection", "err", err)
			}
		}
	}()
	for {
		err := s.listenOnce(conn)
		if s.life.Err() != nil {
			return
		}
		s.log.Warn("change listener lost its connection; reconnecting", "err", err)
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		if cerr := conn.Close(closeCtx); cerr != nil {
			s.log.Debug("close listener connection", "err", cerr)
		}
		cancel()
		conn = nil
		backoff := 50 * time.Millisecond
		for conn == nil {
			select {
			case <-s.life.Done():
				return
			case <-time.After(backoff):
			}
			connectCtx, cancel := context.WithTimeout(s.life, 10*time.Second)
			c, err := s.listen(connectCtx)
			cancel()
			if err != nil {
				if s.life.Err() != nil {
					return
				}
				s.log.Warn("change listener cannot reconnect yet", "err", err, "retry_in", backoff)
				backoff = min(backoff*2, 5*time.Second)
				continue
			}
			conn = c
		}
		s.log.Info("change listener reconnected; watchers resync")
		s.broadcast(portcullis.Change{Kind: portcullis.ChangeResync})
	}
}

// listenOnce delivers notifications from conn until it fails or the store
// closes. An idle connection is pinged every heartbeat, so a dead one is
// noticed even when nothing is written.
func (s *Store) listenOnce(conn *pgx.Conn) error {
	for {
		ctx, cancel := context.WithTimeout(s.life, heartbeat)
		n, err := conn.WaitForNotification(ctx)
		cancel()
		switch {
		case err == nil:
			s.broadcast(parsePayload(n.Payload))
			continue
		case s.life.Err() != nil:
			return err
		case errors.Is(err, context.DeadlineExceeded) && !conn.IsClosed():
			pingCtx, cancel := context.WithTimeout(s.life, 5*time.Second)
			err = conn.Ping(pingCtx)
			cancel()
			if err == nil {
				continue
			}
		}
		return err
	}
}
