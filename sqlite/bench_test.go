package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/sqlite"
	"github.com/portcullis/portcullis/storetest"
)

// BenchmarkAuditAppend appends one row per call from 32 concurrent
// writers, each call durable when it returns (full: on the disk; process:
// in the write-ahead log); the group commit batches them.
func BenchmarkAuditAppend(b *testing.B) {
	for _, mode := range []sqlite.Sync{sqlite.SyncFull, sqlite.SyncProcess} {
		b.Run(string(mode), func(b *testing.B) { benchAuditAppend(b, mode) })
	}
}

func benchAuditAppend(b *testing.B, mode sqlite.Sync) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "state.db"), sqlite.Options{Sync: mode})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := s.Close(); err != nil {
			b.Errorf("Close: %v", err)
		}
	})
	procs := runtime.GOMAXPROCS(0)
	b.SetParallelism((32 + procs - 1) / procs)
	at := time.Now()
	var mu sync.Mutex
	next := 0
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		mu.Lock()
		w := next
		next++
		mu.Unlock()
		session := fmt.Sprintf("s%d", w)
		for i := 0; pb.Next(); i++ {
			if _, err := s.AppendAudit(ctx, event(i, at, session)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkAuditAppendOne appends one row per call from a single writer:
// the latency one call of a lone agent pays before it is forwarded.
func BenchmarkAuditAppendOne(b *testing.B) {
	for _, mode := range []sqlite.Sync{sqlite.SyncFull, sqlite.SyncProcess} {
		b.Run(string(mode), func(b *testing.B) {
			ctx := context.Background()
			s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "state.db"), sqlite.Options{Sync: mode})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() {
				if err := s.Close(); err != nil {
					b.Errorf("Close: %v", err)
				}
			})
			at := time.Now()
			for i := 0; b.Loop(); i++ {
				if _, err := s.AppendAudit(ctx, event(i, at, "s1")); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAuditAppendSpaced is BenchmarkAuditAppendOne with a pause
// between appends, as an agent's calls come: each append is timed alone,
// the pause (longer than the background checkpointer's interval) not;
// p50-µs is the median append.
func BenchmarkAuditAppendSpaced(b *testing.B) {
	for _, mode := range []sqlite.Sync{sqlite.SyncFull, sqlite.SyncProcess} {
		b.Run(string(mode), func(b *testing.B) {
			ctx := context.Background()
			s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "state.db"), sqlite.Options{Sync: mode})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() {
				if err := s.Close(); err != nil {
					b.Errorf("Close: %v", err)
				}
			})
			at := time.Now()
			var took []time.Duration
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				time.Sleep(150 * time.Millisecond)
				b.StartTimer()
				start := time.Now()
				if _, err := s.AppendAudit(ctx, event(i, at, "s1")); err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(start))
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
		})
	}
}

const (
	benchLogRows     = 1_000_000
	benchLogSessions = 1000
)

var benchLog struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// largeLog returns a file holding a 1,000,000-row audit log, rows of 1,000
// sessions interleaved, the last 1,023 of them not yet indexed. It is built
// once per test binary run and removed by TestMain.
func largeLog(b *testing.B) string {
	benchLog.once.Do(func() {
		ctx := context.Background()
		benchLog.dir, benchLog.err = os.MkdirTemp("", "portcullis-sqlite-bench-")
		if benchLog.err != nil {
			return
		}
		benchLog.path = filepath.Join(benchLog.dir, "state.db")
		s, err := sqlite.Open(ctx, benchLog.path, sqlite.Options{})
		if err != nil {
			benchLog.err = err
			return
		}
		start := time.Now()
		at := storetest.NewClock().Now()
		// The last rows, fewer than an index pass takes, are left in the
		// unindexed tail, which every query also reads: the worst case.
		const batch = 5000
		tail := sqlite.AuditIndexBatch - 1
		for i := 0; i < benchLogRows; {
			size := min(batch, benchLogRows-tail-i)
			if i >= benchLogRows-tail {
				size = benchLogRows - i
			}
			evs := make([]portcullis.AuditEvent, size)
			for j := range evs {
				n := i + j
				evs[j] = event(n, at.Add(time.Duration(n)*time.Millisecond), fmt.Sprintf("s%d", n%benchLogSessions))
			}
			if _, err := s.AppendAudit(ctx, evs...); err != nil {
				benchLog.err = err
				s.Close()
				return
			}
			i += size
		}
		benchLog.err = s.Close()
		st, _ := os.Stat(benchLog.path)
		fmt.Fprintf(os.Stderr, "built a %d-row audit log (%d MB) in %v\n", benchLogRows, st.Size()>>20, time.Since(start).Round(time.Millisecond))
	})
	if benchLog.err != nil {
		b.Fatal(benchLog.err)
	}
	return benchLog.path
}

func removeBenchLog() {
	if benchLog.dir != "" {
		os.RemoveAll(benchLog.dir)
	}
}

// BenchmarkAuditLatestSession reads the latest 100 rows of one session in a
// 1,000,000-row log (what the console and `portcullis audit tail` show).
func BenchmarkAuditLatestSession(b *testing.B) {
	path := largeLog(b)
	ctx := context.Background()
	s := openAt(b, path, nil)
	q := portcullis.AuditQuery{Session: "s500", Newest: true, Limit: 100}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		q.Session = fmt.Sprintf("s%d", i%benchLogSessions)
		recs, err := s.QueryAudit(ctx, q)
		if err != nil {
			b.Fatal(err)
		}
		if len(recs) != 100 {
			b.Fatalf("QueryAudit = %d rows; want 100", len(recs))
		}
	}
}

