package witness

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/portcullis/portcullis"
)

// Chain is what the publisher reads of the audit log: its newest row, and
// the checkpoint when every row was pruned. A portcullis.Store satisfies
// it.
type Chain interface {
	QueryAudit(ctx context.Context, q portcullis.AuditQuery) ([]portcullis.AuditRecord, error)
	AuditCheckpoint(ctx context.Context) (portcullis.AuditCheckpoint, bool, error)
}

// Status is a witness's state after a round of publishing.
type Status struct {
	// Witness is the witness's name.
	Witness string
	// Head is the chain's head this round; Kept the newest head the
	// witness acknowledged (0 before the first).
	Head, Kept int64
	// LagRows is how many rows of the chain the witness has not seen a
	// head for: Head - Kept.
	LagRows int64
	// LastKept is when the witness last acknowledged a head (zero before
	// the first).
	LastKept time.Time
	// Err is this round's failure, if any.
	Err error
}

// Options configure a Publisher.
type Options struct {
	// Chain is the audit log whose head is published.
	Chain Chain
	// Witnesses receive the heads.
	Witnesses []Witness
	// Sign signs a head (its Seq, Hash and Time); required.
	Sign func(Head) string
	// Interval is how often the head is published (default one minute).
	// A head is sent to a witness only when the chain moved since the
	// witness last kept one.
	Interval time.Duration
	// Timeout bounds one publication to one witness (default 10 s).
	Timeout time.Duration
	// Now tells the time of a head (default time.Now).
	Now func() time.Time
	// Logger receives a warning for each failed publication.
	Logger *slog.Logger
	// Observe is called with every witness's status after each round
	// (for metrics); it must not block.
	Observe func(Status)
}

// Publisher publishes the chain's head to witnesses at an interval and
// once more when it stops. It never touches the decision path: it only
// reads the log.
type Publisher struct {
	opts Options

	mu    sync.Mutex
	state map[Witness]*Status
}

// NewPublisher returns a publisher; Run starts it.
func NewPublisher(opts Options) *Publisher {
	if opts.Interval <= 0 {
		opts.Interval = time.Minute
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	p := &Publisher{opts: opts, state: map[Witness]*Status{}}
	for _, w := range opts.Witnesses {
		p.state[w] = &Status{Witness: w.Name()}
	}
	return p
}

// Run publishes the head now, then every interval, until ctx ends; then it
// publishes once more (each witness bounded by the timeout) and returns.
func (p *Publisher) Run(ctx context.Context) {
	p.Publish(ctx)
	t := time.NewTicker(p.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			// The last head, on shutdown: not bound to the ended ctx.
			p.Publish(context.WithoutCancel(ctx))
			return
		case <-t.C:
			p.Publish(ctx)
		}
	}
}

// Publish sends the chain's current head to every witness that has not
// kept it yet, concurrently, and returns every witness's status.
func (p *Publisher) Publish(ctx context.Context) []Status {
	head, ok, err := p.head(ctx)
	if err != nil {
		if ctx.Err() == nil {
			p.opts.Logger.Warn("audit witness: cannot read the head of the audit log", "err", err)
		}
		return p.report(nil, err)
	}
	if !ok {
		return p.report(nil, nil) // an empty log: nothing to anchor
	}
	var wg sync.WaitGroup
	for _, w := range p.opts.Witnesses {
		p.mu.Lock()
		st := *p.state[w]
		p.mu.Unlock()
		st.Head = head.Seq
		if st.Kept == head.Seq && !st.LastKept.IsZero() && st.Err == nil {
			p.set(w, st)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			wctx, cancel := context.WithTimeout(ctx, p.opts.Timeout)
			defer cancel()
			st.Err = w.Publish(wctx, head)
			if st.Err == nil {
				st.Kept, st.LastKept = head.Seq, p.opts.Now()
			} else {
				p.opts.Logger.Warn("audit witness did not keep the head; decisions go on, the witness lags",
					"witness", w.Name(), "seq", head.Seq, "lagRows", head.Seq-st.Kept, "err", st.Err)
			}
			p.set(w, st)
		}()
	}
	wg.Wait()
	return p.report(&head, nil)
}

func (p *Publisher) set(w Witness, st Status) {
	st.LagRows = max(st.Head-st.Kept, 0)
	p.mu.Lock()
	*p.state[w] = st
	p.mu.Unlock()
}

// report returns every witness's status, with err as the round's failure
// when the head could not be read, and hands them to Observe.
func (p *Publisher) report(head *Head, err error) []Status {
	out := make([]Status, 0, len(p.opts.Witnesses))
	p.mu.Lock()
	for _, w := range p.opts.Witnesses {
		st := p.state[w]
		if err != nil {
			st.Err = err
		}
		if head != nil {
			st.Head = head.Seq
			st.LagRows = max(st.Head-st.Kept, 0)
		}
		out = append(out, *st)
	}
	p.mu.Unlock()
	if p.opts.Observe != nil {
		for _, st := range out {
			p.opts.Observe(st)
		}
	}
	return out
}

// head reads the chain's head and signs it; false when the log is empty.
func (p *Publisher) head(ctx context.Context) (Head, bool, error) {
	recs, err := p.opts.Chain.QueryAudit(ctx, portcullis.AuditQuery{Newest: true, Limit: 1})
	if err != nil {
		return Head{}, false, err
	}
	var h Head
	switch {
	case len(recs) > 0:
		h = Head{Seq: recs[0].Seq, Hash: recs[0].Hash}
	default:
		cp, ok, err := p.opts.Chain.AuditCheckpoint(ctx)
		if err != nil || !ok {
			return Head{}, false, err
		}
		h = Head{Seq: cp.Seq, Hash: cp.Hash}
	}
	h.Time = p.opts.Now().UTC()
	h.Signature = p.opts.Sign(h)
	return h, true, nil
}
