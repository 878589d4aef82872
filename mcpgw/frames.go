package mcpgw

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultMaxFrame is the largest line an upstream may write on its stdout
// when its configuration sets none: the MCP SDK's own default.
const DefaultMaxFrame = mcp.DefaultMaxLineLength

// Reasons a line an upstream wrote was not delivered, as FrameObserver
// reports them.
const (
	FrameNotJSON      = "not_json"      // not a JSON value at all (a log line on the wrong stream)
	FrameNotJSONRPC   = "not_jsonrpc"   // JSON, but not a JSON-RPC message
	FrameTooLarge     = "too_large"     // longer than the upstream's frame limit
	FrameBadResponse  = "bad_response"  // a response with an id that could not be read: its call failed
	frameLogFirstOnly = 5               // lines logged per upstream process before they are only counted
	frameHeadSample   = 120             // bytes of a skipped line that are logged
	idCaptureLimit    = 256             // bytes of a top-level "id" kept from an oversized frame
	frameBufKeep      = 1 << 20         // a read buffer grown past this is dropped after its frame
	frameTerminate    = 2 * time.Second // how long Close waits before SIGTERM, then SIGKILL
)

// FrameObserver is told of the lines an upstream wrote on its stdout that
// the gateway did not deliver as messages (reason is one of the Frame*
// constants). An Observer that also implements it is told.
type FrameObserver interface {
	UpstreamFrameSkipped(upstream, reason string)
}

// commandTransport starts an upstream's command and frames its stdio
// itself: one JSON-RPC message per line. Unlike the SDK's
// CommandTransport, a line that is not a JSON-RPC message (a log line
// printed to stdout by mistake) is logged, counted and skipped, and a line
// over the size limit fails only the call it answers: the session, and
// every other call on it, goes on.
type commandTransport struct {
	cmd      *exec.Cmd
	upstream string
	maxFrame int
	log      *slog.Logger
	skipped  func(reason string)
	conn     *frameConn
}

func (t *commandTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := t.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := t.cmd.Start(); err != nil {
		return nil, err
	}
	c := newFrameConn(stdout, stdin, t.upstream, t.maxFrame, t.log, t.skipped)
	c.closeFn = func() error { return stopCommand(t.cmd, stdin) }
	t.conn = c
	return c, nil
}

// frames is the connection Connect made: the gateway writes allowed calls
// to it as frames of its own (fast.go).
func (t *commandTransport) frames() *frameConn { return t.conn }

