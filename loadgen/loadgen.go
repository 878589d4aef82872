// Package loadgen drives a running Portcullis gateway the way a fleet of
// agents would — through the decision API (POST /v1/decide) and through the
// MCP endpoint (/mcp) — and measures it: throughput, latency percentiles by
// kind of call, and whether every decision it was answered has its row in
// the gateway's audit log.
//
// It is a client: it never decides anything itself and never touches the
// gate. A person's part (approving the writes that need a session grant) is
// played through the approvals API with the human token, exactly as a
// person's tool would. It must not count a call as allowed unless the
// gateway said so: a transport error, a timeout or an error result is
// reported as such, never as an allow.
package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/client"
)

// Kind is the kind of call a step of the load makes.
type Kind string

// The kinds of call in the mix.
const (
	Read  Kind = "read"  // a tool the policy lets through
	Write Kind = "write" // a tool that needs a person once per session
	Deny  Kind = "deny"  // a tool the policy denies
	Shell Kind = "shell" // a shell command: mostly safe ones, some the classifier blocks
)

// Kinds lists the kinds in report order.
var Kinds = []Kind{Read, Write, Deny, Shell}

// Via says which entry point a session uses.
type Via string

// The entry points.
const (
	API Via = "api" // POST /v1/decide (and the approvals API for writes)
	MCP Via = "mcp" // tools/call on /mcp; held writes are approved out of band
)

// Tools names the tools of each kind, as the gateway's policy knows them.
type Tools struct {
	Read  string
	Write string
	Deny  string
	// Shell is the shell tool and ShellArg its command argument; an empty
	// Shell leaves shell commands out of the mix.
	Shell    string
	ShellArg string
}

// Config is one load run.
type Config struct {
	// BaseURL is the gateway (http://127.0.0.1:8470).
	BaseURL string
	// AgentToken is an agent's bearer token.
	AgentToken string
	// HumanToken is the people's token: it approves writes for their
	// session. Empty: the mix must have no writes.
	HumanToken string
	// Via lists the entry points; sessions are spread over them in turn.
	Via []Via
	// Sessions is the number of concurrent agent sessions.
	Sessions int
	// Duration bounds the run; Count bounds the number of calls (the first
	// bound reached ends it). At least one must be set.
	Duration time.Duration
	Count    int64
	// Rate is the overall calls per second (0: each session calls as soon
	// as its last call was answered).
	Rate float64
	// Mix weighs the kinds; zero weights leave a kind out.
	Mix   map[Kind]int
	Tools Tools
	// CallTimeout bounds one call, a held write's wait for its approval
	// included (default 30s).
	CallTimeout time.Duration
	// Progress, when set, is called every ProgressEvery (default 1s) from
	// one goroutine, and once more at the end.
	Progress      func(Snapshot)
	ProgressEvery time.Duration
	// Sample, when set, adds the gateway's memory to each snapshot (the
	// caller reads it, e.g. from /proc).
	Sample func() (rssBytes int64, ok bool)
	// Seed makes the mix reproducible.
	Seed uint64
	// HTTPClient carries every request (default: a client with keep-alive
	// connections enough for Sessions).
	HTTPClient *http.Client
}

// Answer is what one call got.
type Answer struct {
	Via     Via
	Kind    Kind
	Session string
	// Outcome is allow, confirm, deny or stop as the gateway answered;
	// "error" for an MCP error result without a decision (an allowed call
	// the upstream failed, say), "failed" when no answer came at all.
	Outcome portcullis.Outcome
	// Decisions are the decisions the answer carried (a write that was
	// approved carries its confirm and its allow).
	Decisions []portcullis.Decision
	// Approved says a person's approval was needed and given.
	Approved   bool
	FailClosed bool
	Latency    time.Duration
	Start      time.Time
	Err        string
	// Tool is the tool called and Args its arguments.
	Tool string
	Args map[string]any
}

// The outcomes of Answer beyond the gateway's own.
const (
	OutcomeError  portcullis.Outcome = "error"
	OutcomeFailed portcullis.Outcome = "failed"
)

// Answered says the gateway answered the call (with a decision or with a
// result).
func (a *Answer) Answered() bool { return a.Outcome != OutcomeFailed }

