// Package replay re-decides the calls recorded in an audit log under
// another policy, before anyone deploys it, and reports every decision
// whose outcome or level would change (`portcullis policy replay`).
//
// A replay changes nothing: its gates have no store (no grant is used, no
// approval, block, run step or audit row is written), every call goes
// through Explain, and no model is called. What a recorded decision owed to
// state rather than to the policy is set aside or carried over:
//
//   - a call allowed by a grant counts as a confirmation (the grant would
//     still cover it at the same level); a stop of the retry guard counts as
//     the denial it repeated;
//   - a decision made by a danger-zone block, or one that failed closed
//     because the store or the audit log failed, is not replayed (counted);
//   - the validator's recorded verdict is replayed; a call the new policy
//     sends to the validator that did not judge it before is shown as if it
//     allowed, and flagged;
//   - an autonomous step is replayed at the step number its trace recorded;
//   - what an MCP gateway knew of an upstream tool (offered, pinned
//     annotations, changed definition) is read back from the route trace.
//
// The replay reads a recorded trace's facts (docs/ARCHITECTURE.md, "The
// decision pipeline"), never its prose, except for rows written before
// trace entries carried facts.
//
// Redacted arguments are replayed as "[redacted]" and counted: a shell
// command or a path that was redacted cannot be classified again.
//
// The package reads the log through the small Log interface and decides
// through package gate; it does not open stores or parse flags. It writes
// its report as the command shows it (Printer, Summary.WriteText), so that
// the text is tested with the types.
package replay

import (
	"context"
	"runtime"
	"sync"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
)

// Log is the part of a portcullis.AuditLog a replay reads. Every Store is
// one.
type Log interface {
	QueryAudit(ctx context.Context, q portcullis.AuditQuery) ([]portcullis.AuditRecord, error)
	ScanAudit(ctx context.Context, afterSeq int64, fn func(portcullis.AuditRecord) (bool, error)) error
}

// Decision is a decision as the replay compares it.
type Decision struct {
	Outcome       portcullis.Outcome `json:"outcome"`
	Level         portcullis.Level   `json:"permissionLevel"`
	Code          portcullis.Code    `json:"code,omitempty"`
	Source        portcullis.Source  `json:"source"`
	SourceElement string             `json:"sourceElement,omitempty"`
	Reason        string             `json:"reason,omitempty"`
}

// Kind says how a decision changes.
type Kind string

// The kinds of change.
const (
	// KindStricter: a higher level, or at the same level a stricter outcome.
	KindStricter Kind = "stricter"
	// KindLooser: a lower level, or at the same level a looser outcome.
	KindLooser Kind = "looser"
	// KindValidator: the same outcome and level, but the new policy sends
	// the call to the validator, which has no recorded verdict for it.
	KindValidator Kind = "validator"
)

// Change is one recorded decision that would change.
type Change struct {
	Seq        int64     `json:"seq"`
	Time       time.Time `json:"time"`
	DecisionID string    `json:"decisionId"`
	Session    string    `json:"session,omitempty"`
	Agent      string    `json:"agent,omitempty"`
	Tool       string    `json:"tool"`
	// Old is the decision as recorded, New as the new policy decides it.
	Old  Decision `json:"old"`
	New  Decision `json:"new"`
	Kind Kind     `json:"kind"`
	// Change is the transition, e.g. "confirm CONFIRM_SESSION → allow AUTO_APPROVE".
	Change string `json:"change"`
	// Redacted names the arguments the audit log kept only as "[redacted]".
	Redacted []string `json:"redacted,omitempty"`
	// Notes say what the replay could not know, for people.
	Notes []string `json:"notes,omitempty"`
}

// Why a recorded decision is not replayed: the keys of
// Summary.NotReplayed.
const (
	SkipBlock     = "decided by a danger-zone block (state, not policy)"
	SkipFailed    = "failed closed because the store or the audit log failed"
	SkipNoRequest = "no request recorded"
	SkipBadRow    = "row does not decode"
)

