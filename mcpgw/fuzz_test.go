package mcpgw_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis/portcullis/mcpgw"
)

// FuzzClientMessages sends arbitrary lines to the gateway after a valid
// handshake, as a hostile or broken client would over stdio. Whatever
// arrives, the gateway must not crash, must answer or drop each line, and
// must never let a denied call (delete_note) or a call that needs a person
// (write_note) reach the upstream.
func FuzzClientMessages(f *testing.F) {
	seeds := []string{
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"delete_note","arguments":{"id":1}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"write_note","arguments":{"id":1}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"read_note","arguments":[1]}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"read_note","arguments":"x"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"DELETE_NOTE"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"delete_note","_meta":{"progressToken":{"a":1}}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"cursor":"!!"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"prompts/list","params":{"cursor":"eyJpIjo5OX0"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"notes://nothing"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"zzz"},"argument":{"name":"a","value":"b"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}`,
		`[{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"delete_note"}}]`,
		`{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"delete_note"}}`,
		`{not json`,
		``,
		// Methods whose params are missing: a handler reading them would
		// take the gateway down.
		`{"jsonrpc":"2.0","id":3,"method":"prompts/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"resources/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"resources/templates/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call"}`,
		`{"jsonrpc":"2.0","id":3,"method":"prompts/get"}`,
		`{"jsonrpc":"2.0","id":3,"method":"resources/read"}`,
		`{"jsonrpc":"2.0","id":3,"method":"resources/subscribe"}`,
		`{"jsonrpc":"2.0","id":3,"method":"resources/unsubscribe"}`,
		`{"jsonrpc":"2.0","id":3,"method":"completion/complete"}`,
		`{"jsonrpc":"2.0","id":3,"method":"logging/setLevel"}`,
	}
	for _, s := range seeds {
		f.Add(s)
	}
	// The gateway's stdio server (ServeStdio, with its fast path for
	// tools/call) in front of an upstream it frames itself.
	h, _ := newFastHarness(f, func(c *mcpgw.Config) { c.Wait = 20 * time.Millisecond; c.ShowDenied = true })
	f.Fuzz(func(t *testing.T, line string) {
		if strings.ContainsAny(line, "\n\r") {
			line = strings.NewReplacer("\n", " ", "\r", " ").Replace(line)
		}
		cr, sw := io.Pipe()
		sr, cw := io.Pipe()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ended := make(chan struct{})
		go func() { _ = h.gw.ServeStdio(ctx, sr, sw); close(ended) }()
		// Everything the gateway writes must be JSON-RPC, one message a
		// line; the final ping's answer says the line has been dealt with.
		answered := make(chan struct{})
		bad := make(chan string, 1)
		go func() {
			sc := bufio.NewScanner(cr)
			sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
			for sc.Scan() {
				if !json.Valid(sc.Bytes()) {
					select {
					case bad <- sc.Text():
					default:
					}
				}
				var m struct {
					ID json.RawMessage `json:"id"`
				}
				if json.Unmarshal(sc.Bytes(), &m) == nil && string(m.ID) == `"fuzz-final-ping"` {
					close(answered)
					break
				}
			}
			io.Copy(io.Discard, cr)
		}()
		// The gateway may hang up on a client that sends garbage; later
		// writes then fail, which is fine.
		send := func(s string) { _, _ = io.WriteString(cw, s+"\n") }
		send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"fuzz","version":"1"}}}`)
		send(`{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`)
		send(line)
		// A final ping proves the session still answers after the line. A
		// line that is not one whole JSON value may leave the stream's
		// decoder waiting for the rest of it (the ping then reads as part
		// of it), so only after a whole value must the ping be answered.
		send(`{"jsonrpc":"2.0","id":"fuzz-final-ping","method":"ping"}`)
		if json.Valid([]byte(line)) {
			select {
			case <-answered:
			case <-ended:
				// The gateway hung up on the client: also an answer.
			case <-ctx.Done():
				t.Fatalf("after %q the gateway neither answered a ping nor hung up", line)
			}
		}
		// Whatever the line was, the session ends when the client hangs up.
		cw.Close()
		select {
		case <-ended:
		case <-ctx.Done():
			t.Fatalf("after %q the session did not end when the client hung up", line)
		}
		select {
		case l := <-bad:
			t.Fatalf("after %q the gateway wrote a line that is not JSON: %q", line, l)
		default:
		}
		if n := h.up.count("delete_note"); n != 0 {
			t.Fatalf("a denied call reached the upstream after %q", line)
		}
		if n := h.up.count("write_note"); n != 0 {
			t.Fatalf("a call needing a person reached the upstream unapproved after %q", line)
		}
	})
}

// TestMalformedUpstreamMessages puts a broken upstream behind the gateway:
// it answers tools/call with a line that is not JSON and then with a
// result of the wrong shape. The client gets errors, never a crash, and the
// next well-formed answer goes through.
func TestMalformedUpstreamMessages(t *testing.T) {
	var calls atomic.Int32 // across restarts of the upstream
	up := mcpgw.Upstream{Name: "broken", TrustAnnotations: true, Transport: func(ctx context.Context) (mcp.Transport, error) {
		cr, sw := io.Pipe()
		sr, cw := io.Pipe()
		go brokenServer(sr, sw, &calls)
		return &mcp.IOTransport{Reader: cr, Writer: cw}, nil
	}}
	h2 := newHarness(t, testPolicy, func(c *mcpgw.Config) {
		c.Upstreams = []mcpgw.Upstream{up}
		c.CallTimeout = 2 * time.Second
	})
	cs := h2.connect(nil)
	call := func() (*mcp.CallToolResult, error) {
		return cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "probe", Arguments: map[string]any{}})
	}
	// The first two answers are malformed: errors, whether the SDK drops
	// the connection (and the gateway restarts the upstream) or not.
	for calls.Load() < 2 {
		res, err := call()
		if err == nil && !res.IsError {
			t.Fatalf("after %d upstream calls a malformed answer came back as success: %+v", calls.Load(), res)
		}
		time.Sleep(20 * time.Millisecond)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		res, err := call()
		if err == nil && !res.IsError {
			if res.Content[0].(*mcp.TextContent).Text != "fine" {
				t.Fatalf("well-formed answer = %+v", res.Content)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gateway did not recover after the malformed answers: %v %+v", err, res)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// brokenServer is a hand-written MCP server that answers its first two
// tools/call requests wrongly.
func brokenServer(r io.Reader, w io.WriteCloser, calls *atomic.Int32) {
	defer w.Close()
	sc := bufio.NewScanner(r)
	write := func(v any) {
		b, _ := json.Marshal(v)
		w.Write(append(b, '\n'))
	}
	for sc.Scan() {
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(sc.Bytes(), &msg) != nil || msg.ID == nil {
			continue
		}
		reply := func(result any) {
			write(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "result": result})
		}
		switch msg.Method {
		case "initialize":
			reply(map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{"tools": map[string]any{}}, "serverInfo": map[string]any{"name": "broken", "version": "0"}})
		case "tools/list":
			reply(map[string]any{"tools": []any{map[string]any{"name": "probe", "inputSchema": map[string]any{"type": "object"}, "annotations": map[string]any{"readOnlyHint": true}}}})
		case "tools/call":
			switch calls.Add(1) {
			case 1:
				w.Write([]byte("{this is not json\n"))
				write(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "error": map[string]any{"code": -32603, "message": "broken on purpose"}})
			case 2:
				reply(42) // not a CallToolResult
			default:
				reply(map[string]any{"content": []any{map[string]any{"type": "text", "text": "fine"}}})
			}
		default:
			reply(map[string]any{})
		}
	}
}