// Snapshot is the progress of a run.
type Snapshot struct {
	Elapsed time.Duration `json:"elapsedNs"`
	Calls   int64         `json:"calls"`
	Failed  int64         `json:"failed"`
	// Answered counts the calls the gateway answered, Allowed those it
	// allowed.
	Answered int64 `json:"answered"`
	Allowed  int64 `json:"allowed"`
	// Errors counts MCP error results without a decision (the upstream
	// failed an allowed call); FailClosed the fail-closed refusals.
	Errors     int64 `json:"errors"`
	FailClosed int64 `json:"failClosed"`
	// Interval* describe the calls answered since the previous snapshot.
	IntervalCalls int64         `json:"intervalCalls"`
	IntervalRate  float64       `json:"intervalRate"`
	IntervalP50   time.Duration `json:"intervalP50Ns"`
	IntervalP99   time.Duration `json:"intervalP99Ns"`
	RSSBytes      int64         `json:"rssBytes,omitempty"`
}

// Run drives the load until the duration or the count is reached, or ctx
// ends, and returns every answer.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 30 * time.Second
	}
	if cfg.ProgressEvery <= 0 {
		cfg.ProgressEvery = time.Second
	}
	hc := cfg.HTTPClient
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConns = 4 * cfg.Sessions
		tr.MaxIdleConnsPerHost = 4 * cfg.Sessions
		hc = &http.Client{Transport: tr}
	}
	agent, err := client.New(cfg.BaseURL, cfg.AgentToken, client.WithHTTPClient(hc))
	if err != nil {
		return nil, err
	}
	var human *client.Client
	if cfg.HumanToken != "" {
		if human, err = client.New(cfg.BaseURL, cfg.HumanToken, client.WithHTTPClient(hc), client.WithActor("portcullis bench")); err != nil {
			return nil, err
		}
	}
	runCtx := ctx
	var cancel context.CancelFunc
	if cfg.Duration > 0 {
		runCtx, cancel = context.WithTimeout(ctx, cfg.Duration)
	} else {
		runCtx, cancel = context.WithCancel(ctx)
	}
	defer cancel()

	r := &runner{cfg: cfg, hc: hc, agent: agent, human: human, own: map[string]bool{}, start: time.Now()}
	if cfg.Rate > 0 {
		r.tokens = make(chan struct{}, cfg.Sessions)
		go r.pace(runCtx)
	}
	var approver sync.WaitGroup
	apCtx, apStop := context.WithCancel(ctx)
	if human != nil && slices.Contains(cfg.Via, MCP) && cfg.Mix[Write] > 0 {
		approver.Go(func() { r.approveHeld(apCtx) })
	}
	// Progress runs until the last call is answered, calls in flight
	// when the run ends included.
	progCtx, progStop := context.WithCancel(ctx)
	defer progStop()
	progDone := make(chan struct{})
	go func() { defer close(progDone); r.progress(progCtx) }()

	var wg sync.WaitGroup
	answers := make([][]Answer, cfg.Sessions)
	for i := range cfg.Sessions {
		via := cfg.Via[i%len(cfg.Via)]
		rng := rand.New(rand.NewPCG(cfg.Seed, uint64(i)))
		wg.Go(func() {
			if via == MCP {
				answers[i] = r.mcpSession(runCtx, i, rng, cancel)
			} else {
				answers[i] = r.apiSession(runCtx, i, rng, cancel)
			}
		})
	}
	wg.Wait()
	cancel()
	progStop()
	<-progDone
	apStop()
	approver.Wait()
	rep := &Report{Elapsed: time.Since(r.start), Timeline: r.timeline, Approvals: r.approvals.Load()}
	for _, a := range answers {
		rep.Answers = append(rep.Answers, a...)
	}
	rep.summarize()
	return rep, nil
}

