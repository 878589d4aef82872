// Package gate is Portcullis's decision engine: Gate.Decide runs a call
// through the pipeline of docs/ARCHITECTURE.md (mode, route, elements, ...)
// and returns one of four permission levels and an outcome, with a trace of
// every stage.
//
// A Gate decides from its inputs and injected dependencies only (policy,
// store, clock, randomness): no globals, no goroutines inside a decision.
// It must never let a call through on an error: a failed store, an invalid
// request or a panic in a stage yields a DENY with FailClosed set.
//
// The stages run in the order docs/ARCHITECTURE.md ("The decision
// pipeline") gives and says why each exists; each can only end the
// decision or make it stricter.
package gate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/shell"
)

// Gate decides calls under a policy. It is safe for concurrent use; the
// policy can be swapped atomically with SetPolicy.
type Gate struct {
	pol         atomic.Pointer[compiled]
	store       portcullis.Store
	clock       portcullis.Clock
	rand        io.Reader
	protected   []string
	approvalTTL time.Duration
	codeLife    time.Duration
	home        string
	validator   portcullis.Validator
	notifier    portcullis.Notifier
	trusted     bool
	log         *slog.Logger
	sessionTTL  time.Duration
	waiters     approvalWaiters
	observers   []portcullis.DecisionObserver

	idPrefix string
	seq      atomic.Uint64
}

var _ portcullis.Decider = (*Gate)(nil)

// Option configures a Gate.
type Option func(*Gate)

// WithStore gives the gate a store for grants and approval requests.
// Without one the gate is stateless: only grants carried in the request
// count, and a call that needs a person gets outcome confirm with no
// approval request behind it.
func WithStore(s portcullis.Store) Option { return func(g *Gate) { g.store = s } }

// WithClock sets the clock used for grant and approval expiry.
func WithClock(c portcullis.Clock) Option { return func(g *Gate) { g.clock = c } }

// WithRandom sets the source of randomness for identifiers (crypto/rand by
// default). Tests pass a deterministic reader.
func WithRandom(r io.Reader) Option { return func(g *Gate) { g.rand = r } }

// WithProtectedPaths names Portcullis's own files and directories (state
// directory, binary). A non-read tool whose path argument points at one of
// them, or at the policy file itself, is denied: an agent must not approve
// itself.
func WithProtectedPaths(paths ...string) Option {
	return func(g *Gate) { g.protected = append(g.protected, paths...) }
}

// WithRequestOverrides lets requests replace what the gate would otherwise
// know: the active elements (`activeElements`), existing grants (`grants`),
// and the run state (`run` step, previous outcome, risk score, next-action
// hint, trigger). The request contract keeps these for testing and explaining; only a
// trusted caller may use them (`portcullis decide`, `explain`, `policy
// test`). Without this option they are ignored, so an agent cannot drop a
// restrictive element, approve itself, or claim a harmless step.
func WithRequestOverrides() Option { return func(g *Gate) { g.trusted = true } }

// WithNotifier sets where people are told of blocks (with their codes)
// and of calls waiting for approval. It must be a human channel.
func WithNotifier(n portcullis.Notifier) Option { return func(g *Gate) { g.notifier = n } }

// WithLogger sets the logger for security events (blocks, failed
// verifications). The default discards them.
func WithLogger(l *slog.Logger) Option { return func(g *Gate) { g.log = l } }

// WithChallengeLife sets how long a challenge code can be used (default 5
// minutes).
func WithChallengeLife(d time.Duration) Option { return func(g *Gate) { g.codeLife = d } }

// WithHomeDir tells the shell classifier what ~ and $HOME stand for, so a
// command naming ~/x is matched against protected paths written in full.
func WithHomeDir(dir string) Option { return func(g *Gate) { g.home = dir } }

// WithApprovalTTL sets how long an approval request stays answerable
// (default 15 minutes).
func WithApprovalTTL(d time.Duration) Option { return func(g *Gate) { g.approvalTTL = d } }

