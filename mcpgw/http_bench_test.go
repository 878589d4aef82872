package mcpgw_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/mcpgw"
	"github.com/portcullis/portcullis/memstore"
	"github.com/portcullis/portcullis/policy"
)

type tokenHeader struct{ base http.RoundTripper }

func (t tokenHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer agent-token")
	return t.base.RoundTrip(r)
}

// httpGateway starts the HTTP gateway over a trivial in-process upstream
// on a loopback listener.
func httpGateway(tb testing.TB) (*httptest.Server, *mcpgw.Gateway) {
	tb.Helper()
	return httpGatewayOver(tb, benchNotes().upstream("notes"))
}

// benchNotes is the notes server every HTTP benchmark serves, the
// baseline's included: one that speaks the protocols before 2026-07-28,
// as the npm servers of the day do (a 2026-07-28 session checks a _meta
// triple on every request, which the baseline's client does not send).
func benchNotes() *notes {
	return newNotes(fastVersion, "2025-06-18")
}

// framedNotes is the notes server as a command upstream is reached: over
// a pair of the system's pipes, as a command's stdio is, framed by the
// gateway's own reader (no process).
func framedNotes() mcpgw.Upstream {
	up := benchNotes()
	return mcpgw.Upstream{Name: "notes", TrustAnnotations: true, Transport: func(ctx context.Context) (mcp.Transport, error) {
		cr, sw, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		sr, cw, err := os.Pipe()
		if err != nil {
			cr.Close()
			sw.Close()
			return nil, err
		}
		ss, err := up.server.Connect(context.Background(), &mcp.IOTransport{Reader: sr, Writer: sw}, nil)
		if err != nil {
			return nil, errors.Join(err, cr.Close(), sw.Close(), sr.Close(), cw.Close())
		}
		go func() {
			_ = ss.Wait()
			sr.Close()
			sw.Close()
		}()
		return mcpgw.FramedTransport("notes", cr, cw), nil
	}}
}

// httpGatewayOver starts the HTTP gateway over upstream on a loopback
// listener.
func httpGatewayOver(tb testing.TB, upstream mcpgw.Upstream) (*httptest.Server, *mcpgw.Gateway) {
	tb.Helper()
	pol, _, err := policy.Parse("p.yaml", []byte(testPolicy))
	if err != nil {
		tb.Fatal(err)
	}
	st := memstore.New(portcullis.SystemClock{})
	g, err := gate.New(pol, gate.WithStore(st))
	if err != nil {
		tb.Fatal(err)
	}
	gw, err := mcpgw.New(context.Background(), mcpgw.Config{Gate: g, Store: st, Upstreams: []mcpgw.Upstream{upstream}})
	if err != nil {
		tb.Fatal(err)
	}
	h, err := gw.Handler(mcpgw.HTTPOptions{AgentOf: func(tok string) (string, bool) { return "bot", tok == "agent-token" }})
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(h)
	tb.Cleanup(func() { srv.Close(); gw.Close() })
	return srv, gw
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// BenchmarkHTTPGateway opens 1,000 client sessions over Streamable HTTP
// and drives allowed tools/call requests through all of them at once,
// reporting calls per second and the heap the sessions hold.
func BenchmarkHTTPGateway(b *testing.B) {
	// As the serve command runs it (see tuneGC there).
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	idle := heapInUse()
	srv, _ := httpGateway(b)
	const sessions = 1000
	client := &http.Client{Transport: tokenHeader{&http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256}}}
	ctx := context.Background()
	css := connectAll(b, sessions, func() (*mcp.ClientSession, error) {
		return mcp.NewClient(&mcp.Implementation{Name: "load"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: client, DisableStandaloneSSE: true}, nil)
	})
	if b.Failed() {
		return
	}
	withSessions := heapInUse()
	b.Cleanup(func() {
		for _, cs := range css {
			cs.Close()
		}
	})
	params := &mcp.CallToolParams{Name: "read_note", Arguments: map[string]any{"id": 1}}
	callAll(b, func(i int) error {
		res, err := css[i%sessions].CallTool(ctx, params)
		if err == nil && res.IsError {
			err = fmt.Errorf("error result: %+v", res.Content)
		}
		return err
	})
	b.ReportMetric(float64(withSessions-min(idle, withSessions))/(1<<20), "heap-with-1000-sessions-MB")
}