func (c *Config) check() error {
	switch {
	case c.BaseURL == "":
		return errors.New("loadgen: no gateway URL")
	case c.AgentToken == "":
		return errors.New("loadgen: no agent token")
	case c.Sessions < 1:
		return errors.New("loadgen: sessions must be at least 1")
	case c.Duration <= 0 && c.Count <= 0:
		return errors.New("loadgen: give a duration or a count")
	case len(c.Via) == 0:
		return errors.New("loadgen: no entry point (api, mcp)")
	case c.Rate < 0:
		return errors.New("loadgen: negative rate")
	}
	total := 0
	for _, k := range Kinds {
		w := c.Mix[k]
		if w < 0 {
			return fmt.Errorf("loadgen: negative weight for %s", k)
		}
		total += w
	}
	if total == 0 {
		return errors.New("loadgen: the mix is empty")
	}
	if c.Mix[Write] > 0 && c.HumanToken == "" {
		return errors.New("loadgen: writes need a person's approval: give the human token, or leave writes out of the mix")
	}
	if c.Mix[Shell] > 0 && (c.Tools.Shell == "" || c.Tools.ShellArg == "") {
		return errors.New("loadgen: shell commands in the mix need the shell tool and its command argument")
	}
	for k, name := range map[Kind]string{Read: c.Tools.Read, Write: c.Tools.Write, Deny: c.Tools.Deny} {
		if c.Mix[k] > 0 && name == "" {
			return fmt.Errorf("loadgen: %s calls in the mix need a %s tool", k, k)
		}
	}
	return nil
}

type runner struct {
	cfg    Config
	hc     *http.Client
	agent  *client.Client
	human  *client.Client
	tokens chan struct{}
	start  time.Time

	calls, failed, approvals                    atomic.Int64
	errorResults, failClosed, answered, allowed atomic.Int64
	// writing counts MCP writes in flight: the person looks for held
	// calls only while there may be some.
	writing atomic.Int64

	mu       sync.Mutex
	own      map[string]bool // sessions of this run
	interval []time.Duration
	timeline []Snapshot
}

// pace hands out one token per call at the configured rate.
func (r *runner) pace(ctx context.Context) {
	every := time.Duration(float64(time.Second) / r.cfg.Rate)
	t := time.NewTicker(max(every, time.Microsecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			select {
			case r.tokens <- struct{}{}:
			default: // the sessions are behind: do not pile up a burst
			}
		}
	}
}

// next waits for the right to make one more call; false ends the session.
func (r *runner) next(ctx context.Context, stop context.CancelFunc) bool {
	if r.cfg.Count > 0 && r.calls.Add(1) > r.cfg.Count {
		stop()
		return false
	}
	if r.cfg.Count <= 0 {
		r.calls.Add(1)
	}
	if r.tokens != nil {
		select {
		case <-ctx.Done():
			return false
		case <-r.tokens:
		}
	}
	return ctx.Err() == nil
}

func (r *runner) record(a *Answer) {
	if !a.Answered() {
		r.failed.Add(1)
	} else {
		r.answered.Add(1)
	}
	if a.Outcome == OutcomeError {
		r.errorResults.Add(1)
	}
	if a.FailClosed {
		r.failClosed.Add(1)
	}
	if a.Outcome == portcullis.OutcomeAllow {
		r.allowed.Add(1)
	}
	r.mu.Lock()
	r.interval = append(r.interval, a.Latency)
	r.mu.Unlock()
}

func (r *runner) progress(ctx context.Context) {
	t := time.NewTicker(r.cfg.ProgressEvery)
	defer t.Stop()
	last := r.start
	for {
		var done bool
		select {
		case <-ctx.Done():
			done = true
		case <-t.C:
		}
		now := time.Now()
		r.mu.Lock()
		lat := r.interval
		r.interval = nil
		r.mu.Unlock()
		s := Snapshot{Elapsed: now.Sub(r.start), Calls: r.calls.Load(), Failed: r.failed.Load(), Answered: r.answered.Load(), Allowed: r.allowed.Load(), Errors: r.errorResults.Load(), FailClosed: r.failClosed.Load(), IntervalCalls: int64(len(lat))}
		if r.cfg.Count > 0 {
			s.Calls = min(s.Calls, r.cfg.Count)
		}
		if d := now.Sub(last).Seconds(); d > 0 {
			s.IntervalRate = float64(len(lat)) / d
		}
		slices.Sort(lat)
		s.IntervalP50, s.IntervalP99 = quantile(lat, 0.50), quantile(lat, 0.99)
		if r.cfg.Sample != nil {
			if rss, ok := r.cfg.Sample(); ok {
				s.RSSBytes = rss
			}
		}
		short := now.Sub(last) < r.cfg.ProgressEvery/2
		last = now
		if done && len(r.timeline) > 0 && (len(lat) == 0 || short) {
			return // the run ended just after the last snapshot: a rate over a sliver says nothing
		}
		r.timeline = append(r.timeline, s)
		if r.cfg.Progress != nil {
			r.cfg.Progress(s)
		}
		if done {
			return
		}
	}
}