// New returns a gate for the policy. The policy should come from package
// policy (Load, Parse or Validate), which rejects what the engine cannot
// decide on; New returns an error for what it cannot compile.
func New(p *portcullis.Policy, opts ...Option) (*Gate, error) {
	g := &Gate{
		clock:       portcullis.SystemClock{},
		rand:        rand.Reader,
		approvalTTL: 15 * time.Minute,
		sessionTTL:  defaultSessionGrantTTL,
		codeLife:    defaultCodeLife,
		log:         slog.New(slog.DiscardHandler),
	}
	for _, o := range opts {
		o(g)
	}
	var b [8]byte
	if _, err := io.ReadFull(g.rand, b[:]); err != nil {
		return nil, fmt.Errorf("gate: read random: %w", err)
	}
	g.idPrefix = "d" + hex.EncodeToString(b[:]) + "-"
	if err := g.SetPolicy(p); err != nil {
		return nil, err
	}
	return g, nil
}

// SetPolicy compiles p and swaps it in for every later decision. On error
// the policy in force is kept.
func (g *Gate) SetPolicy(p *portcullis.Policy) error {
	if p == nil {
		return errors.New("gate: nil policy")
	}
	c, err := compile(p, g.protected, g.home)
	if err != nil {
		return fmt.Errorf("gate: compile policy: %w", err)
	}
	g.pol.Store(c)
	return nil
}

// Policy returns the policy in force.
func (g *Gate) Policy() *portcullis.Policy { return g.pol.Load().pol }

// Decide runs the call through the pipeline. It consumes a single-use grant
// that satisfies the call and records an approval request when a person must
// confirm it.
//
// The Decision is always safe to act on. The error is non-nil (code
// INVALID_REQUEST) only when the request is invalid, and the Decision is
// then a fail-closed DENY.
func (g *Gate) Decide(ctx context.Context, c portcullis.Call) (portcullis.Decision, error) {
	return g.decide(ctx, &c, false)
}

// Explain decides like Decide but changes nothing: no grant is consumed and
// no approval request is created. It is what `portcullis explain` shows.
func (g *Gate) Explain(ctx context.Context, c portcullis.Call) (portcullis.Decision, error) {
	return g.decide(ctx, &c, true)
}

func (g *Gate) newID() string {
	var buf [48]byte
	b := append(buf[:0], g.idPrefix...)
	b = strconv.AppendUint(b, g.seq.Add(1), 36)
	return string(b)
}

func (g *Gate) decide(ctx context.Context, c *portcullis.Call, dry bool) (portcullis.Decision, error) {
	if len(g.observers) == 0 {
		return g.run(ctx, c, dry, nil)
	}
	return g.runObserved(ctx, c, dry)
}

// run is the decision itself; l times its stages when the gate has
// observers (nil otherwise).
func (g *Gate) run(ctx context.Context, c *portcullis.Call, dry bool, l *laps) (d portcullis.Decision, err error) {
	e := &eval{g: g, c: c, pol: g.pol.Load(), dry: dry, explain: dry, laps: l}
	if l != nil {
		l.pol = e.pol
	}
	e.d.DecisionID = g.newID()
	var start time.Time
	if g.store != nil && !dry {
		start = g.clock.Now()
	}
	e.d.Tool = c.Tool
	defer func() {
		if r := recover(); r != nil {
			e.failClosed("panic", fmt.Errorf("panic: %v", r))
			d, err = e.d, nil
		}
	}()
	if err := c.Validate(); err != nil {
		e.failClosed("request", err)
		return e.d, err
	}
	if !g.trusted {
		e.c = untrusted(c)
	}
	if err := ctx.Err(); err != nil {
		e.failClosed("request", err)
		return e.d, nil
	}
	e.d.Trace = make([]portcullis.TraceEntry, 0, 8)

	e.r = e.pol.upstreamRoute(c) // looked up once; the route stage uses it
	e.canonical = c.Tool
	if e.r != nil {
		e.canonical = e.r.name
	}
	mode, modeOf := e.pol.pol.Mode, "policy"
	if e.r != nil && e.r.mode != "" {
		mode, modeOf = e.r.mode, "tool"
	}
	switch mode {
	case portcullis.ModeOff:
		e.trace("mode", "off ("+modeOf+"): the call is let through unevaluated")
		e.finish(portcullis.OutcomeAllow, portcullis.AutoApprove, portcullis.SourceMode, "", "policy mode is off: calls are not evaluated")
		e.lap("mode")
		return e.d, nil
	case portcullis.ModeShadow:
		e.trace("mode", "shadow ("+modeOf+"): evaluated and recorded, but the call is let through")
		e.dry = true
		if err := e.pipeline(ctx); err != nil {
			return e.d, err
		}
		e.shadow()
	default:
		e.trace("mode", "enforce")
		if err := e.pipeline(ctx); err != nil {
			return e.d, err
		}
		e.retryGuard(ctx)
		e.lap("retry_guard")
	}
	if g.store != nil && !e.explain {
		e.audit(ctx, start)
		e.lap("audit")
	}
	return e.d, nil
}

