package mcpgw

import (
	"bytes"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestWorkersRunEveryCallOnceAndEnd: calls handed to the workers, many at
// once and one after another, each run exactly once; the workers a burst
// started beyond the idle ones end after their call, and close ends the
// idle ones.
func TestWorkersRunEveryCallOnceAndEnd(t *testing.T) {
	var w workers
	const calls = 200
	var ran [calls]atomic.Int32
	var wg sync.WaitGroup
	release := make(chan struct{})
	// A burst: every call waits until all have started, so each needs a
	// worker of its own.
	var started sync.WaitGroup
	started.Add(calls / 2)
	for i := range calls / 2 {
		wg.Add(1)
		w.run(func() {
			defer wg.Done()
			ran[i].Add(1)
			started.Done()
			<-release
		})
	}
	started.Wait()
	close(release)
	wg.Wait()
	// One after another: they reuse the idle workers.
	for i := calls / 2; i < calls; i++ {
		wg.Add(1)
		w.run(func() {
			defer wg.Done()
			ran[i].Add(1)
		})
		wg.Wait()
	}
	for i := range ran {
		if n := ran[i].Load(); n != 1 {
			t.Errorf("call %d ran %d times; want once", i, n)
		}
	}
	waitWorkers(t, "after the burst", maxIdleWorkers)
	w.close()
	waitWorkers(t, "after close", 0)
	// A call after close still runs, on a worker that then ends.
	done := make(chan struct{})
	w.run(func() { close(done) })
	<-done
}

// waitWorkers waits until at most max workers are alive.
func waitWorkers(t *testing.T, when string, max int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for workersAlive() > max {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d workers alive; want at most %d", when, workersAlive(), max)
		}
		time.Sleep(time.Millisecond)
	}
}

// workersAlive counts the goroutines in workers.work.
func workersAlive() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return bytes.Count(buf[:n], []byte("mcpgw.(*workers).work("))
		}
		buf = make([]byte, 2*len(buf))
	}
}