// stopCommand ends an upstream process as the MCP specification asks of a
// stdio client: close its stdin, wait, then SIGTERM, then SIGKILL.
func stopCommand(cmd *exec.Cmd, stdin io.Closer) error {
	cerr := stdin.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	wait := func() (error, bool) {
		select {
		case err := <-done:
			return err, true
		case <-time.After(frameTerminate):
			return nil, false
		}
	}
	if err, ok := wait(); ok {
		return errors.Join(cerr, exitOK(err))
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err == nil {
		if err, ok := wait(); ok {
			return errors.Join(cerr, exitOK(err))
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		return err
	}
	if err, ok := wait(); ok {
		return exitOK(err)
	}
	return errors.New("the upstream process does not exit")
}

// exitOK is nil for the way an upstream ends when asked to (its exit
// status after stdin closed, or a signal the gateway sent): the gateway
// asked it to stop.
func exitOK(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return nil
	}
	return err
}

// frameConn is an mcp.Connection over newline-delimited JSON-RPC that
// reads its frames itself (see commandTransport).
type frameConn struct {
	upstream string
	maxFrame int
	log      *slog.Logger
	skipped  func(reason string)
	logged   int // skipped lines logged so far (read loop only)

	wmu sync.Mutex
	w   io.Writer

	closeFn   func() error
	closeOnce sync.Once
	closeErr  error
	closed    chan struct{}
	incoming  chan frameOrErr
	queue     []jsonrpc.Message // the rest of a batch (Read only)
	end       error             // the stream's end, after the queue (Read only)

	// The gateway's own calls in flight (fast.go), by id: their
	// responses go to them, never to the SDK.
	pmu     sync.Mutex
	pending map[string]chan rawReply
	npend   atomic.Int32
	ended   error // why no response can arrive any more
}

// rawReply is the response to a call the gateway wrote itself: the line
// as it came (scanned), a message the SDK's codec decoded (an error
// response the frame reader made, or a line the scanner would not read),
// or the connection's end.
type rawReply struct {
	line []byte
	scan rpcLine
	msg  *jsonrpc.Response
	err  error
}

type frameOrErr struct {
	msgs []jsonrpc.Message
	err  error
}

func newFrameConn(r io.Reader, w io.Writer, upstream string, maxFrame int, log *slog.Logger, skipped func(string)) *frameConn {
	if maxFrame <= 0 {
		maxFrame = DefaultMaxFrame
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if skipped == nil {
		skipped = func(string) {}
	}
	c := &frameConn{upstream: upstream, maxFrame: maxFrame, log: log, skipped: skipped, w: w,
		closed: make(chan struct{}), incoming: make(chan frameOrErr)}
	go c.readLoop(bufio.NewReaderSize(r, 64<<10))
	return c
}

// readLoop reads lines until the stream ends, delivering the messages
// among them. It is the only reader of the stream.
func (c *frameConn) readLoop(r *bufio.Reader) {
	var buf []byte
	for {
		line, over, err := c.readLine(r, buf[:0])
		if cap(line) <= frameBufKeep {
			buf = line
		} else {
			buf = nil
		}
		var msgs []jsonrpc.Message
		switch {
		case over != nil:
			msgs = c.oversized(over)
		case len(line) > 0 && c.npend.Load() > 0 && c.divert(line):
		case len(line) > 0:
			msgs = c.decode(line)
		}
		if c.npend.Load() > 0 {
			msgs = c.claim(msgs)
		}
		if err != nil {
			c.endPending(fmt.Errorf("calling %q: %w", "tools/call", err))
		}
		if len(msgs) == 0 && err == nil {
			continue
		}
		select {
		case c.incoming <- frameOrErr{msgs: msgs, err: err}:
		case <-c.closed:
			return
		}
		if err != nil {
			return
		}
	}
}

// readLine reads one line into buf (without its newline). A line longer
// than the limit is not kept: its top-level id and method are scanned as
// it streams past, and returned in over.
func (c *frameConn) readLine(r *bufio.Reader, buf []byte) (line []byte, over *topScan, err error) {
	for {
		chunk, err := r.ReadSlice('\n')
		if over == nil && len(buf)+len(chunk) > c.maxFrame+1 {
			over = &topScan{}
			over.feed(buf)
			buf = buf[:0]
		}
		if over != nil {
			over.feed(chunk)
		} else {
			buf = append(buf, chunk...)
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF && (len(buf) > 0 || over != nil):
			// A last line without its newline: deliver it, then EOF.
			return bytes.TrimRight(buf, "\r\n"), over, io.EOF
		case err != nil:
			return nil, nil, err
		}
		return bytes.TrimRight(buf, "\r\n"), over, nil
	}
}

// decode turns one line into the messages it holds: one, or a batch's.
// A line that holds none is logged, counted and skipped; a response whose
// id can be read but whose body cannot becomes an error response, so that
// its call fails instead of waiting for its timeout.
func (c *frameConn) decode(line []byte) []jsonrpc.Message {
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) == 0 {
		return nil
	}
	switch trimmed[0] {
	case '{':
		// Decoded from a copy: the message keeps its params or result,
		// and the line's buffer is reused.
		msg, err := jsonrpc.DecodeMessage(bytes.Clone(trimmed))
		if err == nil {
			return []jsonrpc.Message{msg}
		}
		if !json.Valid(trimmed) {
			c.skip(FrameNotJSON, trimmed, err)
			return nil
		}
		var sc topScan
		sc.feed(trimmed)
		// Only a frame that claims to be a JSON-RPC response fails the
		// call of its id: a log record with an "id" field fails nothing.
		if sc.jsonrpc && sc.id != nil && !sc.method {
			c.skip(FrameBadResponse, trimmed, err)
			return c.failResponse(sc.id, "the upstream's response could not be read: "+err.Error())
		}
		c.skip(FrameNotJSONRPC, trimmed, err)
		return nil
	case '[':
		var raws []json.RawMessage
		if err := json.Unmarshal(trimmed, &raws); err != nil {
			c.skip(FrameNotJSON, trimmed, err)
			return nil
		}
		var msgs []jsonrpc.Message
		for _, raw := range raws {
			msgs = append(msgs, c.decode(raw)...)
		}
		if len(raws) == 0 {
			c.skip(FrameNotJSONRPC, trimmed, errors.New("empty batch"))
		}
		return msgs
	}
	c.skip(FrameNotJSON, trimmed, nil)
	return nil
}

// oversized handles a line over the limit: a response fails its own call;
// a request of the upstream is answered with an error; anything else is
// skipped.
func (c *frameConn) oversized(sc *topScan) []jsonrpc.Message {
	why := fmt.Sprintf("the upstream wrote a message of more than %d bytes, the gateway's limit for one message", c.maxFrame)
	c.skip(FrameTooLarge, nil, errors.New(why))
	if sc.id == nil {
		return nil
	}
	if sc.method {
		id, err := parseID(sc.id)
		if err != nil {
			return nil
		}
		resp := &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: why}}
		if err := c.Write(context.Background(), resp); err != nil {
			c.log.Debug("refuse an oversized request of the upstream", "upstream", c.upstream, "err", err)
		}
		return nil
	}
	return c.failResponse(sc.id, why)
}

