package mcpgw_test

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestArgumentsWithADuplicateKeyAreRefused: the gate decides on the
// arguments as encoding/json reads them (the last of two equal keys), and
// the upstream receives them as they came; an upstream whose parser keeps
// the first would act on a value the gate never saw. Such a call is
// refused on both paths (the fast path and the SDK's), at any depth and
// however the key is spelled, and never reaches the upstream.
func TestArgumentsWithADuplicateKeyAreRefused(t *testing.T) {
	h, _ := newFastHarness(t, nil)
	fast := newRawClient(t, func(in io.ReadCloser, out io.WriteCloser) { _ = h.gw.ServeStdio(context.Background(), in, out) })
	sdk := newRawClient(t, func(in io.ReadCloser, out io.WriteCloser) {
		if _, err := h.gw.Server().Connect(context.Background(), &mcp.IOTransport{Reader: in, Writer: out}, nil); err != nil {
			t.Error(err)
		}
	})
	for i, args := range []string{
		`{"id":"public","id":"secret"}`,
		`{"id":"public","opts":{"mode":"a","mode":"b"}}`,
		`{"id":"public","list":[{"x":1},{"y":1,"y":2}]}`,
		`{"id":"public","\u0069d":"secret"}`,
	} {
		line := `{"jsonrpc":"2.0","id":` + string(rune('1'+i)) + `,"method":"tools/call","params":{"name":"read_note","arguments":` + args + `}}`
		for name, c := range map[string]*rawClient{"fast path": fast, "SDK path": sdk} {
			c.send(line)
			r := resultOf(t, c.recv())
			text := ""
			if len(r.Content) == 1 {
				if tc, ok := r.Content[0].(*mcp.TextContent); ok {
					text = tc.Text
				}
			}
			if !r.IsError || !strings.Contains(text, "appears twice") {
				t.Errorf("%s, arguments %s: %+v (%q); want a refusal naming the duplicate key", name, args, r, text)
			}
		}
	}
	if n := h.up.count("read_note"); n != 0 {
		t.Fatalf("the upstream received %d calls with a duplicate key; want none", n)
	}
	// The same call without the duplicate goes through.
	fast.send(`{"jsonrpc":"2.0","id":"ok","method":"tools/call","params":{"name":"read_note","arguments":{"id":"public","opts":{"mode":"a"}}}}`)
	if r := resultOf(t, fast.recv()); r.IsError {
		t.Fatalf("a call without a duplicate key: %+v; want it forwarded", r)
	}
	if n := h.up.count("read_note"); n != 1 {
		t.Fatalf("the upstream received %d calls; want 1", n)
	}
}
