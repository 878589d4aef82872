package mcpgw_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis/portcullis/mcpgw"
)

// agentTokens are the HTTP tests' tokens: two agents.
func agentTokens(tok string) (string, bool) {
	switch tok {
	case "agent-token":
		return "bot", true
	case "other-token":
		return "eve", true
	}
	return "", false
}

// httpHarness serves the fast harness's gateway (its upstream framed by
// the gateway) over Streamable HTTP on a loopback listener.
func httpHarness(t *testing.T, mod func(*mcpgw.Config)) (*harness, *upTap, *httptest.Server) {
	t.Helper()
	h, tap := newFastHarness(t, mod)
	handler, err := h.gw.Handler(mcpgw.HTTPOptions{AgentOf: agentTokens})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return h, tap, srv
}

// httpAnswer is what a client sees of an answer.
type httpAnswer struct {
	Status       int
	ContentType  string
	CacheControl string
	SessionID    string
	Body         string
}

// post sends body to the endpoint with the token and the headers (name,
// value pairs; an empty value removes the header).
func post(t *testing.T, url, token, body string, header ...string) httpAnswer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
			continue
		}
		if header[i+1] == "" {
			req.Header.Del(header[i])
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return httpAnswer{resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Cache-Control"), resp.Header.Get("Mcp-Session-Id"), string(b)}
}

// openSession initializes a session with the token; initialized says
// whether to send notifications/initialized too.
func openSession(t *testing.T, url, token string, initialized bool) string {
	t.Helper()
	a := post(t, url, token, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, "Mcp-Protocol-Version", "")
	if a.Status != http.StatusOK || a.SessionID == "" {
		t.Fatalf("initialize = %+v; want 200 with a session id", a)
	}
	if initialized {
		if n := post(t, url, token, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, "Mcp-Session-Id", a.SessionID); n.Status != http.StatusAccepted {
			t.Fatalf("notifications/initialized = %+v; want 202", n)
		}
		// The SDK reads notifications/initialized before the ping.
		if p := post(t, url, token, `{"jsonrpc":"2.0","id":"ping","method":"ping"}`, "Mcp-Session-Id", a.SessionID); p.Status != http.StatusOK {
			t.Fatalf("ping = %+v; want 200", p)
		}
	}
	return a.SessionID
}

// sseData is the JSON-RPC message of an answer's one SSE event.
func sseData(t *testing.T, a httpAnswer) map[string]any {
	t.Helper()
	if !strings.HasPrefix(a.Body, "event: message\ndata: ") || !strings.HasSuffix(a.Body, "\n\n") || strings.Count(a.Body, "data: ") != 1 {
		t.Fatalf("answer %q; want one SSE message event", a.Body)
	}
	sc := bufio.NewScanner(strings.NewReader(a.Body))
	for sc.Scan() {
		if data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: ")); ok {
			var m map[string]any
			if err := json.Unmarshal(data, &m); err != nil {
				t.Fatalf("event data %s: %v", data, err)
			}
			if res, ok := m["result"].(map[string]any); ok {
				if meta, ok := res["_meta"].(map[string]any); ok {
					if d, ok := meta[mcpgw.DecisionMeta].(map[string]any); ok {
						delete(d, "decisionId")
						delete(d, "trace")
					}
				}
			}
			return m
		}
	}
	t.Fatalf("answer %q has no data", a.Body)
	return nil
}

