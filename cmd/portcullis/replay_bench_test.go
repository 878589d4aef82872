package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/portcullis/portcullis/replay/replaytest"
)

// BenchmarkReplay replays a long audit log end to end (`policy replay
// --json` over a SQLite store): the rows of replaytest.Record, written by a real
// gate, copied until the log has PORTCULLIS_BENCH_REPLAY_ROWS rows (default
// 100,000). It reports rows per second. With PORTCULLIS_BENCH_REPLAY_KEEP=DIR
// the long log and the new policy (new.yaml) are written in DIR and kept,
// to replay them with the command under /usr/bin/time. The new policy
// raises the autonomy budget, so one row in twenty changes.
func BenchmarkReplay(b *testing.B) {
	rows := int64(100_000)
	if s := os.Getenv("PORTCULLIS_BENCH_REPLAY_ROWS"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 {
			b.Fatalf("PORTCULLIS_BENCH_REPLAY_ROWS=%q: want a positive number", s)
		}
		rows = n
	}
	recorded, _ := replaytest.Record(b)
	long := os.Getenv("PORTCULLIS_BENCH_REPLAY_KEEP")
	if long == "" {
		long = b.TempDir()
	}
	replaytest.Grow(b, filepath.Join(recorded, "portcullis.db"), filepath.Join(long, "portcullis.db"), rows)
	newPolicy := filepath.Join(b.TempDir(), "new.yaml")
	if os.Getenv("PORTCULLIS_BENCH_REPLAY_KEEP") != "" {
		newPolicy = filepath.Join(long, "new.yaml") // kept beside the log
	}
	if err := os.WriteFile(newPolicy, []byte(strings.Replace(replaytest.Policy, "maxAutonomousSteps: 3", "maxAutonomousSteps: 5", 1)), 0o600); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		var errb strings.Builder
		err := run(context.Background(), []string{"policy", "replay", "--policy", newPolicy, "--state", long, "--json", "--progress", "0"},
			strings.NewReader(""), io.Discard, &errb)
		if code := exitCode(err, &errb); code != 1 {
			b.Fatalf("replay exit %d; want 1 (changes): %s", code, errb.String())
		}
	}
	b.ReportMetric(float64(rows)*float64(b.N)/time.Since(start).Seconds(), "rows/s")
}
