package gate

import (
	"context"
	"sync"
	"time"

	"github.com/portcullis/portcullis"
)

// WithObserver adds an observer that is told of every decision (Decide and
// Explain) once it is final: metrics, traces, decision logs. Observers run
// in the order given, on the decision's goroutine; see
// portcullis.DecisionObserver. Without one the gate measures nothing.
func WithObserver(o portcullis.DecisionObserver) Option {
	return func(g *Gate) {
		if o != nil {
			g.observers = append(g.observers, o)
		}
	}
}

// maxStages bounds the stages timed in one decision: the stages of the
// pipeline, and a failure may add one more entry.
const maxStages = len(pipeline) + 2

// laps times the stages of one observed decision. A gate with observers
// takes one from lapsPool per decision and gives it back after the
// observers ran, so observing allocates nothing per decision either.
type laps struct {
	start, last time.Time
	n           int
	stages      [maxStages]portcullis.StageTiming
	ev          portcullis.DecisionEvent

	// What the observers are told of the decision beyond the decision
	// itself, kept up to date by lap (the eval itself stays on the stack).
	pol     *compiled
	c       *portcullis.Call
	verdict *portcullis.ValidatorRecord
	d       portcullis.Decision
}

var lapsPool = sync.Pool{New: func() any { return new(laps) }}

// runObserved runs a decision with its stages timed and tells the
// observers. It is apart from decide so that a gate without observers
// does not move the decision to the heap.
func (g *Gate) runObserved(ctx context.Context, c *portcullis.Call, dry bool) (portcullis.Decision, error) {
	l := lapsPool.Get().(*laps)
	l.start = g.clock.Now()
	l.n, l.c = 0, c
	l.last = l.start
	d, err := g.run(ctx, c, dry, l)
	l.d = d // the observers see the pooled copy: d stays on the stack
	g.observe(ctx, l, dry, err)
	return d, err
}

// lap ends the stage named: the time since the previous lap is the
// stage's. A stage that left no entry in the trace (it did not apply to
// the call) is not recorded; its time goes to the next stage that does.
func (e *eval) lap(stage string) {
	l := e.laps
	if l == nil {
		return
	}
	l.c, l.verdict = e.c, e.verdict
	n := len(e.d.Trace)
	if n == 0 || e.d.Trace[n-1].Stage != stage || l.n == maxStages {
		return
	}
	now := e.g.clock.Now()
	l.stages[l.n] = portcullis.StageTiming{Stage: stage, Duration: now.Sub(l.last)}
	l.n++
	l.last = now
}

// observe tells the observers of the final decision and releases the laps.
func (g *Gate) observe(ctx context.Context, l *laps, explain bool, err error) {
	d := &l.d
	now := g.clock.Now()
	if l.n == 0 && len(d.Trace) > 0 {
		// Nothing was lapped (a rejected request, mode off): the whole
		// decision is its first stage's.
		l.stages[0] = portcullis.StageTiming{Stage: d.Trace[0].Stage, Duration: now.Sub(l.start)}
		l.n = 1
	}
	_, known := l.pol.routes[d.Tool]
	l.ev = portcullis.DecisionEvent{
		Decision:   d,
		Call:       l.c,
		PolicyHash: l.pol.pol.Hash,
		PolicyTool: known,
		Explain:    explain,
		Start:      l.start,
		Duration:   now.Sub(l.start),
		Stages:     l.stages[:l.n],
		Validator:  l.verdict,
		Err:        err,
	}
	for _, o := range g.observers {
		o.ObserveDecision(ctx, &l.ev)
	}
	l.ev = portcullis.DecisionEvent{}
	l.pol, l.c, l.verdict, l.d = nil, nil, nil, portcullis.Decision{}
	lapsPool.Put(l)
}
