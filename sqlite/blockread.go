package sqlite

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/portcullis/portcullis"
)

// blockReaders reads agents' blocks, which every decision does, on
// connections of their own, through the driver's own interface rather
// than database/sql. database/sql takes a connection from the pool for
// each query and, as the driver does, starts a goroutine to watch a
// context that can end; with both, a read cost two to three times what
// SQLite spends on it (docs/BENCHMARKS.md, "MCP gateway"). Here a read
// binds the agent, steps the prepared statement once and resets it.
//
// Each read is a transaction of its own (the statement is reset before the
// connection is used again), so it sees every commit made before it began,
// by this process or by another: a block written by a host hook or the CLI
// stops the very next call. A connection that fails in any way is closed,
// never reused.
//
// A read does not watch its context once it has begun: it only waits for
// another connection's lock while SQLite recovers the write-ahead log after
// a crash, and busy_timeout bounds that wait.
type blockReaders struct {
	open func() (*blockConn, error)

	mu      sync.Mutex
	idle    []*blockConn
	maxIdle int
	closed  bool
}

// blockConn is one connection with the block query prepared on it.
type blockConn struct {
	conn  driver.Conn
	stmt  driver.Stmt
	query driver.StmtQueryContext
	args  [1]driver.NamedValue
	dest  [5]driver.Value
}

// newBlockReaders opens a first connection with dial (which must return a
// read-only connection to the store's file), so that a file whose blocks
// cannot be read fails Open, and keeps up to maxIdle connections between
// reads.
func newBlockReaders(dial func() (driver.Conn, error), maxIdle int) (*blockReaders, error) {
	r := &blockReaders{maxIdle: maxIdle}
	r.open = func() (*blockConn, error) {
		conn, err := dial()
		if err != nil {
			return nil, err
		}
		c := &blockConn{conn: conn}
		p, ok := conn.(driver.ConnPrepareContext)
		if !ok {
			return nil, errors.Join(fmt.Errorf("the driver's connection %T cannot prepare a statement with a context", conn), conn.Close())
		}
		st, err := p.PrepareContext(context.Background(), selectBlock)
		if err != nil {
			return nil, errors.Join(err, conn.Close())
		}
		c.stmt = st
		if c.query, ok = st.(driver.StmtQueryContext); !ok {
			return nil, errors.Join(fmt.Errorf("the driver's statement %T cannot query with a context", st), st.Close(), conn.Close())
		}
		c.args[0].Ordinal = 1
		return c, nil
	}
	c, err := r.open()
	if err != nil {
		return nil, err
	}
	r.idle = append(r.idle, c)
	return r, nil
}

// block reads the agent's block on an idle connection, or a new one.
func (r *blockReaders) block(agent string) (portcullis.Block, bool, error) {
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
		if c, err = r.open(); err != nil {
			return portcullis.Block{}, false, err
		}
	}
	b, ok, err := c.read(agent)
	if err != nil {
		// The statement may not have been reset: a connection left inside
		// a read transaction would go on seeing the file as it was.
		return portcullis.Block{}, false, errors.Join(err, c.close())
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
	return b, ok, nil
}

// close closes the idle connections; one in use is closed when its read
// ends.
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
	clear(c.dest[:])
	return b, true, nil
}

func (c *blockConn) close() error {
	return errors.Join(c.stmt.Close(), c.conn.Close())
}
