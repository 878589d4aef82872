package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/portcullis/portcullis"
)

// blockReaders reads agents' blocks, which every decision does, on
// read-only connections it holds, with the query prepared on each through
// the driver's own interface rather than database/sql's. database/sql
// takes a connection from the pool for each query and, as the driver
// does, starts a goroutine to watch a context that can end; with both, a
// read cost two to three times what SQLite spends on it (docs/BENCHMARKS.md,
// "MCP gateway"). Here a read binds the agent, steps the prepared statement
// once and resets it.
//
// Each read is a transaction of its own (the statement is reset before the
// connection is used again), so it sees every commit made before it began,
// by this process or by another: a block written by a host hook or the CLI
// stops the very next call. A connection on which a read fails in any way
// is closed, never reused.
//
// A read does not watch its context once it has begun: it only waits for
// another connection's lock while SQLite recovers the write-ahead log after
// a crash, and busy_timeout bounds that wait.
type blockReaders struct {
	db *sql.DB // the store's pool of read-only connections

	mu      sync.Mutex
	idle    []*blockConn
	maxIdle int
	closed  bool
}

// blockConn is one of the pool's connections, held, with the block query
// prepared on it.
type blockConn struct {
	conn  *sql.Conn
	stmt  driver.Stmt
	query driver.StmtQueryContext
	args  [1]driver.NamedValue
	dest  [5]driver.Value
}

// newBlockReaders holds up to maxIdle of db's connections between reads;
// db must allow maxIdle more open connections than its other users need.
// It prepares the query on one connection at once (the one the store's
// opening used, if idle: a process that makes a single decision opens no
// other), so that a file whose blocks cannot be read fails Open.
func newBlockReaders(ctx context.Context, db *sql.DB, maxIdle int) (*blockReaders, error) {
	r := &blockReaders{db: db, maxIdle: maxIdle}
	c, err := r.open(ctx)
	if err != nil {
		return nil, err
	}
	r.idle = append(r.idle, c)
	return r, nil
}

func (r *blockReaders) open(ctx context.Context) (*blockConn, error) {
	conn, err := r.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	c := &blockConn{conn: conn}
	c.args[0].Ordinal = 1
	err = conn.Raw(func(dc any) error {
		p, ok := dc.(driver.ConnPrepareContext)
		if !ok {
			return fmt.Errorf("the driver's connection %T cannot prepare a statement with a context", dc)
		}
		st, err := p.PrepareContext(ctx, selectBlock)
		if err != nil {
			return err
		}
		if c.query, ok = st.(driver.StmtQueryContext); !ok {
			return errors.Join(fmt.Errorf("the driver's statement %T cannot query with a context", st), st.Close())
		}
		c.stmt = st
		return nil
	})
	if err != nil {
		return nil, errors.Join(err, conn.Close())
	}
	return c, nil
}

// block reads the agent's block on a held connection, or on another of
// the pool's.
func (r *blockReaders) block(ctx context.Context, agent string) (portcullis.Block, bool, error) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return portcullis.Block{}, false, errClosed
	}
	var c *blockConn
	if n := len(r.idle); n > 0 {
		c = r.idle[n-1]
		r.idle = r.idle[:n-1]
	}
	r.mu.Unlock()
	if c == nil {
		var err error
		if c, err = r.open(ctx); err != nil {
			return portcullis.Block{}, false, err
		}
	}
	var b portcullis.Block
	var found bool
	var rerr error
	err := c.conn.Raw(func(any) error {
		if b, found, rerr = c.read(agent); rerr != nil {
			// The statement may not have been reset: a connection left
			// inside a read transaction would go on seeing the file as it
			// was. The pool closes a bad connection.
			return errors.Join(c.stmt.Close(), driver.ErrBadConn)
		}
		return nil
	})
	if rerr != nil {
		return portcullis.Block{}, false, rerr // Raw closed the connection
	}
	if err != nil {
		return portcullis.Block{}, false, err
	}
	r.mu.Lock()
	keep := !r.closed && len(r.idle) < r.maxIdle
	if keep {
		r.idle = append(r.idle, c)
	}
	r.mu.Unlock()
	if !keep {
		if err := c.close(); err != nil {
			return portcullis.Block{}, false, err
		}
	}
	return b, found, nil
}

// close gives the idle connections back to the pool, their statements
// closed; one in use is given back when its read ends.
func (r *blockReaders) close() error {
	r.mu.Lock()
	idle := r.idle
	r.idle, r.closed = nil, true
	r.mu.Unlock()
	var errs []error
	for _, c := range idle {
		errs = append(errs, c.close())
	}
	return errors.Join(errs...)
}

// read runs the query once. The background context keeps the driver from
// starting a goroutine to watch it.
func (c *blockConn) read(agent string) (b portcullis.Block, found bool, err error) {
	c.args[0].Value = agent
	rows, err := c.query.QueryContext(context.Background(), c.args[:])
	if err != nil {
		return portcullis.Block{}, false, err
	}
	defer func() {
		// Close resets the statement, which ends the read transaction.
		if cerr := rows.Close(); cerr != nil {
			b, found, err = portcullis.Block{}, false, errors.Join(err, cerr)
		}
	}()
	defer clear(c.dest[:])
	switch err := rows.Next(c.dest[:]); {
	case errors.Is(err, io.EOF):
		return portcullis.Block{}, false, nil
	case err != nil:
		return portcullis.Block{}, false, err
	}
	created, ok := c.dest[4].(int64)
	if !ok {
		return portcullis.Block{}, false, fmt.Errorf("blocks.created_at of agent %q is %T, not an integer", agent, c.dest[4])
	}
	b.CreatedAt = fromNanos(created)
	for i, f := range []*string{&b.Agent, &b.Reason, &b.ChallengeID, &b.DecisionID} {
		switch v := c.dest[i].(type) {
		case string:
			*f = v
		case []byte:
			*f = string(v)
		default:
			return portcullis.Block{}, false, fmt.Errorf("column %d of agent %q's block is %T, not text", i, agent, v)
		}
	}
	return b, true, nil
}

// close closes the statement and gives the connection back to the pool.
func (c *blockConn) close() error {
	err := c.conn.Raw(func(any) error { return c.stmt.Close() })
	return errors.Join(err, c.conn.Close())
}
