package replay_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/portcullis/portcullis/replay"
	"github.com/portcullis/portcullis/replay/replaytest"
)

// BenchmarkRun replays a long audit log in a SQLite store through the
// library, without the command's output: the rows of replaytest.Record,
// copied until the log has PORTCULLIS_BENCH_REPLAY_ROWS rows (default
// 100,000). The new policy raises the autonomy budget, so one row in
// twenty changes. It reports rows per second.
func BenchmarkRun(b *testing.B) {
	rows := int64(100_000)
	if s := os.Getenv("PORTCULLIS_BENCH_REPLAY_ROWS"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 {
			b.Fatalf("PORTCULLIS_BENCH_REPLAY_ROWS=%q: want a positive number", s)
		}
		rows = n
	}
	recorded, _ := replaytest.Record(b)
	long := b.TempDir()
	replaytest.Grow(b, filepath.Join(recorded, "portcullis.db"), filepath.Join(long, "portcullis.db"), rows)
	st := openLog(b, long)
	pol := parse(b, "new.yaml", strings.Replace(replaytest.Policy, "maxAutonomousSteps: 3", "maxAutonomousSteps: 5", 1))
	r, err := replay.New(pol, replay.Options{OnChange: func(*replay.Change) error { return nil }})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		rep, err := r.Run(context.Background(), st)
		if err != nil || rep.Summary.Changed == 0 {
			b.Fatalf("Run = %d changes, %v; want changes", rep.Summary.Changed, err)
		}
	}
	b.ReportMetric(float64(rows)*float64(b.N)/time.Since(start).Seconds(), "rows/s")
}
