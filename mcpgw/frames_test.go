package mcpgw_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis/portcullis/mcpgw"
)

// e2eDir is the directory of the npm packages the end-to-end tests use;
// they run when PORTCULLIS_TEST_E2E=1 (CI sets it and fails if they skip).
func e2eDir(t *testing.T) string {
	t.Helper()
	if os.Getenv("PORTCULLIS_TEST_E2E") != "1" {
		t.Skip("PORTCULLIS_TEST_E2E is not 1: the end-to-end tests need Node and `npm ci --prefix e2e`")
	}
	dir, err := filepath.Abs("../e2e")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		t.Fatalf("PORTCULLIS_TEST_E2E=1 but the npm packages are missing: run `npm ci --prefix e2e` (%v)", err)
	}
	return dir
}

// frameEvents is an Observer that also counts the skipped frames.
type frameEvents struct {
	events
	mu      sync.Mutex
	skipped map[string]int
}

func (o *frameEvents) UpstreamFrameSkipped(upstream, reason string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.skipped == nil {
		o.skipped = map[string]int{}
	}
	o.skipped[upstream+" "+reason]++
}

func (o *frameEvents) count(key string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.skipped[key]
}

func (o *frameEvents) restarts() int {
	n := 0
	for _, l := range o.snapshot() {
		if strings.HasPrefix(l, "restart ") {
			n++
		}
	}
	return n
}

// A real TypeScript-SDK server that prints log lines on stdout, between
// and during its answers, keeps its session: the gateway skips, logs and
// counts each such line, and every call in flight meanwhile is answered.
// A message over the frame limit fails its own call and no other.
func TestStrayStdoutLinesKeepTheUpstreamSession(t *testing.T) {
	e2e := e2eDir(t)
	obs := &frameEvents{}
	const limit = 64 << 10
	h := newHarness(t, testPolicy, func(c *mcpgw.Config) {
		c.Upstreams = []mcpgw.Upstream{{Name: "noisy", Command: []string{"node", filepath.Join(e2e, "noisy-server.mjs")}, TrustAnnotations: true, MaxFrame: limit}}
		c.Observer = obs
		c.CallTimeout = 30 * time.Second
	})
	cs := h.connect(nil)
	ctx := context.Background()

	// A slow call is in flight while another makes the server print.
	type answer struct {
		res *mcp.CallToolResult
		err error
	}
	slow := make(chan answer, 1)
	go func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"text": "slow one", "ms": 1500}})
		slow <- answer{res, err}
	}()
	for i := range 3 {
		res := call(t, cs, "noisy", map[string]any{"text": "loud"})
		if res.IsError || text(res) != "loud" {
			t.Fatalf("noisy call %d = %q (isError %v); want its answer", i, text(res), res.IsError)
		}
	}
	a := <-slow
	if a.err != nil || a.res.IsError || text(a.res) != "slow one" {
		t.Fatalf("the call in flight while the server printed = %v %+v; want its answer", a.err, a.res)
	}
	// The start-up line and two plain lines per noisy call; one JSON log
	// record per noisy call. Blank lines are not counted.
	if n := obs.count("noisy " + mcpgw.FrameNotJSON); n != 7 {
		t.Errorf("lines counted %s = %d; want 7", mcpgw.FrameNotJSON, n)
	}
	if n := obs.count("noisy " + mcpgw.FrameNotJSONRPC); n != 3 {
		t.Errorf("lines counted %s = %d; want 3", mcpgw.FrameNotJSONRPC, n)
	}
	h.logs.waitFor(t, "not a JSON-RPC message")

	// Over the limit: that call fails, with the reason, and only it.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "big", Arguments: map[string]any{"bytes": 4 * limit}})
	switch {
	case err != nil:
		if !strings.Contains(err.Error(), "limit") {
			t.Errorf("oversized answer's error = %v; want it to name the limit", err)
		}
	case !res.IsError:
		t.Fatalf("an answer over the frame limit came back as success (%d bytes)", len(text(res)))
	}
	if n := obs.count("noisy " + mcpgw.FrameTooLarge); n != 1 {
		t.Errorf("frames counted %s = %d; want 1", mcpgw.FrameTooLarge, n)
	}
	if res := call(t, cs, "big", map[string]any{"bytes": limit / 2}); res.IsError || len(text(res)) != limit/2 {
		t.Fatalf("an answer under the limit = %d bytes (isError %v); want %d", len(text(res)), res.IsError, limit/2)
	}
	if res := call(t, cs, "echo", map[string]any{"text": "still here"}); res.IsError || text(res) != "still here" {
		t.Fatalf("echo after the oversized answer = %q", text(res))
	}
	if n := obs.restarts(); n != 0 {
		t.Fatalf("the upstream was restarted %d times; want its session kept: %v", n, obs.snapshot())
	}
}
