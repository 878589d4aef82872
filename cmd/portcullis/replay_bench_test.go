package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/sqlite"
)

// BenchmarkReplay replays a long audit log end to end (`policy replay
// --json` over a SQLite store): the rows of replayLog, written by a real
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
	recorded, _ := replayLog(b)
	long := os.Getenv("PORTCULLIS_BENCH_REPLAY_KEEP")
	if long == "" {
		long = b.TempDir()
	}
	copyLog(b, filepath.Join(recorded, "portcullis.db"), filepath.Join(long, "portcullis.db"), rows)
	newPolicy := filepath.Join(b.TempDir(), "new.yaml")
	if os.Getenv("PORTCULLIS_BENCH_REPLAY_KEEP") != "" {
		newPolicy = filepath.Join(long, "new.yaml") // kept beside the log
	}
	if err := os.WriteFile(newPolicy, []byte(strings.Replace(replayPolicy, "maxAutonomousSteps: 3", "maxAutonomousSteps: 5", 1)), 0o600); err != nil {
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

// copyLog appends to the log at dst the events of the log at src, in a
// loop, until it has n rows; each copy of a decision gets its own id.
func copyLog(b *testing.B, src, dst string, n int64) {
	b.Helper()
	ctx := context.Background()
	from, err := sqlite.Open(ctx, src, sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	var evs []portcullis.AuditEvent
	err = from.ScanAudit(ctx, 0, func(r portcullis.AuditRecord) (bool, error) {
		ev, err := r.Event()
		evs = append(evs, ev)
		return true, err
	})
	if cerr := from.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		b.Fatal(err)
	}
	to, err := sqlite.Open(ctx, dst, sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer to.Close()
	last, err := to.QueryAudit(ctx, portcullis.AuditQuery{Newest: true, Limit: 1})
	if err != nil {
		b.Fatal(err)
	}
	written := int64(0)
	if len(last) > 0 {
		written = last[0].Seq
	}
	batch := make([]portcullis.AuditEvent, 0, 1000)
	for written < n {
		batch = batch[:0]
		for len(batch) < cap(batch) && written+int64(len(batch)) < n {
			i := written + int64(len(batch))
			ev := evs[i%int64(len(evs))]
			if ev.DecisionID != "" {
				ev.DecisionID = fmt.Sprintf("%s-%d", ev.DecisionID, i)
			}
			batch = append(batch, ev)
		}
		if _, err := to.AppendAudit(ctx, batch...); err != nil {
			b.Fatal(err)
		}
		written += int64(len(batch))
	}
}