// pipeline runs the stages after mode. Each stage returns true when it ended
// the decision.
func (e *eval) pipeline(ctx context.Context) error {
	e.lap("mode")
	done := e.dangerZone(ctx)
	e.lap("danger_zone")
	if done {
		return nil
	}
	done = e.route()
	e.lap("route")
	if done {
		return nil
	}
	done, err := e.elements()
	e.lap("elements")
	if err != nil {
		return err
	}
	if done {
		return nil
	}
	if e.c.Run != nil && e.level != portcullis.Deny {
		done = e.autonomyStage(ctx)
		e.lap("autonomy")
		if done {
			return nil
		}
	}
	if e.level != portcullis.Deny {
		done = e.validatorStage(ctx)
		e.lap("validator")
		if done {
			return nil
		}
	}
	switch {
	case e.level == portcullis.Deny:
		e.finishDeny(portcullis.CodeNone, e.denyReason())
	case e.level.IsConfirm():
		e.confirmation(ctx)
	default:
		e.finish(portcullis.OutcomeAllow, e.level, e.source, e.sourceElement, e.allowReason())
	}
	e.lap("confirmation")
	// The retry guard and the audit stage run in decide, after every stage
	// that can deny (and shadow mode) has had its say.
	return nil
}

// eval is the state of one decision.
type eval struct {
	g   *Gate
	c   *portcullis.Call
	pol *compiled
	// dry: change no state (explain and shadow); explain: write no audit
	// row either.
	dry     bool
	explain bool
	d       portcullis.Decision

	r             *route // nil: unclassified
	canonical     string
	level         portcullis.Level
	elevatable    bool
	risk          portcullis.Risk
	active        []bool
	source        portcullis.Source
	sourceElement string
	matchedPolicy string
	conflicts     []portcullis.Conflict
	allowElem     int // the element whose allow auto-approved the call

	// shellClass is the classification of a shell tool's command.
	shellClass *shell.Classification
	// endpointOverride replaces the tool's endpoint (a shell command
	// classified safe is a read).
	endpointOverride portcullis.Endpoint
	// paused: the autonomy stage paused the run; a person must confirm.
	paused      bool
	pauseReason string
	// verdict is the validator's, for the audit row.
	verdict *portcullis.ValidatorRecord
	// laps times the stages when the gate has observers; nil otherwise.
	laps *laps
	// routeFacts and routeUpstream are what the route stage found of the
	// call's upstream tool, recorded on its trace entries.
	routeFacts    []portcullis.Fact
	routeUpstream string
}

// trace records a stage's result. Every entry of the route stage carries
// what the route stage found of the call's upstream tool (routeFacts).
func (e *eval) trace(stage, result string) {
	t := portcullis.TraceEntry{Stage: stage, Result: result, Level: e.level}
	if stage == "route" {
		t.Facts, t.Upstream = slices.Clone(e.routeFacts), e.routeUpstream
	}
	e.d.Trace = append(e.d.Trace, t)
}

// traceFact records a stage's result with facts a program may read. Each
// entry has its own copy of the facts: a caller may change its decision.
func (e *eval) traceFact(stage, result string, facts []portcullis.Fact) {
	e.d.Trace = append(e.d.Trace, portcullis.TraceEntry{Stage: stage, Result: result, Level: e.level, Facts: slices.Clone(facts)})
}

