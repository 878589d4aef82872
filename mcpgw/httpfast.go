package mcpgw

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The HTTP fast path (docs/ARCHITECTURE.md, "The MCP gateway"): a POST to
// the Streamable HTTP endpoint that carries one tools/call the scanner
// reads (scan.go), on a session the SDK's handler opened, bound to the
// request's agent and initialized, is answered by the gateway itself,
// after the checks the SDK's handler would make of it: the call is gated
// by the same gateCall as the SDK's handler, forwarded (raw to an
// upstream the gateway frames), and its answer written as the SDK writes
// it: one SSE event. Anything else, and anything the gateway is not sure
// of, goes to the SDK's handler unchanged.

// maxHTTPBody is the SDK's own limit on a request's body
// (mcp.DefaultMaxRequestBodyBytes, which Handler keeps).
const maxHTTPBody = mcp.DefaultMaxRequestBodyBytes

// fastVersions are the protocol versions the SDK's server accepts in the
// MCP-Protocol-Version header that the fast path speaks.
var fastVersions = slices.DeleteFunc(mcp.SupportedProtocolVersions(), func(v string) bool { return v >= fastProtocol })

// negotiated is the protocol version the SDK's server agrees to when a
// client asks for v, as the SDK negotiates it (the gateway's server
// supports the SDK's default versions).
func negotiated(v string) string {
	if slices.Contains(fastVersions, v) || len(fastVersions) == 0 {
		return v
	}
	return fastVersions[0]
}

// httpFront decides which requests the HTTP fast path answers.
type httpFront struct {
	g *Gateway
	// sdkHostCheck says the SDK's handler refuses a non-loopback Host on
	// a loopback listener (its DNS-rebinding protection).
	sdkHostCheck bool
	// fresh is how recently a request of the session must have gone
	// through the SDK's handler: its idle timer closes a session that
	// sees none for the session timeout, and fast calls do not reset it.
	fresh time.Duration
}

// opened is an HTTP session as the SDK's handler opened it.
type opened struct {
	ss *mcp.ServerSession
	// agent is the agent of the token that opened it: the SDK's handler
	// binds the session to it, and refuses the requests of any other.
	agent string
}

// bindOwner records the agent whose token opened an HTTP session, as the
// SDK's handler binds the session to it, until the session ends.
func (g *Gateway) bindOwner(req mcp.Request) {
	ss, ok := req.GetSession().(*mcp.ServerSession)
	extra := req.GetExtra()
	if !ok || ss == nil || ss.ID() == "" || extra == nil || extra.TokenInfo == nil || extra.TokenInfo.UserID == "" {
		return
	}
	id := ss.ID()
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, seen := g.openedBy[id]; seen {
		return
	}
	g.openedBy[id] = opened{ss: ss, agent: extra.TokenInfo.UserID}
	g.wg.Go(func() {
		_ = ss.Wait()
		g.mu.Lock()
		delete(g.openedBy, id)
		g.mu.Unlock()
	})
}

// noteSDK records that a request of a session went through the SDK's
// handler.
func (f *httpFront) noteSDK(r *http.Request) {
	sid := r.Header.Get("Mcp-Session-Id")
	if sid == "" {
		return
	}
	f.g.mu.Lock()
	s := f.g.byID[sid]
	f.g.mu.Unlock()
	if s != nil {
		s.sdkAt.Store(time.Now().UnixNano())
	}
}

