package sqlite

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync/atomic"
)

// writeConnector opens the store's write connections: the driver's, each
// wrapped in a writeConn.
type writeConnector struct {
	driver.Connector
	opened atomic.Int64 // connections opened, for tests
}

// writeDriverConn is what database/sql uses of the driver's connection.
type writeDriverConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

func (c *writeConnector) Connect(ctx context.Context) (driver.Conn, error) {
	dc, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	inner, ok := dc.(writeDriverConn)
	if !ok {
		return nil, errors.Join(fmt.Errorf("the driver's connection %T lacks a method database/sql needs", dc), dc.Close())
	}
	c.opened.Add(1)
	return &writeConn{writeDriverConn: inner}, nil
}

// writeConn is a write connection and the audit writer's statements
// prepared on it. Statements belong to the connection they were prepared
// on: when database/sql closes the connection (a bad connection, or
// Store.Close), Close finalizes them first; SQLite would otherwise keep
// the connection's file, and its memory, open until they are finalized.
//
// database/sql hands the connection to one user at a time, so audit needs
// no lock of its own.
type writeConn struct {
	writeDriverConn
	audit *auditStmts // prepared by the audit writer on its first commit on this connection
}

func (c *writeConn) Close() error {
	var err error
	if c.audit != nil {
		err = c.audit.close()
		c.audit = nil
	}
	return errors.Join(err, c.writeDriverConn.Close())
}