// BenchmarkOpenLarge opens the 1,000,000-row file: the price of the
// quick_check that refuses a damaged file at Open.
func BenchmarkOpenLarge(b *testing.B) {
	path := largeLog(b)
	ctx := context.Background()
	for b.Loop() {
		s, err := sqlite.Open(ctx, path, sqlite.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUseGrant checks a call against the grants of a store holding
// 1,000 session and 1,000 single-use grants in 100 sessions.
func BenchmarkUseGrant(b *testing.B) {
	ctx := context.Background()
	clock := storetest.NewClock()
	s := openAt(b, filepath.Join(b.TempDir(), "state.db"), clock)
	for i := range 1000 {
		session := fmt.Sprintf("s%d", i%100)
		if _, err := s.AddGrant(ctx, portcullis.Grant{Kind: portcullis.GrantSession, Tool: fmt.Sprintf("tool%d", i/100), Session: session, ExpiresAt: clock.Now().Add(time.Hour)}); err != nil {
			b.Fatal(err)
		}
		if _, err := s.AddGrant(ctx, portcullis.Grant{Kind: portcullis.GrantSingle, Tool: "write_file", Session: session, ArgsDigest: fmt.Sprintf("sha256:%d", i)}); err != nil {
			b.Fatal(err)
		}
	}
	run := func(name string, q portcullis.GrantQuery, want bool) {
		b.Run(name, func(b *testing.B) {
			q.Now = clock.Now()
			for b.Loop() {
				_, ok, err := s.UseGrant(ctx, q)
				if err != nil || ok != want {
					b.Fatalf("UseGrant = %v, %v; want %v", ok, err, want)
				}
			}
		})
	}
	run("session", portcullis.GrantQuery{Session: "s42", Tool: "tool3", Level: portcullis.ConfirmSession}, true)
	run("single-peek", portcullis.GrantQuery{Session: "s42", Tool: "write_file", ArgsDigest: "sha256:542", Level: portcullis.ConfirmSingleUse}, true)
	run("miss", portcullis.GrantQuery{Session: "s42", Tool: "delete", Level: portcullis.ConfirmSession}, false)
	b.Run("parallel", func(b *testing.B) {
		q := portcullis.GrantQuery{Session: "s42", Tool: "tool3", Level: portcullis.ConfirmSession, Now: clock.Now()}
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, ok, err := s.UseGrant(ctx, q); err != nil || !ok {
					b.Errorf("UseGrant = %v, %v", ok, err)
					return
				}
			}
		})
	})
	// Consuming a single-use grant is a durable write (one fsync).
	b.Run("single-consume", func(b *testing.B) {
		q := portcullis.GrantQuery{Session: "s1", Tool: "once", ArgsDigest: "sha256:once", Level: portcullis.ConfirmSingleUse, Consume: true, Now: clock.Now()}
		for range b.N {
			b.StopTimer()
			if _, err := s.AddGrant(ctx, portcullis.Grant{Kind: portcullis.GrantSingle, Tool: "once", Session: "s1", ArgsDigest: "sha256:once"}); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if _, ok, err := s.UseGrant(ctx, q); err != nil || !ok {
				b.Fatalf("UseGrant = %v, %v", ok, err)
			}
		}
	})
}

// BenchmarkBlock reads an agent's block as the gate's danger-zone stage
// does for every decision, with a context that can end: with no write
// between reads (quiet); after this process's own audit commit
// (after-commit, not timed), as allowed calls of a gateway alternate them
// under audit.sync: process, the commit making the next read take the
// write-ahead log's read locks again and re-read its pages; each read on a
// goroutine of its own (new-goroutine, whose stack grows to SQLite's depth
// every time, as the stdio fast path's calls once did); and from 16
// goroutines at once (parallel, time per read).
func BenchmarkBlock(b *testing.B) {
	open := func(b *testing.B, ctx context.Context) *sqlite.Store {
		s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "state.db"), sqlite.Options{Sync: sqlite.SyncProcess})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			if err := s.Close(); err != nil {
				b.Errorf("Close: %v", err)
			}
		})
		if err := s.PutBlock(ctx, portcullis.Block{Agent: "other", Reason: "r", CreatedAt: time.Now()}); err != nil {
			b.Fatal(err)
		}
		return s
	}
	read := func(ctx context.Context, s *sqlite.Store) error {
		if _, blocked, err := s.Block(ctx, "bench"); err != nil || blocked {
			return fmt.Errorf("Block = %v, %v; want not blocked", blocked, err)
		}
		return nil
	}
	for _, commit := range []bool{false, true} {
		name := "quiet"
		if commit {
			name = "after-commit"
		}
		b.Run(name, func(b *testing.B) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s := open(b, ctx)
			at := time.Now()
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if commit {
					b.StopTimer()
					if _, err := s.AppendAudit(ctx, event(i, at, "s1")); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				if err := read(ctx, s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("new-goroutine", func(b *testing.B) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		s := open(b, ctx)
		done := make(chan error)
		for b.Loop() {
			go func() { done <- read(ctx, s) }()
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		s := open(b, ctx)
		b.SetParallelism((16 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := read(ctx, s); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