// A token of another agent cannot use a session: with a session id of
// bot's, eve's request is refused as the SDK refuses it, and her call
// never reaches the upstream, whichever path would have taken it.
func TestHTTPSessionOfAnotherAgentRefused(t *testing.T) {
	h, _, srv := httpHarness(t, nil)
	sid := openSession(t, srv.URL, "agent-token", true)
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"read_note","arguments":{"id":1}}}`
	if a := post(t, srv.URL, "agent-token", call, "Mcp-Session-Id", sid); a.Status != http.StatusOK {
		t.Fatalf("bot's call on bot's session = %+v; want 200", a)
	}
	before := h.up.count("read_note")
	for _, fast := range []bool{true, false} {
		h.gw.SetHTTPFast(fast)
		a := post(t, srv.URL, "other-token", call, "Mcp-Session-Id", sid)
		if a.Status != http.StatusForbidden || !strings.Contains(a.Body, "session user mismatch") {
			t.Fatalf("eve's call on bot's session (fast path on: %v) = %+v; want 403, session user mismatch", fast, a)
		}
	}
	if n := h.up.count("read_note") - before; n != 0 {
		t.Fatalf("eve's calls on bot's session reached the upstream %d times; want never", n)
	}
}

// The fast path answers a call as the SDK's path does: the same status,
// headers and JSON-RPC message, in one SSE event; an allowed call goes to
// the framed upstream as a frame of the gateway's own.
func TestHTTPFastPathAnswersAsTheSDKPath(t *testing.T) {
	h, tap, srv := httpHarness(t, nil)
	// One session for each path: a refusal repeated in one session is a
	// retry, refused for that.
	sid, sdkSid := openSession(t, srv.URL, "agent-token", true), openSession(t, srv.URL, "agent-token", true)
	for _, c := range []struct {
		name, args string
		tool       string
		raw        bool
	}{
		{"allowed", `{"id":1,"text":"ünïcode \"quoted\""}`, "read_note", true},
		{"null arguments", `null`, "read_note", true},
		{"denied", `{"id":1}`, "delete_note", false},
		{"unknown tool", `{}`, "no_such_tool", false},
		{"arguments not an object", `[1,2]`, "read_note", false},
		{"duplicate key", `{"id":"public","id":"secret"}`, "read_note", false},
		{"forged decision stripped", `{}`, "forger", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := `{"jsonrpc":"2.0","id":"c-1","method":"tools/call","params":{"name":"` + c.tool + `","arguments":` + c.args + `}}`
			h.gw.SetHTTPFast(true)
			calls, raws := h.gw.HTTPFastCalls(), tap.rawCalls()
			fa := post(t, srv.URL, "agent-token", body, "Mcp-Session-Id", sid)
			if n := h.gw.HTTPFastCalls() - calls; n != 1 {
				t.Fatalf("the fast path answered %d calls; want 1", n)
			}
			if got := tap.rawCalls() - raws; c.raw && got != 1 || !c.raw && got != 0 {
				t.Fatalf("the call wrote %d calls of the gateway's own to the upstream; want %v", got, c.raw)
			}
			h.gw.SetHTTPFast(false)
			sa := post(t, srv.URL, "agent-token", body, "Mcp-Session-Id", sdkSid)
			if h.gw.HTTPFastCalls() != calls+1 {
				t.Fatal("the fast path answered with the fast path off")
			}
			fm, sm := sseData(t, fa), sseData(t, sa)
			fa.Body, sa.Body = "", ""
			if diff := cmp.Diff(sa, fa); diff != "" {
				t.Fatalf("answer's status and headers: fast path differs from the SDK's (-sdk +fast):\n%s", diff)
			}
			if diff := cmp.Diff(sm, fm); diff != "" {
				t.Fatalf("answer: fast path differs from the SDK's (-sdk +fast):\n%s", diff)
			}
			if c.tool == "forger" && strings.Contains(string(must(json.Marshal(fm))), mcpgw.DecisionMeta) {
				t.Fatalf("forger's answer %v carries the forged decision", fm)
			}
		})
	}
	if h.up.count("delete_note") != 0 {
		t.Fatal("a denied call reached the upstream")
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// What the fast path does not take goes to the SDK, which answers it as
// it does today: an unknown or uninitialized session, an Accept without
// the event stream, no protocol version header, a progress token, a
// batch.
func TestHTTPFastPathLeavesTheRestToTheSDK(t *testing.T) {
	h, _, srv := httpHarness(t, nil)
	sid := openSession(t, srv.URL, "agent-token", true)
	fresh := openSession(t, srv.URL, "agent-token", false)
	call := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"read_note","arguments":{"id":1}}}`
	for _, c := range []struct {
		name   string
		body   string
		header []string
		status int
	}{
		{"foreign Host", call, []string{"Mcp-Session-Id", sid, "Host", "rebound.example.com"}, http.StatusForbidden},
		{"unknown session", call, []string{"Mcp-Session-Id", "no-such-session"}, http.StatusNotFound},
		{"uninitialized session", call, []string{"Mcp-Session-Id", fresh}, http.StatusOK},
		{"Accept without the event stream", call, []string{"Mcp-Session-Id", sid, "Accept", "application/json"}, http.StatusBadRequest},
		{"unsupported protocol version", call, []string{"Mcp-Session-Id", sid, "Mcp-Protocol-Version", "2024-01-01"}, http.StatusBadRequest},
		{"no protocol version header", call, []string{"Mcp-Session-Id", sid, "Mcp-Protocol-Version", ""}, http.StatusOK},
		{"not JSON", call, []string{"Mcp-Session-Id", sid, "Content-Type", "text/plain"}, http.StatusUnsupportedMediaType},
		{"progress token", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"read_note","arguments":{"id":1},"_meta":{"progressToken":"p"}}}`, []string{"Mcp-Session-Id", sid}, http.StatusOK},
		{"batch", "[" + call + "]", []string{"Mcp-Session-Id", sid}, http.StatusBadRequest},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got [2]httpAnswer
			for i, fast := range []bool{true, false} {
				h.gw.SetHTTPFast(fast)
				calls := h.gw.HTTPFastCalls()
				got[i] = post(t, srv.URL, "agent-token", c.body, c.header...)
				if h.gw.HTTPFastCalls() != calls {
					t.Fatal("the fast path answered it")
				}
			}
			if got[0].Status != c.status {
				t.Fatalf("answer %+v; want status %d", got[0], c.status)
			}
			if got[0].Status == http.StatusOK {
				fm, sm := sseData(t, got[0]), sseData(t, got[1])
				if diff := cmp.Diff(sm, fm); diff != "" {
					t.Fatalf("answers differ (-fast path off +on):\n%s", diff)
				}
				got[0].Body, got[1].Body = "", ""
			}
			if diff := cmp.Diff(got[1], got[0]); diff != "" {
				t.Fatalf("answers differ (-fast path off +on):\n%s", diff)
			}
		})
	}
}

// The SDK's own Streamable HTTP client reads the fast path's answers, and
// its calls take the fast path.
func TestHTTPFastPathServesTheSDKClient(t *testing.T) {
	h, tap, srv := httpHarness(t, nil)
	client := &http.Client{Transport: tokenHeader{http.DefaultTransport}}
	ctx := context.Background()
	connect := func() *mcp.ClientSession {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: client}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		// The SDK reads notifications/initialized before the ping.
		if err := cs.Ping(ctx, nil); err != nil {
			t.Fatal(err)
		}
		return cs
	}
	// One session for each path: a refusal repeated in one session is a
	// retry, refused for that.
	cs, sdk := connect(), connect()
	calls, raws := h.gw.HTTPFastCalls(), tap.rawCalls()
	fast := call(t, cs, "read_note", map[string]any{"id": 1})
	if h.gw.HTTPFastCalls() != calls+1 || tap.rawCalls() != raws+1 {
		t.Fatalf("the call took the fast path %d times and wrote %d frames of the gateway's own; want 1 and 1", h.gw.HTTPFastCalls()-calls, tap.rawCalls()-raws)
	}
	h.gw.SetHTTPFast(false)
	slow := call(t, sdk, "read_note", map[string]any{"id": 1})
	if diff := cmp.Diff(comparable(t, slow), comparable(t, fast)); diff != "" {
		t.Fatalf("read_note: fast path differs from the SDK's (-sdk +fast):\n%s", diff)
	}
	denied := call(t, sdk, "delete_note", map[string]any{"id": 1})
	h.gw.SetHTTPFast(true)
	calls = h.gw.HTTPFastCalls()
	if diff := cmp.Diff(comparable(t, denied), comparable(t, call(t, cs, "delete_note", map[string]any{"id": 1}))); diff != "" {
		t.Fatalf("delete_note: fast path differs from the SDK's (-sdk +fast):\n%s", diff)
	}
	if h.gw.HTTPFastCalls() != calls+1 {
		t.Fatal("the denied call did not take the fast path")
	}
	if h.up.count("delete_note") != 0 {
		t.Fatal("a denied call reached the upstream")
	}
}

// A fast call ends when its HTTP request does: the upstream is told to
// give it up, under the gateway's id; the session goes on.
func TestHTTPFastPathCancellationReachesTheUpstream(t *testing.T) {
	h, tap, srv := httpHarness(t, nil)
	sid := openSession(t, srv.URL, "agent-token", true)
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "Authorization": "Bearer agent-token", "Mcp-Protocol-Version": "2025-06-18", "Mcp-Session-Id": sid} {
		req.Header.Set(k, v)
	}
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		done <- err
	}()
	select {
	case <-h.up.slowIn:
	case <-time.After(10 * time.Second):
		t.Fatal("the slow call never reached the upstream")
	}
	if tap.rawCalls() != 1 || h.gw.HTTPFastCalls() != 1 {
		t.Fatal("the slow call did not go by the fast path")
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("a cancelled request returned no error")
	}
	select {
	case <-h.up.slowOut:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream's handler was not cancelled")
	}
	if !tap.saw(`"method":"notifications/cancelled","params":{"requestId":"pcf-`) {
		t.Fatal("the upstream was not told of the cancellation under the gateway's id")
	}
	if a := post(t, srv.URL, "agent-token", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_note","arguments":{}}}`, "Mcp-Session-Id", sid); a.Status != http.StatusOK || sseData(t, a)["result"] == nil {
		t.Fatalf("after a cancellation read_note = %+v", a)
	}
}