// pick chooses the next kind by the mix's weights.
func (r *runner) pick(rng *rand.Rand) Kind {
	total := 0
	for _, k := range Kinds {
		total += r.cfg.Mix[k]
	}
	n := rng.IntN(total)
	for _, k := range Kinds {
		if n < r.cfg.Mix[k] {
			return k
		}
		n -= r.cfg.Mix[k]
	}
	return Read
}

// safeCommands pass the shell classifier as reads; blockedCommands are
// ones it refuses outright (an agent trying to approve itself).
var (
	safeCommands    = []string{"ls -la", "git status", "cat go.mod", "grep -rn TODO .", "git log --oneline -5", "wc -l README.md"}
	blockedCommands = []string{"portcullis approve ap-%d --session", "portcullis grants revoke g-%d"}
)

// call builds the next call of a session.
func (r *runner) call(rng *rand.Rand, session string, n int) (Kind, string, map[string]any) {
	k := r.pick(rng)
	switch k {
	case Write:
		return k, r.cfg.Tools.Write, map[string]any{"id": n, "text": "note " + strconv.Itoa(n) + " of " + session}
	case Deny:
		return k, r.cfg.Tools.Deny, map[string]any{"id": n, "from": session}
	case Shell:
		cmd := safeCommands[rng.IntN(len(safeCommands))]
		if rng.IntN(5) == 0 {
			cmd = fmt.Sprintf(blockedCommands[rng.IntN(len(blockedCommands))], n)
		}
		return k, r.cfg.Tools.Shell, map[string]any{r.cfg.Tools.ShellArg: cmd}
	}
	return Read, r.cfg.Tools.Read, map[string]any{"id": n, "from": session}
}

func (r *runner) addOwn(session string) {
	r.mu.Lock()
	r.own[session] = true
	r.mu.Unlock()
}

func (r *runner) isOwn(session string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.own[session]
}

// apiSession is one agent session on the decision API. A write that needs
// a person is approved for the session through the approvals API, then the
// agent waits for its final decision, as an agent framework would.
func (r *runner) apiSession(ctx context.Context, i int, rng *rand.Rand, stop context.CancelFunc) []Answer {
	session := fmt.Sprintf("bench-%d-%d", r.start.UnixNano(), i)
	r.addOwn(session)
	var out []Answer
	for n := 0; r.next(ctx, stop); n++ {
		kind, tool, args := r.call(rng, session, n)
		a := Answer{Via: API, Kind: kind, Session: session, Tool: tool, Args: args, Start: time.Now()}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.CallTimeout)
		d, err := r.agent.Decide(cctx, portcullis.Call{Tool: tool, Args: args, Session: session})
		if err == nil && d.Outcome == portcullis.OutcomeConfirm && r.human != nil && d.ChallengeID != "" {
			a.Decisions = append(a.Decisions, d)
			d, err = r.approveAndWait(cctx, d)
			a.Approved = err == nil
		}
		cancel()
		a.Latency = time.Since(a.Start)
		if err != nil {
			a.Outcome, a.Err = OutcomeFailed, err.Error()
		} else {
			a.Decisions = append(a.Decisions, d)
			a.Outcome, a.FailClosed = d.Outcome, d.FailClosed
		}
		r.record(&a)
		out = append(out, a)
		if err != nil {
			sleep(ctx, 100*time.Millisecond) // the gateway is down or failing: back off as a client would
		}
	}
	return out
}

// approveAndWait plays the person: it approves the request behind a
// confirm decision for the session, and waits for the call's final
// decision.
func (r *runner) approveAndWait(ctx context.Context, d portcullis.Decision) (portcullis.Decision, error) {
	aps, err := r.human.Approvals(ctx, portcullis.ApprovalFilter{DecisionID: d.DecisionID})
	if err != nil {
		return d, err
	}
	if len(aps) == 0 {
		return d, fmt.Errorf("no approval request behind decision %s", d.DecisionID)
	}
	forSession := d.PermissionLevel == portcullis.ConfirmSession
	if _, err := r.human.Approve(ctx, aps[0].ID, forSession); err != nil && portcullis.ErrorCode(err) != portcullis.CodeConflict {
		return d, err
	}
	r.approvals.Add(1)
	return r.agent.Wait(ctx, d.DecisionID)
}

