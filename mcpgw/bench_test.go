package mcpgw_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/mcpgw"
	"github.com/portcullis/portcullis/memstore"
	"github.com/portcullis/portcullis/policy"
	"github.com/portcullis/portcullis/sqlite"
)

// pipeTransports connects two ends over OS pipes with newline-delimited
// JSON, as a stdio server and its client are connected.
func pipeTransports(tb testing.TB) (client, server mcp.Transport) {
	tb.Helper()
	cr, sw, err := os.Pipe()
	if err != nil {
		tb.Fatal(err)
	}
	sr, cw, err := os.Pipe()
	if err != nil {
		tb.Fatal(err)
	}
	return &mcp.IOTransport{Reader: cr, Writer: cw}, &mcp.IOTransport{Reader: sr, Writer: sw}
}

func percentile(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(float64(len(s)-1)*p)]
}

// BenchmarkStdioAddedLatency measures, in one run, an allowed tools/call
// to a Go upstream made directly and made through the gateway (both hops
// over OS pipes, as the stdio wrapper runs: Gateway.ServeStdio to the
// client, the upstream's stdio framed by the gateway), and reports the p50 of each and
// the gateway's added p50. With the SQLite store the allowed call waits
// for its audit row to be durable before it is forwarded: on the disk (an
// fsync; sqlite, audit.sync: full) or in the write-ahead log
// (sqlite-process, audit.sync: process).
func BenchmarkStdioAddedLatency(b *testing.B) {
	// As `portcullis mcp` runs (its tuneGC), unless $GOGC says otherwise.
	if os.Getenv("GOGC") == "" {
		defer debug.SetGCPercent(debug.SetGCPercent(400))
	}
	for _, store := range []string{"memstore", "sqlite", "sqlite-process"} {
		b.Run(store, func(b *testing.B) {
			ctx := context.Background()
			var st portcullis.Store
			if store != "memstore" {
				sync := sqlite.SyncFull
				if store == "sqlite-process" {
					sync = sqlite.SyncProcess
				}
				s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "p.db"), sqlite.Options{Sync: sync})
				if err != nil {
					b.Fatal(err)
				}
				st = s
			} else {
				st = memstore.New(portcullis.SystemClock{})
			}
			defer st.Close()
			pol, _, err := policy.Parse("p.yaml", []byte(testPolicy))
			if err != nil {
				b.Fatal(err)
			}
			g, err := gate.New(pol, gate.WithStore(st))
			if err != nil {
				b.Fatal(err)
			}
			// The protocol version of the TypeScript SDK's servers and
			// clients (Claude Code's), on both sides.
			up := newNotes(fastVersion)
			opts := &mcp.ClientSessionOptions{ProtocolVersion: fastVersion}
			// Direct: the client talks to the upstream itself.
			dc, ds := pipeTransports(b)
			if _, err := up.server.Connect(ctx, ds, nil); err != nil {
				b.Fatal(err)
			}
			direct, err := mcp.NewClient(&mcp.Implementation{Name: "direct"}, nil).Connect(ctx, dc, opts)
			if err != nil {
				b.Fatal(err)
			}
			defer direct.Close()
			// Gateway: client → gateway → upstream, each hop over pipes, as
			// `portcullis mcp` runs: the client served by ServeStdio, the
			// upstream's stdio framed by the gateway.
			gw, err := mcpgw.New(ctx, mcpgw.Config{Gate: g, Store: st, Upstreams: []mcpgw.Upstream{{Name: "notes", TrustAnnotations: true, Transport: func(ctx context.Context) (mcp.Transport, error) {
				cr, sw, err := os.Pipe()
				if err != nil {
					return nil, err
				}
				sr, cw, err := os.Pipe()
				if err != nil {
					return nil, err
				}
				if _, err := up.server.Connect(context.Background(), &mcp.IOTransport{Reader: sr, Writer: sw}, nil); err != nil {
					return nil, err
				}
				return mcpgw.FramedTransport("notes", cr, cw), nil
			}}}, Agent: "bench"})
			if err != nil {
				b.Fatal(err)
			}
			defer gw.Close()
			cr, sw, err := os.Pipe()
			if err != nil {
				b.Fatal(err)
			}
			sr, cw, err := os.Pipe()
			if err != nil {
				b.Fatal(err)
			}
			served := make(chan error, 1)
			go func() { served <- gw.ServeStdio(ctx, sr, sw) }()
			via, err := mcp.NewClient(&mcp.Implementation{Name: "via"}, nil).Connect(ctx, &mcp.IOTransport{Reader: cr, Writer: cw}, opts)
			if err != nil {
				b.Fatal(err)
			}
			defer func() { via.Close(); <-served }()

			params := &mcp.CallToolParams{Name: "read_note", Arguments: map[string]any{"id": 1}}
			one := func(cs *mcp.ClientSession) time.Duration {
				start := time.Now()
				res, err := cs.CallTool(ctx, params)
				if err != nil || res.IsError {
					b.Fatalf("call: %v %+v", err, res)
				}
				return time.Since(start)
			}
			one(direct)
			one(via)
			var dd, vd []time.Duration
			b.ResetTimer()
			for b.Loop() {
				dd = append(dd, one(direct))
				vd = append(vd, one(via))
			}
			b.StopTimer()
			pd, pv := percentile(dd, 0.5), percentile(vd, 0.5)
			b.ReportMetric(float64(pd.Microseconds()), "direct-p50-µs")
			b.ReportMetric(float64(pv.Microseconds()), "gateway-p50-µs")
			b.ReportMetric(float64((pv - pd).Microseconds()), "added-p50-µs")
			b.ReportMetric(float64((percentile(vd, 0.99) - percentile(dd, 0.99)).Microseconds()), "added-p99-µs")
		})
	}
}