// A fast call the upstream does not answer within CallTimeout gets the
// SDK path's answer.
func TestHTTPFastPathSlowUpstreamIsBounded(t *testing.T) {
	h, _, srv := httpHarness(t, func(c *mcpgw.Config) { c.CallTimeout = 100 * time.Millisecond })
	sid, sdkSid := openSession(t, srv.URL, "agent-token", true), openSession(t, srv.URL, "agent-token", true)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{}}}`
	fa := sseData(t, post(t, srv.URL, "agent-token", body, "Mcp-Session-Id", sid))
	if h.gw.HTTPFastCalls() != 1 {
		t.Fatal("the slow call did not go by the fast path")
	}
	h.gw.SetHTTPFast(false)
	sa := sseData(t, post(t, srv.URL, "agent-token", body, "Mcp-Session-Id", sdkSid))
	if diff := cmp.Diff(sa, fa); diff != "" {
		t.Fatalf("slow call: fast path differs from the SDK's (-sdk +fast):\n%s", diff)
	}
	if !strings.Contains(string(must(json.Marshal(fa))), `did not answer the call to \"slow\" within 100ms`) {
		t.Fatalf("slow call = %v; want the bounded error", fa)
	}
}

// The SDK's idle timer counts only the requests it sees: a session with
// no request through the SDK for half the session timeout has its next
// call go through the SDK (which restarts its timer), and the session
// goes on.
func TestHTTPFastPathLetsTheSDKKeepItsSessionsAlive(t *testing.T) {
	h, tap := newFastHarness(t, nil)
	handler, err := h.gw.Handler(mcpgw.HTTPOptions{AgentOf: agentTokens, SessionTimeout: 6 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	sid := openSession(t, srv.URL, "agent-token", true)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_note","arguments":{}}}`
	if a := post(t, srv.URL, "agent-token", body, "Mcp-Session-Id", sid); a.Status != http.StatusOK || h.gw.HTTPFastCalls() != 1 {
		t.Fatalf("first call = %+v, %d fast; want 200 by the fast path", a, h.gw.HTTPFastCalls())
	}
	time.Sleep(3100 * time.Millisecond) // past half the session timeout
	raws := tap.rawCalls()
	if a := post(t, srv.URL, "agent-token", body, "Mcp-Session-Id", sid); a.Status != http.StatusOK || sseData(t, a)["result"] == nil {
		t.Fatalf("call after a quiet spell = %+v; want a result", a)
	}
	if h.gw.HTTPFastCalls() != 1 || tap.rawCalls() != raws {
		t.Fatal("the call after a quiet spell took the fast path; want the SDK's")
	}
	if a := post(t, srv.URL, "agent-token", body, "Mcp-Session-Id", sid); a.Status != http.StatusOK || h.gw.HTTPFastCalls() != 2 {
		t.Fatalf("the next call = %+v, %d fast; want 200 by the fast path again", a, h.gw.HTTPFastCalls())
	}
}

// A call whose id is already in flight on its session is refused as the
// SDK refuses it (400, a JSON-RPC error under that id), and the call in
// flight still gets its own answer.
func TestHTTPFastPathRefusesAnIDInFlight(t *testing.T) {
	h, _, srv := httpHarness(t, nil)
	sid, sdkSid := openSession(t, srv.URL, "agent-token", true), openSession(t, srv.URL, "agent-token", true)
	slow := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"slow","arguments":{}}}`
	dup := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"read_note","arguments":{}}}`
	// inFlight starts the slow call on a session and returns its answer
	// once the upstream has it.
	inFlight := func(sid string) <-chan httpAnswer {
		out := make(chan httpAnswer, 1)
		go func() { out <- post(t, srv.URL, "agent-token", slow, "Mcp-Session-Id", sid) }()
		select {
		case <-h.up.slowIn:
		case <-time.After(10 * time.Second):
			t.Fatal("the slow call never reached the upstream")
		}
		return out
	}
	release := sync.OnceFunc(func() { close(h.up.slow) })
	t.Cleanup(release)
	fastSlow := inFlight(sid)
	if h.gw.HTTPFastCalls() != 1 {
		t.Fatal("the slow call did not go by the fast path")
	}
	fa := post(t, srv.URL, "agent-token", dup, "Mcp-Session-Id", sid)
	h.gw.SetHTTPFast(false)
	sdkSlow := inFlight(sdkSid)
	sa := post(t, srv.URL, "agent-token", dup, "Mcp-Session-Id", sdkSid)
	if sa.Status != http.StatusBadRequest {
		t.Fatalf("the SDK's answer to an id in flight = %+v; want 400", sa)
	}
	if diff := cmp.Diff(sa, fa); diff != "" {
		t.Fatalf("an id in flight: fast path's answer differs from the SDK's (-sdk +fast):\n%s", diff)
	}
	if h.up.count("read_note") != 0 {
		t.Fatal("a call under an id in flight reached the upstream")
	}
	release()
	for name, ch := range map[string]<-chan httpAnswer{"fast": fastSlow, "sdk": sdkSlow} {
		a := <-ch
		if a.Status != http.StatusOK || !strings.Contains(string(must(json.Marshal(sseData(t, a)))), `"done"`) {
			t.Fatalf("%s path: the call in flight = %+v; want its own answer", name, a)
		}
	}
	// The id is free again once its call is answered.
	h.gw.SetHTTPFast(true)
	if a := post(t, srv.URL, "agent-token", dup, "Mcp-Session-Id", sid); a.Status != http.StatusOK || sseData(t, a)["result"] == nil || h.gw.HTTPFastCalls() != 2 {
		t.Fatalf("the id after its call ended = %+v; want a result by the fast path", a)
	}
}