// serve answers r on the fast path and says so, or says it is the SDK's.
// agent is the agent of the request's bearer token, already checked. A
// request left to the SDK may come with release: its id is held on its
// session until the SDK's handler has served it, and release frees it.
func (f *httpFront) serve(w http.ResponseWriter, r *http.Request, agent string) (handled bool, release func()) {
	if r.Method != http.MethodPost || f.g.noHTTPFast.Load() {
		return false, nil
	}
	sid := r.Header.Get("Mcp-Session-Id")
	if sid == "" || len(r.Header.Values("Last-Event-ID")) > 0 {
		return false, nil
	}
	if f.sdkHostCheck {
		if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); !ok || la == nil || (isLoopback(la.String()) && !isLoopback(r.Host)) {
			return false, nil
		}
	}
	pv := r.Header.Get("Mcp-Protocol-Version")
	if !slices.Contains(fastVersions, pv) {
		return false, nil
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		if ct, _, err := mime.ParseMediaType(ct); err != nil || ct != "application/json" {
			return false, nil
		}
	}
	if jsonOK, sseOK := accepts(r.Header.Values("Accept")); !jsonOK || !sseOK {
		return false, nil
	}
	g := f.g
	g.mu.Lock()
	s := g.byID[sid]
	o := g.openedBy[sid]
	ok := s != nil && o.ss == s.ss && o.agent != "" && o.agent == agent && s.agent == agent
	g.mu.Unlock()
	if !ok || !s.initialized.Load() || time.Since(time.Unix(0, s.sdkAt.Load())) > f.fresh {
		return false, nil
	}
	if ip := s.ss.InitializeParams(); ip == nil || negotiated(ip.ProtocolVersion) != pv {
		return false, nil
	}
	body, err := readBody(r)
	if err != nil || len(body) > maxHTTPBody {
		// The SDK reads what is left, and answers as it does.
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
		return false, nil
	}
	var m rpcLine
	scanned := scanLine(bytes.TrimSpace(body), &m)
	// restore gives the request to the SDK. The two paths share the
	// session's ids in flight: a request whose id a call of either path
	// holds is refused here as the SDK's handler refuses it, and one that
	// goes holds its id while the SDK serves it.
	restore := func() (bool, func()) {
		r.Body = io.NopCloser(bytes.NewReader(body))
		if !scanned || !m.hasMethod || m.id == nil {
			return false, nil
		}
		key := idKey(m.id)
		if !s.holdID(key) {
			setEventStream(w.Header())
			refuseHeldID(w, m.id)
			return true, nil
		}
		return false, func() { s.releaseID(key) }
	}
	if !scanned || !m.toolsCall() {
		return restore()
	}
	var meta mcp.Meta
	if m.meta != nil {
		if err := json.Unmarshal(m.meta, &meta); err != nil {
			return restore()
		}
		for k := range meta {
			// A progress token, and the per-request protocol keys, are
			// the SDK's to handle.
			if k == "progressToken" || strings.HasPrefix(k, "io.modelcontextprotocol/") {
				return restore()
			}
		}
	}
	h := w.Header()
	setEventStream(h)
	key := idKey(m.id)
	if !s.holdID(key) {
		refuseHeldID(w, m.id)
		return true, nil
	}
	g.httpFast.Add(1)
	tc := &toolCall{name: string(m.name), args: m.args, meta: meta, rawMeta: m.meta, fast: true,
		extra: &mcp.RequestExtra{TokenInfo: &auth.TokenInfo{UserID: agent}, Header: r.Header}}
	a := g.gateCall(r.Context(), s, tc)
	// The id is free once the call is answered: the client may reuse it
	// as soon as it reads the answer.
	s.releaseID(key)
	ev := make([]byte, 0, len(eventHead)+len(m.id)+len(a.raw)+48)
	ev, err = appendResponse(append(ev, eventHead...), m.id, a)
	if err != nil {
		g.log.Warn("answer a call", "session", s.id, "err", err)
		http.Error(w, "encode the answer: "+err.Error(), http.StatusInternalServerError)
		return true, nil
	}
	ev = append(ev, "\n\n"...)
	// The event is the whole answer: sent with its length, the headers
	// and the event go in one write when the handler returns, where an
	// event stream the SDK flushes takes two (the event, then the end of
	// the chunked body).
	h["Content-Length"] = []string{strconv.Itoa(len(ev))}
	if _, err := w.Write(ev); err != nil {
		g.log.Debug("answer a call", "session", s.id, "err", err)
	}
	return true, nil
}

// eventHead starts the one SSE event of a fast call's answer.
const eventHead = "event: message\ndata: "

// setEventStream sets the SDK's headers for an answer on the event
// stream. The values are shared: net/http only reads them.
func setEventStream(h http.Header) {
	h["Cache-Control"] = noCache
	h["Content-Type"] = eventStream
	h["Connection"] = keepAlive
}

var (
	noCache     = []string{"no-cache, no-transform"}
	eventStream = []string{"text/event-stream"}
	keepAlive   = []string{"keep-alive"}
)

// readBody reads a request's body, up to one byte past the SDK's limit,
// into a buffer of the size the request declares when it declares a
// small one (a large one is not allocated before it arrives).
func readBody(r *http.Request) ([]byte, error) {
	if n := r.ContentLength; n > 0 && n <= 64<<10 {
		// net/http reads no more than the declared length.
		body := make([]byte, n)
		k, err := io.ReadFull(r.Body, body)
		return body[:k], err
	}
	return io.ReadAll(io.LimitReader(r.Body, maxHTTPBody+1))
}

// refuseHeldID answers a call whose id is already in flight on its
// session as the SDK's handler does: 400, and a JSON-RPC error under the
// id (its event-stream headers already set, but for the content type).
func refuseHeldID(w http.ResponseWriter, id []byte) {
	jid, err := parseID(id)
	if err != nil {
		http.Error(w, "read the request id: "+err.Error(), http.StatusBadRequest)
		return
	}
	b, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: jid, Error: &jsonrpc.Error{
		Code:    jsonrpc.CodeInvalidRequest,
		Message: fmt.Sprintf("duplicate in-flight request ID %v", jid.Raw()),
	}})
	if err != nil {
		http.Error(w, "encode the answer: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write(b)
}

// responseLine is the JSON-RPC response to a fast call, with the
// client's own id, as the SDK encodes it.
func responseLine(id []byte, a callAnswer) ([]byte, error) {
	return appendResponse(nil, id, a)
}

// appendResponse appends responseLine's response to b.
func appendResponse(b, id []byte, a callAnswer) ([]byte, error) {
	result := a.raw
	if a.err == nil && result == nil {
		var err error
		if result, err = json.Marshal(a.res); err != nil {
			a.err = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "encode the result: " + err.Error()}
		}
	}
	if a.err != nil {
		jid, err := parseID(id)
		if err != nil {
			return nil, err
		}
		m, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: jid, Error: a.err})
		if err != nil {
			return nil, err
		}
		return append(b, m...), nil
	}
	b = slices.Grow(b, 40+len(id)+len(result))
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"result":`...)
	b = append(b, result...)
	b = append(b, '}')
	return b, nil
}

// accepts reads Accept headers as the SDK's handler does.
func accepts(values []string) (jsonOK, sseOK bool) {
	for _, value := range values {
		for raw := range strings.SplitSeq(value, ",") {
			base, _, _ := strings.Cut(strings.TrimSpace(raw), ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				sseOK = true
			case "*/*":
				jsonOK, sseOK = true, true
			}
		}
	}
	return jsonOK, sseOK
}

// isLoopback reads an address or a Host as the SDK's DNS-rebinding check
// does.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