// Summary counts what a replay read and found.
type Summary struct {
	// Policy is the new policy's Source, PolicyHash its Hash.
	Policy     string    `json:"policy"`
	PolicyHash string    `json:"policyHash"`
	Since      time.Time `json:"since,omitzero"`
	Until      time.Time `json:"until,omitzero"`
	// Scanned is how many audit rows were read; Replayed how many
	// decisions were decided again; Changed how many would change.
	Scanned  int64 `json:"scanned"`
	Replayed int64 `json:"replayed"`
	Changed  int64 `json:"changed"`
	// Stricter, Looser and Validator count the changes by kind; ByChange by
	// transition.
	Stricter  int64            `json:"stricter"`
	Looser    int64            `json:"looser"`
	Validator int64            `json:"validator"`
	ByChange  map[string]int64 `json:"byChange"`
	// NotReplayed counts the decisions set aside, by why (the Skip
	// constants).
	NotReplayed map[string]int64 `json:"notReplayed"`
	// Redacted counts the replayed decisions with redacted arguments;
	// RedactedArgs counts them by argument name.
	Redacted     int64            `json:"redacted"`
	RedactedArgs map[string]int64 `json:"redactedArgs"`
	// Unjudged counts the decisions the new policy sends to the validator
	// without a recorded verdict (replayed as if it allowed).
	Unjudged int64 `json:"unjudged"`
	// FirstSeq and LastSeq are the first and last decision rows in the
	// window; 0 when there were none.
	FirstSeq int64 `json:"firstSeq,omitempty"`
	LastSeq  int64 `json:"lastSeq,omitempty"`
}

// Report is what a replay found.
type Report struct {
	Summary Summary
	// Changes are the changes in log order, when Options.OnChange is nil;
	// a caller that takes them one by one gets none here.
	Changes []Change
}

// Progress is where a long replay has got to.
type Progress struct {
	// Scanned rows so far, up to row Seq of the log, with Changed changes.
	Scanned, Seq, Changed int64
}

// Options tune a replay. The zero value replays the whole log, keeps the
// changes in the Report and protects no paths.
type Options struct {
	// Since and Until bound the window: decisions at or after Since and
	// before Until. Zero: unbounded.
	Since, Until time.Time
	// ProtectedPaths are the paths the recording gate protected besides
	// the policy file (gate.WithProtectedPaths): its binary, its state
	// directory. HomeDir is the home directory its paths expanded "~" to
	// (gate.WithHomeDir). A file-write call on one of these decides as it
	// did only when they are the same.
	ProtectedPaths []string
	HomeDir        string
	// Workers is how many calls are decided at once; 0: GOMAXPROCS.
	// Changes are reported in log order whatever the number.
	Workers int
	// OnChange, when set, is called with each change in log order, as it
	// is found; an error ends the replay with that error.
	OnChange func(*Change) error
	// OnProgress, when set, is called every ProgressEvery rows.
	OnProgress    func(Progress)
	ProgressEvery int64
}

// Replayer replays audit logs under one policy. It is not safe for
// concurrent use: run one replay at a time.
type Replayer struct {
	pol     *portcullis.Policy
	opts    Options
	workers []*worker
}

// New returns a Replayer for the policy pol. It fails when the gate
// refuses the policy (a policy that does not compile).
func New(pol *portcullis.Policy, opts Options) (*Replayer, error) {
	n := opts.Workers
	if n <= 0 {
		n = max(1, runtime.GOMAXPROCS(0))
	}
	r := &Replayer{pol: pol, opts: opts}
	for range n {
		w, err := newWorker(pol, &opts)
		if err != nil {
			return nil, err
		}
		r.workers = append(r.workers, w)
	}
	return r, nil
}

// Run replays the decisions of log in the window of the options, and
// returns what it found. An error reading the log, from OnChange, or of
// ctx ends it; the Report then counts what was accounted until then.
func (r *Replayer) Run(ctx context.Context, log Log) (*Report, error) {
	rep := &Report{Summary: Summary{
		Policy: r.pol.Source, PolicyHash: r.pol.Hash, Since: r.opts.Since, Until: r.opts.Until,
		ByChange: map[string]int64{}, NotReplayed: map[string]int64{}, RedactedArgs: map[string]int64{},
	}}
	start := int64(0)
	if !r.opts.Since.IsZero() {
		recs, err := log.QueryAudit(ctx, portcullis.AuditQuery{Kind: portcullis.AuditDecision, Since: r.opts.Since, Limit: 1})
		if err != nil {
			return rep, err
		}
		if len(recs) == 0 {
			return rep, nil // nothing since then
		}
		start = recs[0].Seq - 1
	}
	emit := r.opts.OnChange
	if emit == nil {
		emit = func(c *Change) error {
			rep.Changes = append(rep.Changes, *c)
			return nil
		}
	}
	return rep, r.scan(ctx, log, start, &rep.Summary, emit)
}

// item is one audit row on its way through the workers.
type item struct {
	n   int64 // its place in the scan, for putting results back in order
	rec portcullis.AuditRecord
	res result
}