// connectAll opens n sessions with connect, 32 at a time; a failure is
// reported on b.
func connectAll[S any](b *testing.B, n int, connect func() (S, error)) []S {
	out := make([]S, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := range out {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			s, err := connect()
			if err != nil {
				b.Error(err)
				return
			}
			out[i] = s
		})
	}
	wg.Wait()
	return out
}

// rawLoad drives allowed tools/call requests through sessions sessions
// of the Streamable HTTP endpoint at url with the lightweight hand-written
// client (rawSession), 128 callers at once, and reports calls per second
// (and the CPU per call of each watched process).
func rawLoad(b *testing.B, url string, sessions int, watch ...watched) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256}}
	ss := connectAll(b, sessions, func() (*rawSession, error) { return rawConnect(client, url) })
	if b.Failed() {
		return
	}
	callAll(b, func(i int) error {
		isErr, err := ss[i%sessions].callRaw("read_note", `{"id":1}`)
		if err == nil && isErr {
			err = errors.New("error result")
		}
		return err
	}, watch...)
}

// callAll makes b.N calls with call (its argument counts up), 128 callers
// at once on 2 cores, and reports calls per second, the CPU per call, and
// that of each watched process on its own.
func callAll(b *testing.B, call func(i int) error, watch ...watched) {
	var next atomic.Int64
	b.SetParallelism(64)
	b.ResetTimer()
	start, cpu := time.Now(), cpuTime(b)
	before := make([]time.Duration, len(watch))
	for i, w := range watch {
		before[i] = processCPU(w.pid)
	}
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := call(int(next.Add(1))); err != nil {
				b.Errorf("call: %v", err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
	// The CPU spent per call by the process and the processes it started
	// (load, server, proxy and upstream together): on a machine shared
	// with other work, the rate follows the share of the cores the
	// processes get; this does not.
	b.ReportMetric(float64(cpuTime(b)-cpu)/float64(time.Microsecond)/float64(b.N), "cpu-µs/call")
	for i, w := range watch {
		b.ReportMetric(float64(processCPU(w.pid)-before[i])/float64(time.Microsecond)/float64(b.N), w.name+"-cpu-µs/call")
	}
}

// cpuTime is the CPU time (user and system) the process and its live
// descendants (command upstreams, mcp-proxy) have used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano()+ru.Stime.Nano()) + descendantsCPU()
}

// BenchmarkHTTPGatewayRaw is BenchmarkHTTPGateway with the lightweight
// client in place of the SDK's, so less of the machine goes to the load.
func BenchmarkHTTPGatewayRaw(b *testing.B) {
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	srv, _ := httpGateway(b)
	rawLoad(b, srv.URL, 1000)
}

// BenchmarkHTTPGatewayFramed is BenchmarkHTTPGatewayRaw with the upstream
// reached as a command upstream is, over a pipe pair the gateway frames
// itself: allowed calls go to it as the gateway's own frames.
func BenchmarkHTTPGatewayFramed(b *testing.B) {
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	srv, _ := httpGatewayOver(b, framedNotes())
	rawLoad(b, srv.URL, 1000)
}

// BenchmarkSDKStreamableBaseline is the ceiling the gateway is measured
// against: the same upstream served directly by the SDK's own Streamable
// HTTP handler, no gateway in between, under the same load. The gateway
// does all of this work for every call and then a second MCP hop (to its
// upstream) and a decision on top.
func BenchmarkSDKStreamableBaseline(b *testing.B) {
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	up := benchNotes()
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up.server }, nil))
	defer srv.Close()
	rawLoad(b, srv.URL, 1000)
}