// failResponse is an error response to the gateway's own request id.
func (c *frameConn) failResponse(rawID []byte, why string) []jsonrpc.Message {
	id, err := parseID(rawID)
	if err != nil || !id.IsValid() {
		return nil
	}
	return []jsonrpc.Message{&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: why}}}
}

func parseID(raw []byte) (jsonrpc.ID, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return jsonrpc.ID{}, err
	}
	return jsonrpc.MakeID(v)
}

// skip logs (the first few per process) and counts a line not delivered.
func (c *frameConn) skip(reason string, line []byte, err error) {
	c.skipped(reason)
	if c.logged >= frameLogFirstOnly {
		return
	}
	c.logged++
	head := line
	if len(head) > frameHeadSample {
		head = head[:frameHeadSample]
	}
	args := []any{"upstream", c.upstream, "reason", reason, "line", string(head)}
	if err != nil {
		args = append(args, "err", err)
	}
	if c.logged == frameLogFirstOnly {
		args = append(args, "further", "counted in metrics, not logged")
	}
	c.log.Warn("upstream wrote a line on stdout that is not a JSON-RPC message it can deliver; skipped, the session goes on", args...)
}

// Read implements mcp.Connection.
func (c *frameConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	if len(c.queue) > 0 {
		m := c.queue[0]
		c.queue = c.queue[1:]
		return m, nil
	}
	if c.end != nil {
		return nil, c.end
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case v := <-c.incoming:
		if len(v.msgs) == 0 {
			return nil, v.err
		}
		// A stream that ended after a last message: the message first,
		// the end on the next read.
		c.queue, c.end = v.msgs[1:], v.err
		return v.msgs[0], nil
	case <-c.closed:
		return nil, io.EOF
	}
}

// Write implements mcp.Connection.
func (c *frameConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("encode message: %w", err)
	}
	return c.writeLine(data)
}

// writeLine writes one frame and its newline.
func (c *frameConn) writeLine(data []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	select {
	case <-c.closed:
		return io.ErrClosedPipe
	default:
	}
	// A frame is one line, or the upstream reads more messages than the
	// gateway wrote.
	if bytes.IndexByte(data, '\n') >= 0 || bytes.IndexByte(data, '\r') >= 0 {
		return errors.New("a frame to the upstream holds a line break")
	}
	if _, err := c.w.Write(append(data, '\n')); err != nil {
		return err
	}
	return nil
}

// Close implements mcp.Connection: it stops the upstream process.
func (c *frameConn) Close() error {
	c.closeOnce.Do(func() {
		c.endPending(fmt.Errorf("%w: calling %q: the gateway closed the connection", mcp.ErrConnectionClosed, "tools/call"))
		close(c.closed)
		if c.closeFn != nil {
			c.closeErr = c.closeFn()
		}
	})
	return c.closeErr
}

// expect registers a call the gateway writes itself; its response is
// delivered on the channel.
func (c *frameConn) expect(id string) (<-chan rawReply, error) {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	if c.ended != nil {
		return nil, c.ended
	}
	if c.pending == nil {
		c.pending = map[string]chan rawReply{}
	}
	ch := make(chan rawReply, 1)
	c.pending[id] = ch
	c.npend.Add(1)
	return ch, nil
}

