package mcpgw

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The stdio fast path (docs/ARCHITECTURE.md, "The MCP gateway"): the
// wrapper's client writes one JSON-RPC message a line. Every line goes to
// the SDK's server session unchanged, except a tools/call the scanner
// reads (scan.go) on a session that has initialized: the gateway gates it
// itself, with the same gateCall as the SDK's handler, and answers it on
// the same stdout. When the call is allowed and its upstream is a command
// whose stdio the gateway frames (frameConn), the call goes to the
// upstream as a frame of the gateway's own, with a gateway-wide unique id,
// and its result comes back as the bytes the upstream wrote: neither side
// of the call is decoded by the SDK.

// rawIDPrefix starts the ids of the calls the gateway writes to an
// upstream itself.
const rawIDPrefix = "pcf-"

var rawSeq atomic.Uint64

// fastProtocol is the first protocol version the fast path leaves to the
// SDK: from 2026-07-28 results carry a resultType and calls may need
// several round trips, which the SDK handles.
const fastProtocol = "2026-07-28"

// rawCapable says whether the gateway may write calls of its own to an
// upstream session: one whose protocol the fast path speaks.
func rawCapable(ir *mcp.InitializeResult) bool {
	return ir != nil && ir.ProtocolVersion != "" && ir.ProtocolVersion < fastProtocol
}

