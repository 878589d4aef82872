package mcpgw

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// SetProgressEvery shortens how often a held call reports progress, for
// tests; it returns a func that restores it.
func SetProgressEvery(d time.Duration) func() {
	old := progressEvery
	progressEvery = d
	return func() { progressEvery = old }
}

// FramedTransport connects to an upstream over r and w, framed by the
// gateway's own reader as a command's stdio is: the transport of a
// command upstream, without the command.
func FramedTransport(name string, r io.ReadCloser, w io.WriteCloser) mcp.Transport {
	return &framedTransport{name: name, r: r, w: w}
}

type framedTransport struct {
	name string
	r    io.ReadCloser
	w    io.WriteCloser
	conn *frameConn
}

func (t *framedTransport) Connect(context.Context) (mcp.Connection, error) {
	c := newFrameConn(t.r, t.w, t.name, 0, nil, nil)
	c.closeFn = func() error { return errors.Join(t.w.Close(), t.r.Close()) }
	t.conn = c
	return c, nil
}

func (t *framedTransport) frames() *frameConn { return t.conn }

// HTTPFastCalls is how many calls the HTTP fast path answered.
func (g *Gateway) HTTPFastCalls() uint64 { return g.httpFast.Load() }

// SetHTTPFast turns the HTTP fast path on or off.
func (g *Gateway) SetHTTPFast(on bool) { g.noHTTPFast.Store(!on) }