// result is what a worker made of one audit row.
type result struct {
	decision bool   // a decision row in the window
	skip     string // why it was not replayed; "" when it was
	redacted []string
	unjudged bool
	change   *Change // nil: no change
}

// maxInFlight bounds the rows read but not yet accounted, whatever the
// workers' speeds: the memory of a replay does not grow with the log.
const maxInFlight = 1024

// scan reads the log after row start. One goroutine reads the log, the
// workers decode and re-decide rows (each with its own gate), and the
// results are accounted and emitted in log order. At most maxInFlight
// rows are between the reader and the accounting at any time.
func (r *Replayer) scan(ctx context.Context, log Log, start int64, sum *Summary, emit func(*Change) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	slots := make(chan struct{}, maxInFlight)
	in := make(chan item, 256)
	out := make(chan item, 256)
	var wg sync.WaitGroup
	for _, w := range r.workers {
		wg.Go(func() {
			for it := range in {
				it.res = w.replay(ctx, it.rec)
				select {
				case out <- it:
				case <-ctx.Done():
					return
				}
			}
		})
	}
	scanned := make(chan error, 1)
	go func() {
		defer close(in)
		n := int64(0)
		scanned <- log.ScanAudit(ctx, start, func(rec portcullis.AuditRecord) (bool, error) {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return false, ctx.Err()
			}
			select {
			case in <- item{n: n, rec: rec}:
				n++
				return true, nil
			case <-ctx.Done():
				return false, ctx.Err()
			}
		})
	}()
	go func() {
		wg.Wait()
		close(out)
	}()

	pending := map[int64]item{}
	next := int64(0)
	var failed error
	for it := range out {
		if failed != nil {
			continue // drain, so the workers can end
		}
		pending[it.n] = it
		for {
			p, ok := pending[next]
			if !ok {
				break
			}
			delete(pending, next)
			next++
			<-slots
			if err := r.account(sum, &p, emit); err != nil {
				failed = err
				cancel()
				break
			}
		}
	}
	if failed != nil {
		return failed
	}
	if err := <-scanned; err != nil {
		return err
	}
	return ctx.Err()
}

// account adds one row's result to the summary and emits its change.
func (r *Replayer) account(s *Summary, it *item, emit func(*Change) error) error {
	s.Scanned++
	tally(s, it)
	if every := r.opts.ProgressEvery; r.opts.OnProgress != nil && every > 0 && s.Scanned%every == 0 {
		r.opts.OnProgress(Progress{Scanned: s.Scanned, Seq: it.rec.Seq, Changed: s.Changed})
	}
	if it.res.change == nil {
		return nil
	}
	return emit(it.res.change)
}

// tally counts a decision row's result.
func tally(s *Summary, it *item) {
	res := &it.res
	if !res.decision {
		return
	}
	if s.FirstSeq == 0 {
		s.FirstSeq = it.rec.Seq
	}
	s.LastSeq = it.rec.Seq
	if res.skip != "" {
		s.NotReplayed[res.skip]++
		return
	}
	s.Replayed++
	if len(res.redacted) > 0 {
		s.Redacted++
		for _, n := range res.redacted {
			s.RedactedArgs[n]++
		}
	}
	if res.unjudged {
		s.Unjudged++
	}
	c := res.change
	if c == nil {
		return
	}
	s.Changed++
	s.ByChange[c.Change]++
	switch c.Kind {
	case KindStricter:
		s.Stricter++
	case KindLooser:
		s.Looser++
	default:
		s.Validator++
	}
}

// worker re-decides recorded calls, one at a time, under the new policy:
// a gate without a store, whose validator is the recorded verdict.
type worker struct {
	g            *gate.Gate
	v            *recordedVerdict
	since, until time.Time
}

func newWorker(pol *portcullis.Policy, opts *Options) (*worker, error) {
	v := &recordedVerdict{}
	// Built like decide's gate (trusted: recorded active elements, grants
	// and run state apply; the same protected paths), with the recorded
	// verdicts standing in for the validator, and no store.
	gopts := []gate.Option{gate.WithRequestOverrides(), gate.WithValidator(v)}
	if len(opts.ProtectedPaths) > 0 {
		gopts = append(gopts, gate.WithProtectedPaths(opts.ProtectedPaths...))
	}
	if opts.HomeDir != "" {
		gopts = append(gopts, gate.WithHomeDir(opts.HomeDir))
	}
	g, err := gate.New(pol, gopts...)
	if err != nil {
		return nil, err
	}
	return &worker{g: g, v: v, since: opts.Since, until: opts.Until}, nil
}