// callRaw writes an allowed call to an upstream the gateway frames, as a
// frame of its own, and waits for its response: the result as it came
// (raw), or decoded (res) when it may carry _meta keys of the gateway's
// namespace, which forward strips. Errors read as the SDK client's.
func (g *Gateway) callRaw(ctx context.Context, fc *frameConn, e *toolEntry, tc *toolCall) (raw json.RawMessage, res *mcp.CallToolResult, isError bool, err error) {
	id := rawIDPrefix + strconv.FormatUint(rawSeq.Add(1), 36)
	ch, err := fc.expect(id)
	if err != nil {
		return nil, nil, false, err
	}
	defer fc.forget(id)
	name := e.nameJSON
	if name == nil {
		var err error
		if name, err = json.Marshal(e.name); err != nil {
			return nil, nil, false, fmt.Errorf("calling %q: %w", "tools/call", err)
		}
	}
	args, err := oneLine(forwardedArgs(tc.args))
	if err != nil {
		return nil, nil, false, fmt.Errorf("calling %q: %w", "tools/call", err)
	}
	meta, err := oneLine(tc.rawMeta)
	if err != nil {
		return nil, nil, false, fmt.Errorf("calling %q: %w", "tools/call", err)
	}
	// The frame's fixed text, the newline writeLine adds, and _meta's key.
	b := make([]byte, 0, 96+len(id)+len(name)+len(args)+len(meta))
	b = append(b, `{"jsonrpc":"2.0","id":"`...)
	b = append(b, id...)
	b = append(b, `","method":"tools/call","params":{"name":`...)
	b = append(b, name...)
	b = append(b, `,"arguments":`...)
	b = append(b, args...)
	if meta != nil {
		b = append(b, `,"_meta":`...)
		b = append(b, meta...)
	}
	b = append(b, "}}"...)
	if err := fc.writeLine(b); err != nil {
		return nil, nil, false, fmt.Errorf("calling %q: %w", "tools/call", err)
	}
	select {
	case r := <-ch:
		return rawResult(r)
	case <-ctx.Done():
		// As the SDK's client does: the call is given up at once, and the
		// upstream told so off the caller's path.
		reason, _ := json.Marshal(ctx.Err().Error())
		note := []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"` + id + `","reason":` + string(reason) + `}}`)
		go func() {
			if err := fc.writeLine(note); err != nil {
				g.log.Debug("tell the upstream a call was cancelled", "upstream", e.up.cfg.Name, "err", err)
			}
		}()
		return nil, nil, false, ctx.Err()
	}
}

// rawResult reads the response to a call the gateway wrote itself.
func rawResult(r rawReply) (json.RawMessage, *mcp.CallToolResult, bool, error) {
	wrap := func(err error) error { return fmt.Errorf("calling %q: %w", "tools/call", err) }
	switch {
	case r.err != nil:
		return nil, nil, false, r.err
	case r.msg != nil:
		if r.msg.Error != nil {
			return nil, nil, false, wrap(r.msg.Error)
		}
		var res mcp.CallToolResult
		if err := json.Unmarshal(r.msg.Result, &res); err != nil {
			return nil, nil, false, wrap(err)
		}
		return nil, &res, res.IsError, nil
	case r.scan.errorRaw != nil:
		var we jsonrpc.Error
		if err := json.Unmarshal(r.scan.errorRaw, &we); err != nil {
			return nil, nil, false, wrap(&jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the upstream's response could not be read: " + err.Error()})
		}
		return nil, nil, false, wrap(&we)
	case r.scan.result == nil:
		return nil, nil, false, wrap(errors.New("the upstream's response has neither a result nor an error"))
	case mayCarryOwnMeta(r.scan.result):
		var res mcp.CallToolResult
		if err := json.Unmarshal(r.scan.result, &res); err != nil {
			return nil, nil, false, wrap(err)
		}
		return nil, &res, res.IsError, nil
	}
	res, err := oneLine(r.scan.result)
	if err != nil {
		return nil, nil, false, wrap(err)
	}
	return res, nil, r.scan.isError, nil
}

// oneLine is raw JSON on one line. The fast paths pass JSON on as it came,
// and between tokens that may hold a line break (\n, or \r, which some
// readers take as one): an upstream or a client that reads lines would end
// the message there and read what follows as a message of its own, which
// no gate decided on. Inside a string a line break cannot be (the scanner
// refuses control characters there), so compacting removes every one.
func oneLine(raw []byte) ([]byte, error) {
	if bytes.IndexByte(raw, '\n') < 0 && bytes.IndexByte(raw, '\r') < 0 {
		return raw, nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// mayCarryOwnMeta says whether a result may hold a _meta key in the
// gateway's namespace, so it must be decoded and stripped: any "_meta" in
// any case, or any \u escape (which could spell one).
func mayCarryOwnMeta(b []byte) bool {
	if bytes.Contains(b, []byte(`\u`)) {
		return true
	}
	for i := bytes.IndexByte(b, '_'); i >= 0; {
		if len(b)-i >= 5 && bytes.EqualFold(b[i:i+5], []byte("_meta")) {
			return true
		}
		j := bytes.IndexByte(b[i+1:], '_')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return false
}

// ServeStdio serves one client over in and out (the wrapper's stdin and
// stdout) until the client disconnects or ctx ends. Only MCP messages are
// written to out.
func (g *Gateway) ServeStdio(ctx context.Context, in io.ReadCloser, out io.WriteCloser) error {
	w := &lineWriter{w: out}
	pr, pw := io.Pipe()
	ss, err := g.server.Connect(ctx, &mcp.IOTransport{Reader: frontReader{PipeReader: pr, in: in}, Writer: w}, nil)
	if err != nil {
		pr.Close()
		return fmt.Errorf("mcpgw: serve stdio: %w", err)
	}
	fctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	f := &stdioFront{g: g, s: g.sessionOf(ss, nil), w: w, sdk: pw, ctx: fctx, calls: map[string]context.CancelFunc{}}
	go f.readLoop(in)
	done := make(chan error, 1)
	go func() { done <- ss.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		ss.Close()
		<-done
		err = ctx.Err()
	}
	stop()
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	f.wg.Wait()
	f.work.close()
	return err
}

// frontReader is what the SDK's transport reads: the lines the fast path
// did not take. Closing it closes the client's stream too.
type frontReader struct {
	*io.PipeReader
	in io.Closer
}

func (r frontReader) Close() error {
	r.PipeReader.Close()
	return r.in.Close()
}

// lineWriter is the client's stdout: the SDK's writes (one message and
// its newline each) and the fast path's take the same lock.
type lineWriter struct {
	mu sync.Mutex
	w  io.WriteCloser
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lineWriter) writeLine(b []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err := l.w.Write(append(b, '\n'))
	return err
}

func (l *lineWriter) Close() error { return l.w.Close() }

// stdioFront reads the client's lines: the fast path's, and the SDK's.
type stdioFront struct {
	g   *Gateway
	s   *session
	w   *lineWriter
	sdk *io.PipeWriter
	ctx context.Context

	mu     sync.Mutex
	calls  map[string]context.CancelFunc // fast calls in flight, by idKey
	nfast  atomic.Int32                  // len(calls), read without mu
	closed bool
	wg     sync.WaitGroup
	work   workers // run the fast calls
}

// readLoop hands each line to the fast path or to the SDK. A line that is
// not one whole JSON value (a message spread over lines, or garbage)
// leaves the rest of the stream to the SDK's decoder: lines are no longer
// known to be messages.
func (f *stdioFront) readLoop(in io.Reader) {
	defer f.cancelAll()
	r := bufio.NewReaderSize(in, 64<<10)
	var buf []byte
	for {
		line, long, err := readFrontLine(r, buf[:0])
		if cap(line) <= frameBufKeep {
			buf = line
		} else {
			buf = nil
		}
		if long {
			if _, err := f.sdk.Write(line); err == nil {
				_, err = io.Copy(f.sdk, r)
				f.sdk.CloseWithError(err)
			}
			return
		}
		if len(line) > 0 && !f.take(line) {
			if _, werr := f.sdk.Write(line); werr != nil {
				return
			}
			if t := bytes.TrimSpace(line); len(t) > 0 && !json.Valid(t) {
				_, err := io.Copy(f.sdk, r)
				f.sdk.CloseWithError(err)
				return
			}
		}
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			f.sdk.CloseWithError(err)
			return
		}
	}
}

// readFrontLine reads one line with its newline; long says it is longer
// than the SDK's own limit, and only its start was read.
func readFrontLine(r *bufio.Reader, buf []byte) (line []byte, long bool, err error) {
	for {
		chunk, err := r.ReadSlice('\n')
		buf = append(buf, chunk...)
		if len(buf) > mcp.DefaultMaxLineLength {
			return buf, true, nil
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		return buf, false, err
	}
}

// cancelAll cancels the fast calls in flight when the client's stream
// ends, as the SDK cancels its handlers.
func (f *stdioFront) cancelAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, cancel := range f.calls {
		cancel()
	}
}

// ready says whether the fast path may answer the session's calls: it
// has initialized, and the protocol the server agreed to (not the one the
// client asked for) is one the fast path speaks.
func (f *stdioFront) ready() bool {
	if !f.s.initialized.Load() {
		return false
	}
	ip := f.s.ss.InitializeParams()
	return ip != nil && negotiated(ip.ProtocolVersion) < fastProtocol
}

// take answers a line on the fast path, or says it is the SDK's. A
// cancellation of a fast call cancels it (and goes to the SDK too, which
// knows no such request).
func (f *stdioFront) take(line []byte) bool {
	// While fast calls are in flight every request is read for its id.
	busy := f.nfast.Load() > 0
	if !busy && !bytes.Contains(line, []byte("tools/call")) && !bytes.Contains(line, []byte("notifications/cancelled")) {
		return false
	}
	if !f.ready() {
		return false
	}
	trimmed := bytes.TrimSpace(line)
	var m rpcLine
	if !scanLine(trimmed, &m) {
		return false
	}
	if string(m.method) == "notifications/cancelled" && m.id == nil {
		f.cancelled(trimmed)
		return false
	}
	if m.hasMethod && m.id != nil && f.holds(idKey(m.id)) {
		// As the SDK does with a request whose id is in flight: no
		// answer, so the client gets one answer under the id, the
		// call's in flight.
		f.g.log.Debug("a request reuses the id of a call in flight; not answered", "session", f.s.id, "id", string(m.id))
		return true
	}
	if !m.toolsCall() {
		return false
	}
	var meta mcp.Meta
	if m.meta != nil {
		if err := json.Unmarshal(m.meta, &meta); err != nil {
			return false
		}
		for k := range meta {
			// A progress token, and the per-request protocol keys, are
			// the SDK's to handle.
			if k == "progressToken" || strings.HasPrefix(k, "io.modelcontextprotocol/") {
				return false
			}
		}
	}
	// The line's buffer is reused: the call keeps a copy.
	own := bytes.Clone(trimmed)
	at := func(x []byte) []byte {
		if x == nil {
			return nil
		}
		i := cap(trimmed) - cap(x)
		return own[i : i+len(x) : i+len(x)]
	}
	id := at(m.id)
	tc := &toolCall{name: string(m.name), args: at(m.args), meta: meta, rawMeta: at(m.meta), fast: true}
	key := idKey(id)
	ctx, cancel := context.WithCancel(f.ctx)
	f.mu.Lock()
	// Only this goroutine adds calls, and holds found none under key.
	if f.closed {
		f.mu.Unlock()
		cancel()
		return false
	}
	f.calls[key] = cancel
	f.nfast.Add(1)
	f.wg.Add(1)
	f.mu.Unlock()
	f.work.run(func() {
		defer f.wg.Done()
		a := f.g.gateCall(ctx, f.s, tc)
		f.mu.Lock()
		delete(f.calls, key)
		f.nfast.Add(-1)
		f.mu.Unlock()
		cancel()
		f.respond(id, a)
	})
	return true
}

// holds says whether a fast call in flight holds the id key.
func (f *stdioFront) holds(key string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[key] != nil
}

// cancelled cancels the fast call a notifications/cancelled names.
func (f *stdioFront) cancelled(line []byte) {
	var n struct {
		Params struct {
			RequestID json.RawMessage `json:"requestId"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &n) != nil {
		return
	}
	dec := json.NewDecoder(bytes.NewReader(n.Params.RequestID))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return
	}
	var key string
	switch v := v.(type) {
	case string:
		key = "s" + v
	case json.Number:
		i, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return
		}
		key = "n" + strconv.FormatInt(i, 10)
	default:
		return
	}
	f.mu.Lock()
	cancel := f.calls[key]
	f.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// idKey names a request id the scanner read (a string without escapes,
// or an integer without a leading zero) as cancelled names one.
func idKey(raw []byte) string {
	if raw[0] == '"' {
		return "s" + string(raw[1:len(raw)-1])
	}
	return "n" + string(raw)
}

// respond writes a fast call's answer to the client, with the client's
// own id, as the SDK would write it.
func (f *stdioFront) respond(id []byte, a callAnswer) {
	b, err := responseLine(id, a)
	if err != nil {
		f.g.log.Warn("answer a call", "session", f.s.id, "err", err)
		return
	}
	if err := f.w.writeLine(b); err != nil {
		f.g.log.Debug("answer a call", "session", f.s.id, "err", err)
	}
}