// finish sets the decision's outcome and marks the last trace entry as the
// one that decided.
func (e *eval) finish(o portcullis.Outcome, l portcullis.Level, s portcullis.Source, elem, reason string) {
	e.d.Outcome = o
	e.d.PermissionLevel = l
	e.d.Source = s
	e.d.SourceElement = elem
	e.d.Reason = reason
	e.d.MatchedPolicy = e.matchedPolicy
	e.d.ConflictingElements = e.conflicts
	e.d.Tool = e.canonical
	e.d.Endpoint = e.endpoint()
	e.d.Risk = e.risk
	if n := len(e.d.Trace); n > 0 {
		e.d.Trace[n-1].Decided = true
		e.d.Trace[n-1].Level = l
	}
}

func (e *eval) finishDeny(code portcullis.Code, reason string) {
	e.level = portcullis.Deny
	e.d.Code = code
	e.finish(portcullis.OutcomeDeny, portcullis.Deny, e.source, e.sourceElement, reason)
}

func (e *eval) endpoint() portcullis.Endpoint {
	switch {
	case e.endpointOverride != "":
		return e.endpointOverride
	case e.r == nil:
		return ""
	}
	return e.r.endpoint
}

// failClosed ends the decision with a DENY that says the gate could not
// decide.
func (e *eval) failClosed(stage string, err error) {
	if e.canonical == "" {
		e.canonical = e.c.Tool
	}
	if e.d.Outcome == portcullis.OutcomeStop {
		// Already a hard stop: keep it, and say what else failed.
		e.d.FailClosed = true
		e.d.Trace = append(e.d.Trace, portcullis.TraceEntry{Stage: stage, Result: "failed: " + err.Error(), Level: portcullis.Deny})
		return
	}
	e.level = portcullis.Deny
	e.d.Code = portcullis.CodeFailClosed
	e.d.FailClosed = true
	e.d.Trace = append(e.d.Trace, portcullis.TraceEntry{Stage: stage, Result: "failed closed: " + err.Error(), Level: portcullis.Deny})
	e.d.WhatWouldAuthorize = ""
	e.d.ChallengeID = ""
	src := e.source
	if src == "" {
		src = portcullis.SourceOperationDefault
	}
	e.finish(portcullis.OutcomeDeny, portcullis.Deny, src, e.sourceElement, "the gate could not decide this call ("+stage+" failed), so it is denied: "+err.Error())
}

// shadow turns the evaluated decision into a pass-through that records what
// enforce mode would have done.
func (e *eval) shadow() {
	d := &e.d
	d.Shadow = &portcullis.ShadowResult{
		Outcome:         d.Outcome,
		PermissionLevel: d.PermissionLevel,
		Code:            d.Code,
		Source:          d.Source,
		SourceElement:   d.SourceElement,
		Reason:          d.Reason,
	}
	d.Reason = "shadow mode: let through; enforce mode would " + outcomeVerb(d.Outcome) + ": " + d.Reason
	d.Outcome = portcullis.OutcomeAllow
	d.PermissionLevel = portcullis.AutoApprove
	d.Code = portcullis.CodeNone
	d.Source = portcullis.SourceMode
	d.SourceElement = ""
	d.MatchedPolicy = ""
	d.ChallengeID = ""
	d.WhatWouldAuthorize = ""
	d.FailClosed = false
}

func outcomeVerb(o portcullis.Outcome) string {
	switch o {
	case portcullis.OutcomeAllow:
		return "allow it"
	case portcullis.OutcomeConfirm:
		return "ask a person"
	case portcullis.OutcomeStop:
		return "stop the agent"
	}
	return "deny it"
}

// untrusted returns the call without the fields only a trusted caller may
// set; the run keeps its identity, so its state comes from the store.
func untrusted(c *portcullis.Call) *portcullis.Call {
	if c.ActiveElements == nil && c.Grants == nil && (c.Run == nil || *c.Run == (portcullis.Run{ID: c.Run.ID})) {
		return c
	}
	u := *c
	u.ActiveElements, u.Grants = nil, nil
	if c.Run != nil {
		u.Run = &portcullis.Run{ID: c.Run.ID}
	}
	return &u
}
