package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/httpapi"
	"github.com/portcullis/portcullis/memstore"
	"github.com/portcullis/portcullis/policy"
	"github.com/portcullis/portcullis/sqlite"
)

// benchRequest is an allowed call: the whole pipeline runs, and its audit
// row is written before the answer.
var benchRequest = []byte(`{"tool": "list_elements", "session": "s1", "args": {"filter": "persona", "page": 2}}`)

func benchGate(b *testing.B, store string) (*gate.Gate, portcullis.Store) {
	b.Helper()
	var st portcullis.Store
	switch store {
	case "memstore":
		st = memstore.New(nil)
	case "sqlite":
		s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "portcullis.db"), sqlite.Options{})
		if err != nil {
			b.Fatal(err)
		}
		st = s
	}
	b.Cleanup(func() { st.Close() })
	pol, _, err := policy.Parse("policy.yaml", []byte(testPolicy))
	if err != nil {
		b.Fatal(err)
	}
	g, err := gate.New(pol, gate.WithStore(st))
	if err != nil {
		b.Fatal(err)
	}
	return g, st
}

// benchServer serves the API on 127.0.0.1 and returns a client that keeps
// its connections alive.
func benchServer(b *testing.B, store string) (string, *http.Client) {
	b.Helper()
	g, st := benchGate(b, store)
	h, err := httpapi.New(httpapi.Options{
		Gate: g, Store: st, HumanToken: humanToken,
		AgentToken: agentOf,
	})
	if err != nil {
		b.Fatal(err)
	}
	srv := serveLoopback(b, h)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	b.Cleanup(hc.CloseIdleConnections)
	return srv.URL + "/v1/decide", hc
}

func postDecide(hc *http.Client, url string) error {
	req, err := http.NewRequest("POST", url, bytes.NewReader(benchRequest))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+botToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`"outcome":"allow"`)) {
		return fmt.Errorf("POST /v1/decide = %d %s, %v; want 200 allow", resp.StatusCode, body, err)
	}
	return nil
}

// BenchmarkDecideHTTP is one agent deciding calls one after another over a
// kept-alive loopback connection: the latency an agent sees, with its
// median and 99th percentile.
func BenchmarkDecideHTTP(b *testing.B) {
	for _, store := range []string{"memstore", "sqlite"} {
		b.Run(store, func(b *testing.B) {
			url, hc := benchServer(b, store)
			if err := postDecide(hc, url); err != nil { // opens the connection
				b.Fatal(err)
			}
			lat := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				if err := postDecide(hc, url); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// BenchmarkDecideHTTPParallel is many agents at once (4 per core): the
// throughput of one gateway.
func BenchmarkDecideHTTPParallel(b *testing.B) {
	for _, store := range []string{"memstore", "sqlite"} {
		b.Run(store, func(b *testing.B) {
			url, hc := benchServer(b, store)
			b.SetParallelism(4)
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := postDecide(hc, url); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "decisions/s")
		})
	}
}

// BenchmarkDecideInProcess is the same decision without HTTP, for the
// API's share of BenchmarkDecideHTTP.
func BenchmarkDecideInProcess(b *testing.B) {
	for _, store := range []string{"memstore", "sqlite"} {
		b.Run(store, func(b *testing.B) {
			g, _ := benchGate(b, store)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				c, err := portcullis.DecodeCall(benchRequest)
				if err != nil {
					b.Fatal(err)
				}
				c.Agent = "deploy-bot"
				if d, err := g.Decide(ctx, c); err != nil || !d.Allowed() {
					b.Fatalf("Decide = %s, %v", d.Outcome, err)
				}
			}
		})
	}
}