// The two paths share a session's ids in flight: a fast call under the id
// of a request the SDK's handler is serving, and a request for the SDK
// under the id of a fast call in flight, are refused as the SDK refuses
// an id in flight.
func TestHTTPPathsShareTheIDsInFlight(t *testing.T) {
	h, _, srv := httpHarness(t, nil)
	sid, sdkSid := openSession(t, srv.URL, "agent-token", true), openSession(t, srv.URL, "agent-token", true)
	release := sync.OnceFunc(func() { close(h.up.slow) })
	t.Cleanup(release)
	call := func(id, tool, meta string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":{}` + meta + `}}`
	}
	const progress = `,"_meta":{"progressToken":"p"}`
	var pending []<-chan httpAnswer
	inFlight := func(sid, body string) {
		out := make(chan httpAnswer, 1)
		go func() { out <- post(t, srv.URL, "agent-token", body, "Mcp-Session-Id", sid) }()
		select {
		case <-h.up.slowIn:
		case <-time.After(10 * time.Second):
			t.Fatal("the slow call never reached the upstream")
		}
		pending = append(pending, out)
	}
	// The SDK's own answers, the fast path off.
	h.gw.SetHTTPFast(false)
	inFlight(sdkSid, call("8", "slow", ""))
	inFlight(sdkSid, call("9", "slow", ""))
	want8 := post(t, srv.URL, "agent-token", call("8", "read_note", ""), "Mcp-Session-Id", sdkSid)
	want9 := post(t, srv.URL, "agent-token", call("9", "read_note", progress), "Mcp-Session-Id", sdkSid)
	if want8.Status != http.StatusBadRequest || want9.Status != http.StatusBadRequest {
		t.Fatalf("the SDK's answers to ids in flight = %+v, %+v; want 400", want8, want9)
	}
	h.gw.SetHTTPFast(true)
	// A call with a progress token goes to the SDK; one without, under
	// its id, to the fast path.
	fast := h.gw.HTTPFastCalls()
	inFlight(sid, call("8", "slow", progress))
	got8 := post(t, srv.URL, "agent-token", call("8", "read_note", ""), "Mcp-Session-Id", sid)
	// And the other way round.
	inFlight(sid, call("9", "slow", ""))
	got9 := post(t, srv.URL, "agent-token", call("9", "read_note", progress), "Mcp-Session-Id", sid)
	if n := h.gw.HTTPFastCalls() - fast; n != 1 {
		t.Fatalf("the fast path answered %d calls; want 1 (the slow call without a progress token)", n)
	}
	if diff := cmp.Diff(want8, got8); diff != "" {
		t.Fatalf("a fast call under the id of the SDK's call in flight (-sdk +gateway):\n%s", diff)
	}
	if diff := cmp.Diff(want9, got9); diff != "" {
		t.Fatalf("a call for the SDK under the id of a fast call in flight (-sdk +gateway):\n%s", diff)
	}
	if h.up.count("read_note") != 0 {
		t.Fatal("a call under an id in flight reached the upstream")
	}
	release()
	for _, ch := range pending {
		if a := <-ch; a.Status != http.StatusOK {
			t.Fatalf("a call in flight = %+v; want its own answer", a)
		}
	}
	// Both ids are free again.
	for _, body := range []string{call("8", "read_note", ""), call("9", "read_note", progress)} {
		if a := post(t, srv.URL, "agent-token", body, "Mcp-Session-Id", sid); a.Status != http.StatusOK {
			t.Fatalf("%s after its id was freed = %+v; want 200", body, a)
		}
	}
}

