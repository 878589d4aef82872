package mcpgw

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// The framing of an upstream's stdout, line by line: what is delivered,
// what fails its own call, what is skipped and counted.
func TestFrameConnReadsWhatItCanAndSkipsTheRest(t *testing.T) {
	big := strings.Repeat("x", 300)
	input := strings.Join([]string{
		`server starting on stdio`,
		``,
		`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`,
		`{"level":"info","id":2,"msg":"a JSON log record with an id"}`,
		`{this is not json`,
		`{"jsonrpc":"1.0","id":3,"result":{}}`,
		`{"result":{"text":"` + big + `"},"jsonrpc":"2.0","id":4}`,
		`{"jsonrpc":"2.0","method":"sampling/createMessage","params":{"text":"` + big + `"},"id":"up-9"}`,
		`[{"jsonrpc":"2.0","id":5,"result":{}},{"jsonrpc":"2.0","method":"notifications/progress","params":{}}]`,
		`{"jsonrpc":"2.0","id":6,"result":{}}`, // the last line, without its newline
	}, "\n")
	var (
		mu      sync.Mutex
		skipped []string
	)
	upstreamIn := &lockedBuffer{}
	c := newFrameConn(strings.NewReader(input), upstreamIn, "u", 200, nil, func(reason string) {
		mu.Lock()
		skipped = append(skipped, reason)
		mu.Unlock()
	})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got []string
	for {
		msg, err := c.Read(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("Read: %v (after %v)", err, got)
		}
		switch m := msg.(type) {
		case *jsonrpc.Response:
			s := "response " + string(mustJSON(t, m.ID.Raw()))
			if m.Error != nil {
				s += " error"
			}
			got = append(got, s)
		case *jsonrpc.Request:
			got = append(got, "request "+m.Method)
		}
	}
	want := []string{
		"response 1",
		"response 3 error", // claims JSON-RPC, unreadable: its call fails
		"response 4 error", // over the limit, id last: its call fails
		"response 5",
		"request notifications/progress",
		"response 6",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("delivered (-want +got):\n%s", diff)
	}
	wantSkipped := []string{FrameNotJSON, FrameNotJSONRPC, FrameNotJSON, FrameBadResponse, FrameTooLarge, FrameTooLarge}
	if diff := cmp.Diff(wantSkipped, skipped); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}
	// The upstream's oversized request is answered with an error, so it
	// does not wait for ever.
	var answer struct {
		ID    string          `json:"id"`
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(upstreamIn.String())), &answer); err != nil || answer.ID != "up-9" || answer.Error == nil {
		t.Errorf("written to the upstream = %q; want an error answering up-9", upstreamIn.String())
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A frame with a line break in it is refused before anything is written:
// the upstream would read more messages than the gateway meant.
func TestFrameConnWritesOneLineFrames(t *testing.T) {
	upstreamIn := &lockedBuffer{}
	c := newFrameConn(strings.NewReader(""), upstreamIn, "u", 1<<20, nil, nil)
	defer c.Close()
	for _, f := range []string{"{\"a\":\n1}", "{\"a\":\r1}"} {
		if err := c.writeLine([]byte(f)); err == nil {
			t.Errorf("writeLine(%q) = nil; want it refused", f)
		}
	}
	if err := c.writeLine([]byte(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	if got := upstreamIn.String(); got != "{\"a\":1}\n" {
		t.Errorf("the upstream read %q; want the one frame", got)
	}
}

// An upstream's raw result goes on to the client on one line: a \r
// between its tokens (a line end to an SSE reader and to some stdio
// readers) would let the upstream write messages of its own to the client.
func TestRawResultIsOneLine(t *testing.T) {
	raw, _, _, err := rawResult(rawReply{scan: rpcLine{result: []byte("{\"content\":[]\r,\"x\":\r{\"jsonrpc\":\"2.0\",\"method\":\"sampling/createMessage\"}}")}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(string(raw), "\r\n") {
		t.Errorf("raw result = %q; want one line", raw)
	}
	if _, _, _, err := rawResult(rawReply{scan: rpcLine{result: []byte("{\"text\":\"a\rb\"}")}}); err == nil {
		t.Error("a result with a raw \\r inside a string was passed on; want it refused")
	}
}