// forget drops a call that no longer waits for its response.
func (c *frameConn) forget(id string) {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	if _, ok := c.pending[id]; ok {
		delete(c.pending, id)
		c.npend.Add(-1)
	}
}

// deliver hands a response to the call waiting for it, if one is.
func (c *frameConn) deliver(id string, r rawReply) bool {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	ch, ok := c.pending[id]
	if !ok {
		return false
	}
	delete(c.pending, id)
	c.npend.Add(-1)
	ch <- r
	return true
}

// endPending fails every call waiting for a response: none can arrive.
func (c *frameConn) endPending(err error) {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	if c.ended == nil {
		c.ended = err
	}
	for id, ch := range c.pending {
		ch <- rawReply{err: err}
		delete(c.pending, id)
	}
	c.npend.Store(0)
}

// divert hands a line that answers one of the gateway's own calls to it,
// as the bytes it came as. A line the scanner will not read goes on to
// decode (and claim).
func (c *frameConn) divert(line []byte) bool {
	trimmed := bytes.TrimSpace(line)
	if !bytes.Contains(trimmed, []byte(`"`+rawIDPrefix)) {
		return false
	}
	own := bytes.Clone(trimmed)
	var m rpcLine
	if !scanLine(own, &m) || m.hasMethod || len(m.id) < 2 || m.id[0] != '"' {
		return false
	}
	return c.deliver(string(m.id[1:len(m.id)-1]), rawReply{line: own, scan: m})
}

// claim takes out of msgs the responses to the gateway's own calls and
// delivers them.
func (c *frameConn) claim(msgs []jsonrpc.Message) []jsonrpc.Message {
	out := msgs[:0]
	for _, msg := range msgs {
		if r, ok := msg.(*jsonrpc.Response); ok {
			if id, ok := r.ID.Raw().(string); ok && strings.HasPrefix(id, rawIDPrefix) && c.deliver(id, rawReply{msg: r}) {
				continue
			}
		}
		out = append(out, msg)
	}
	return out
}

// SessionID implements mcp.Connection: stdio has no session id.
func (c *frameConn) SessionID() string { return "" }

// topScan follows a JSON object as its bytes stream past, without keeping
// them, and notes its top-level "id" (its raw value, when short) and
// whether it has a top-level "method": enough to fail the one call an
// oversized response answers.
type topScan struct {
	depth    int
	inStr    bool
	esc      bool
	key      []byte // the top-level key being read
	inKey    bool
	afterKey bool   // between a top-level key and its value
	cur      string // the top-level key whose value is being read
	val      []byte // the value of "id", as it streams
	inVal    bool
	id       []byte
	method   bool
	jsonrpc  bool // a top-level "jsonrpc": the frame claims to be a message
}

func (s *topScan) feed(p []byte) {
	for _, b := range p {
		if s.inVal && s.depth == 1 && !s.inStr && (b == ',' || b == '}') {
			if s.cur == "id" && s.id == nil && len(s.val) <= idCaptureLimit {
				s.id = bytes.TrimSpace(s.val)
			}
			s.inVal, s.cur, s.val = false, "", nil
		} else if s.inVal && s.cur == "id" && len(s.val) <= idCaptureLimit {
			s.val = append(s.val, b)
		}
		if s.inStr {
			switch {
			case s.esc:
				s.esc = false
			case b == '\\':
				s.esc = true
			case b == '"':
				s.inStr = false
				if s.inKey {
					s.inKey, s.afterKey = false, true
					continue
				}
			}
			if s.inKey && !s.esc && b != '\\' {
				s.key = append(s.key, b)
			}
			continue
		}
		switch b {
		case '"':
			s.inStr = true
			if s.depth == 1 && !s.inVal && !s.afterKey {
				s.inKey, s.key = true, s.key[:0]
			}
		case ':':
			if s.depth == 1 && s.afterKey {
				s.afterKey, s.inVal, s.cur = false, true, string(s.key)
				switch s.cur {
				case "method":
					s.method = true
				case "jsonrpc":
					s.jsonrpc = true
				}
			}
		case '{', '[':
			s.depth++
		case '}', ']':
			s.depth--
		}
	}
}