// stalledWriter is a client that stops reading once an answer begins:
// its first Write says so and waits until it is released.
type stalledWriter struct {
	header  http.Header
	once    sync.Once
	writing chan struct{}
	release chan struct{}
	mu      sync.Mutex
	body    bytes.Buffer
}

func (w *stalledWriter) Header() http.Header { return w.header }
func (w *stalledWriter) WriteHeader(int)     {}
func (w *stalledWriter) Flush()              {}
func (w *stalledWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.writing) })
	<-w.release
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.body.Write(p)
}

// A gateway stopping waits for an answer still being written, not only
// for the call: a call's answer is written after the call is over, on
// the POST's own stream, and closing the session in between ended the
// stream unanswered ("request terminated without response", seen by a
// held call that serve refused as it stopped). The SDK's session close
// waits for a write it has begun; the fast path's writes are its own.
func TestDrainWaitsForAnswersBeingWritten(t *testing.T) {
	for _, fast := range []bool{true, false} {
		h, _, srv := httpHarness(t, nil)
		h.gw.SetHTTPFast(fast)
		sid := openSession(t, srv.URL, "agent-token", true)
		before := h.gw.HTTPFastCalls()
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"read_note","arguments":{"id":1}}}`))
		req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, srv.Listener.Addr()))
		req.Host = srv.Listener.Addr().String()
		for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "Authorization": "Bearer agent-token", "Mcp-Protocol-Version": "2025-06-18", "Mcp-Session-Id": sid} {
			req.Header.Set(k, v)
		}
		w := &stalledWriter{header: http.Header{}, writing: make(chan struct{}), release: make(chan struct{})}
		served := make(chan struct{})
		go func() {
			defer close(served)
			srv.Config.Handler.ServeHTTP(w, req)
		}()
		<-w.writing
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		drained := make(chan error, 1)
		go func() { drained <- h.gw.Drain(ctx) }()
		var err error
		early := false
		select {
		case err = <-drained:
			early = true
			t.Errorf("fast path on: %v: Drain returned (%v) while an answer was being written; want it to wait for the answer", fast, err)
		case <-time.After(100 * time.Millisecond):
		}
		close(w.release)
		<-served
		if !early {
			err = <-drained
		}
		if err != nil {
			t.Errorf("fast path on: %v: Drain once the answer was written = %v; want nil", fast, err)
		}
		cancel()
		if took := h.gw.HTTPFastCalls() - before; took != map[bool]uint64{true: 1, false: 0}[fast] {
			t.Errorf("fast path on: %v: the fast path answered %d calls; want the call on the path under test", fast, took)
		}
		w.mu.Lock()
		body := w.body.String()
		w.mu.Unlock()
		if !strings.Contains(body, `"id":7`) {
			t.Errorf("fast path on: %v: the answer written = %q; want the call's answer", fast, body)
		}
	}
}
