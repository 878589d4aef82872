package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/portcullis/portcullis/loadgen"
	"github.com/portcullis/portcullis/sqlite"
)

// TestBenchShortSoak is the short version of the soak run in
// docs/OPERATIONS.md: `portcullis bench` drives a real `portcullis serve`
// on SQLite through the decision API and the MCP endpoint for a few
// seconds, approves the writes as a person, and finds every decision it was
// answered in the audit log, whose chain verifies.
func TestBenchShortSoak(t *testing.T) {
	g := newLoadGateway(t, "", loadPolicy)
	g.start(t, "127.0.0.1:0")
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"bench",
		"--gateway", g.url, "--token-file", filepath.Join(g.dir, "bot.token"),
		"--state", filepath.Join(g.dir, "state"),
		"--via", "both", "--sessions", "6", "--duration", "4s",
		"--shell", "run_shell", "--gateway-pid", strconv.Itoa(g.proc.Process.Pid),
		"--json"}, nil, &stdout, &stderr)
	if err != nil {
		t.Fatalf("bench: %v\n%s\ngateway log:\n%s", err, stderr.String(), g.log())
	}
	var rep loadgen.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("bench --json wrote %q: %v", stdout.String(), err)
	}
	if rep.Answered == 0 || rep.Audit == nil {
		t.Fatalf("bench report = %+v; want answered calls and an audit check", rep)
	}
	if !rep.Audit.Complete() || rep.Audit.Found == 0 || rep.Audit.Unrecorded != 0 {
		t.Fatalf("audit check = %+v; want every answered decision found and the chain verified", rep.Audit)
	}
	byKind := map[string]loadgen.Stats{}
	for _, s := range rep.Rows {
		byKind[string(s.Via)+"/"+s.Kind] = s
	}
	for _, k := range []string{"api/read", "mcp/read", "/read", "/write", "/deny", "/shell"} {
		if byKind[k].Calls == 0 {
			t.Errorf("no %s calls in the report: %+v", k, rep.Rows)
		}
	}
	if s := byKind["/deny"]; s.Allow != 0 || s.Deny != s.Calls-s.Failed {
		t.Errorf("deny calls = %+v; want every answered one denied", s)
	}
	if s := byKind["/read"]; s.Allow != s.Calls-s.Failed {
		t.Errorf("read calls = %+v; want every answered one allowed", s)
	}
	if s := byKind["/write"]; s.Allow == 0 || rep.Approvals == 0 {
		t.Errorf("write calls = %+v, %d approvals; want writes allowed once a person approved their session", s, rep.Approvals)
	}
	if len(rep.Timeline) == 0 || rep.Timeline[len(rep.Timeline)-1].RSSBytes == 0 {
		t.Errorf("timeline = %+v; want progress with the gateway's memory", rep.Timeline)
	}
	calls := g.checkNothingRefusedForwarded(t)
	if len(calls) == 0 {
		t.Error("the upstream received no call")
	}
	if stderr.Len() == 0 {
		t.Error("bench printed no progress on stderr")
	}

	// The table, for a count of calls; then the same against a state
	// directory that holds no store: an error, not an empty store.
	base := []string{"bench", "--gateway", g.url, "--token-file", filepath.Join(g.dir, "bot.token"),
		"--human-token-file", filepath.Join(g.dir, "state", "admin.token"), "--count", "40", "--sessions", "4", "--progress", "0"}
	stdout.Reset()
	if err := run(context.Background(), append(base, "--state", filepath.Join(g.dir, "state")), nil, &stdout, &stderr); err != nil {
		t.Fatalf("bench --count 40: %v", err)
	}
	for _, want := range []string{"40 calls in", "p99.9", "audit: complete", "the chain verifies"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("bench's table lacks %q:\n%s", want, stdout.String())
		}
	}
	empty := t.TempDir()
	err = run(context.Background(), append(base, "--state", empty), nil, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "--audit=false") {
		t.Errorf("bench with a state directory holding no store = %v; want an error that says what to pass", err)
	}
	if _, serr := os.Stat(filepath.Join(empty, "portcullis.db")); serr == nil {
		t.Error("bench created an empty store to check the audit against")
	}
}

func TestBenchFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"bad via", []string{"--via", "smoke"}},
		{"bad mix", []string{"--mix", "read=x"}},
		{"unknown kind", []string{"--mix", "fly=3"}},
		{"no token", []string{"--token-file", filepath.Join(t.TempDir(), "none")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("PORTCULLIS_AGENT_TOKEN", "")
			var stderr bytes.Buffer
			err := run(context.Background(), append([]string{"bench"}, tc.args...), nil, &bytes.Buffer{}, &stderr)
			if exitCode(err, &stderr) != 2 {
				t.Fatalf("bench %v = %v; want exit 2", tc.args, err)
			}
		})
	}
}

// BenchmarkGatewaySoak is the soak run of docs/OPERATIONS.md: a real
// `portcullis serve` on SQLite under a steady load through the decision API
// and MCP for PORTCULLIS_SOAK_DURATION (default 2m) at
// PORTCULLIS_SOAK_RATE calls per second (default 200), printing latency and
// the gateway's memory every PORTCULLIS_SOAK_EVERY (default 10s), then
// checking the audit log. Run it with -benchtime 1x.
func BenchmarkGatewaySoak(b *testing.B) {
	duration, rate, every := 2*time.Minute, 200.0, 10*time.Second
	if v := os.Getenv("PORTCULLIS_SOAK_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatal(err)
		}
		duration = d
	}
	if v := os.Getenv("PORTCULLIS_SOAK_RATE"); v != "" {
		r, err := strconv.ParseFloat(v, 64)
		if err != nil {
			b.Fatal(err)
		}
		rate = r
	}
	if v := os.Getenv("PORTCULLIS_SOAK_EVERY"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatal(err)
		}
		every = d
	}
	for b.Loop() {
		b.StopTimer()
		g := newLoadGateway(b, "", loadPolicy)
		g.start(b, "127.0.0.1:0")
		cfg := g.loadConfig(b)
		cfg.Sessions, cfg.Duration, cfg.Rate, cfg.ProgressEvery = 16, duration, rate, every
		pid := g.proc.Process.Pid
		cfg.Sample = func() (int64, bool) { return loadgen.ProcessRSS(pid) }
		fmt.Printf("%8s %8s %8s %9s %9s %9s\n", "elapsed", "calls", "calls/s", "p50", "p99", "RSS")
		cfg.Progress = func(s loadgen.Snapshot) {
			fmt.Printf("%7.0fs %8d %8.0f %7.2fms %7.2fms %6.1f MB\n", s.Elapsed.Seconds(), s.Answered, s.IntervalRate, ms(s.IntervalP50), ms(s.IntervalP99), float64(s.RSSBytes)/(1<<20))
		}
		rep, err := loadgen.Run(context.Background(), cfg)
		if err != nil {
			b.Fatal(err)
		}
		g.stop()
		st, err := sqlite.Open(context.Background(), filepath.Join(g.dir, "state", "portcullis.db"), sqlite.Options{})
		if err != nil {
			b.Fatal(err)
		}
		c, err := rep.CheckAudit(context.Background(), st)
		st.Close()
		if err != nil {
			b.Fatal(err)
		}
		if err := rep.WriteTable(os.Stdout); err != nil {
			b.Fatal(err)
		}
		if !c.Complete() {
			b.Fatalf("audit after the soak = %+v", c)
		}
		b.ReportMetric(rep.Throughput, "calls/s")
		b.ReportMetric(ms(rep.Overall.P50), "p50-ms")
		b.ReportMetric(ms(rep.Overall.P99), "p99-ms")
		b.ReportMetric(ms(rep.Overall.P999), "p999-ms")
		if n := len(rep.Timeline); n > 1 {
			b.ReportMetric(float64(rep.Timeline[0].RSSBytes)/(1<<20), "RSS-first-MB")
			b.ReportMetric(float64(rep.Timeline[n-1].RSSBytes)/(1<<20), "RSS-last-MB")
		}
		b.StartTimer()
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
