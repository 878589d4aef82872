package mcpgw

import "sync"

// workers runs the stdio fast path's calls on goroutines that outlive a
// call. A call goes deep (the gate's stages, SQLite's virtual machine for
// the agent's block, the audit row), and a new goroutine's stack grows to
// that depth by doubling, copied each time, on every call: on the
// reference machine that cost a call more than the block read itself
// (docs/BENCHMARKS.md, "MCP gateway"). A worker keeps its grown stack for
// the next call.
type workers struct {
	mu     sync.Mutex
	idle   []chan func() // each idle worker's inbox, the last to finish last
	closed bool
}

// maxIdleWorkers is how many workers wait for calls; more calls at once
// start more, which end after their call.
const maxIdleWorkers = 4

// run runs fn on an idle worker, or on a new one.
func (w *workers) run(fn func()) {
	w.mu.Lock()
	if n := len(w.idle); n > 0 {
		inbox := w.idle[n-1]
		w.idle = w.idle[:n-1]
		w.mu.Unlock()
		inbox <- fn // buffered: never waits
		return
	}
	w.mu.Unlock()
	go w.work(make(chan func(), 1), fn)
}

func (w *workers) work(inbox chan func(), fn func()) {
	for {
		fn()
		w.mu.Lock()
		if w.closed || len(w.idle) >= maxIdleWorkers {
			w.mu.Unlock()
			return
		}
		w.idle = append(w.idle, inbox)
		w.mu.Unlock()
		var ok bool
		if fn, ok = <-inbox; !ok {
			return
		}
	}
}

// close ends the idle workers; a busy one ends after its call.
func (w *workers) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	for _, inbox := range w.idle {
		close(inbox)
	}
	w.idle = nil
}