// approveHeld plays the person for MCP sessions: their writes are held by
// the gateway until someone approves them, so it approves every pending
// request of this run's sessions, for the session when the level allows.
func (r *runner) approveHeld(ctx context.Context) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if r.writing.Load() == 0 {
			continue
		}
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		aps, err := r.human.Approvals(lctx, portcullis.ApprovalFilter{Status: portcullis.ApprovalPending, Limit: 500})
		cancel()
		if err != nil {
			continue // the gateway is down or busy: try again
		}
		for _, ap := range aps {
			if !r.isOwn(ap.Call.Session) {
				continue
			}
			actx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if _, err := r.human.Approve(actx, ap.ID, ap.Level == portcullis.ConfirmSession); err == nil {
				r.approvals.Add(1)
			} // else answered already (CONFLICT), or the gateway is down: the next round sees it
			cancel()
		}
	}
}

// mcpSession is one agent session on the MCP endpoint. When the session is
// lost (the gateway restarted), it connects again with a new one.
func (r *runner) mcpSession(ctx context.Context, i int, rng *rand.Rand, stop context.CancelFunc) []Answer {
	var out []Answer
	var cs *mcp.ClientSession
	defer func() {
		if cs != nil {
			cs.Close()
		}
	}()
	for n := 0; r.next(ctx, stop); n++ {
		start := time.Now()
		if cs == nil {
			var err error
			if cs, err = r.connect(ctx); err != nil {
				a := Answer{Via: MCP, Kind: Read, Outcome: OutcomeFailed, Err: "connect: " + err.Error(), Start: start, Latency: time.Since(start)}
				r.record(&a)
				out = append(out, a)
				sleep(ctx, 100*time.Millisecond)
				continue
			}
			r.addOwn(cs.ID())
		}
		kind, tool, args := r.call(rng, cs.ID(), n)
		a := Answer{Via: MCP, Kind: kind, Session: cs.ID(), Tool: tool, Args: args, Start: start}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.CallTimeout)
		if kind == Write {
			r.writing.Add(1)
		}
		res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if kind == Write {
			r.writing.Add(-1)
		}
		cancel()
		a.Latency = time.Since(a.Start)
		switch {
		case err != nil:
			a.Outcome, a.Err = OutcomeFailed, err.Error()
			cs.Close()
			cs = nil
		case !res.IsError:
			a.Outcome = portcullis.OutcomeAllow
		default:
			a.Outcome = OutcomeError
			a.Err = resultText(res)
			if d, ok := resultDecision(res); ok {
				a.Decisions = []portcullis.Decision{d}
				a.Outcome, a.FailClosed = d.Outcome, d.FailClosed
			}
		}
		r.record(&a)
		out = append(out, a)
	}
	return out
}

func (r *runner) connect(ctx context.Context) (*mcp.ClientSession, error) {
	hc := &http.Client{Transport: bearer{r.cfg.AgentToken, r.hc.Transport}}
	tr := &mcp.StreamableClientTransport{Endpoint: r.cfg.BaseURL + "/mcp", HTTPClient: hc, MaxRetries: -1}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return mcp.NewClient(&mcp.Implementation{Name: "portcullis-bench", Version: "1"}, nil).Connect(cctx, tr, nil)
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+b.token)
	base := b.base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(req)
}

func resultText(res *mcp.CallToolResult) string {
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			return t.Text
		}
	}
	return ""
}

// resultDecision is the decision an MCP error result carries (the gateway
// puts it in the refusal's _meta["portcullis/decision"]).
func resultDecision(res *mcp.CallToolResult) (portcullis.Decision, bool) {
	raw, ok := res.Meta["portcullis/decision"]
	if !ok {
		return portcullis.Decision{}, false
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return portcullis.Decision{}, false
	}
	var d portcullis.Decision
	if err := json.Unmarshal(b, &d); err != nil || d.Outcome == "" {
		return portcullis.Decision{}, false
	}
	return d, true
}
