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
//
// Beside the engine, for the commands that use it: Load builds a gate from
// a policy file, DecideLines answers a stream of JSON-line requests
// (`portcullis decide`), WriteExplanation writes a decision's trace for
// people (`portcullis explain`). They read and write only what they are
// given; the command line and the environment stay with the caller.
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
	budgets     portcullis.BudgetStore // counts budgets: the store, unless WithBudgetStore
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

// WithBudgetStore counts the policy's budgets in bs rather than in the
// gate's store: a gate without a store (a policy test run) can still count
// them.
func WithBudgetStore(bs portcullis.BudgetStore) Option { return func(g *Gate) { g.budgets = bs } }

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
	if g.budgets == nil && g.store != nil {
		g.budgets = g.store
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
	if g.store != nil && !dry {
		e.start = g.clock.Now()
	}
	e.d.Tool = c.Tool
	defer func() {
		if r := recover(); r != nil {
			e.failClosed("panic", fmt.Errorf("panic: %v", r))
			e.returnBudget(ctx)
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
	if err := e.runPipeline(ctx); err != nil {
		return e.d, err
	}
	e.returnBudget(ctx)
	return e.d, nil
}

// stageID names a stage of the pipeline; runStage maps it to its code.
type stageID uint8

const (
	stageMode stageID = iota
	stageDangerZone
	stageRoute
	stageElements
	stageAutonomy
	stageValidator
	stageBudget
	stageConfirmation
	stageRetryGuard
	stageAudit
)

// pipeline is the decision pipeline of docs/ARCHITECTURE.md ("The
// decision pipeline"), in its order: Decide runs it from the top. The
// name is the stage's in the trace. A stage that ends the decision skips
// the stages after it, except the final ones, which look at the decision
// made (the retry guard, the audit).
var pipeline = [...]struct {
	id    stageID
	name  string
	final bool
}{
	{stageMode, "mode", false},
	{stageDangerZone, "danger_zone", false},
	{stageRoute, "route", false},
	{stageElements, "elements", false},
	{stageAutonomy, "autonomy", false},
	{stageValidator, "validator", false},
	{stageBudget, "budget", false},
	{stageConfirmation, "confirmation", false},
	{stageRetryGuard, "retry_guard", true},
	{stageAudit, "audit", true},
}

// runPipeline runs the stages of the pipeline in its order. Shadow mode
// turns the decision into a pass-through once every stage that decides has
// had its say, before the final stages.
func (e *eval) runPipeline(ctx context.Context) error {
	ended, shadowed := false, false
	for i := range pipeline {
		s := &pipeline[i]
		if s.final && e.mode == portcullis.ModeShadow && !shadowed {
			e.shadow()
			shadowed = true
		}
		if (ended && !s.final) || !e.applies(s.id) {
			continue
		}
		done, err := e.runStage(ctx, s.id)
		e.lap(s.name)
		if err != nil {
			return err
		}
		ended = ended || done
	}
	return nil
}

// applies says whether a stage has anything to do for the call. A stage
// that does not apply leaves no entry in the trace.
func (e *eval) applies(id stageID) bool {
	switch id {
	case stageAutonomy:
		// When the request has a run, and the call is not already denied.
		return e.c.Run != nil && e.level != portcullis.Deny
	case stageValidator:
		return e.level != portcullis.Deny
	case stageBudget:
		// A policy without budgets skips the stage without a store call.
		return len(e.pol.budgets) > 0 && e.level != portcullis.Deny
	case stageRetryGuard:
		// Only in enforce mode: shadow and off remember nothing.
		return e.mode == portcullis.ModeEnforce
	case stageAudit:
		// Every decision of a gate with a store, but not explain and not
		// mode off.
		return e.g.store != nil && !e.explain && e.mode != portcullis.ModeOff
	}
	return true
}

// runStage runs one stage. It returns true when the stage ended the
// decision; an error (an invalid request found by a stage) ends Decide.
func (e *eval) runStage(ctx context.Context, id stageID) (bool, error) {
	switch id {
	case stageMode:
		return e.modeStage(), nil
	case stageDangerZone:
		return e.dangerZone(ctx), nil
	case stageRoute:
		return e.route(), nil
	case stageElements:
		return e.elements()
	case stageAutonomy:
		return e.autonomyStage(ctx), nil
	case stageValidator:
		return e.validatorStage(ctx), nil
	case stageBudget:
		return e.budgetStage(ctx), nil
	case stageConfirmation:
		e.conclude(ctx)
		return true, nil
	case stageRetryGuard:
		e.retryGuard(ctx)
		return false, nil
	case stageAudit:
		e.audit(ctx, e.start)
		return false, nil
	}
	panic("gate: unknown stage " + strconv.Itoa(int(id)))
}

// modeStage applies the policy's mode (or the tool's): off lets the call
// through unevaluated; shadow evaluates it without side effects.
func (e *eval) modeStage() bool {
	mode, modeOf := e.pol.pol.Mode, "policy"
	if e.r != nil && e.r.mode != "" {
		mode, modeOf = e.r.mode, "tool"
	}
	switch mode {
	case portcullis.ModeOff:
		e.mode = portcullis.ModeOff
		e.end(&portcullis.TraceEntry{Stage: "mode", Result: "off (" + modeOf + "): the call is let through unevaluated"}, ending{
			outcome: portcullis.OutcomeAllow, level: portcullis.AutoApprove, source: portcullis.SourceMode,
			reason: "policy mode is off: calls are not evaluated",
		})
		return true
	case portcullis.ModeShadow:
		e.mode = portcullis.ModeShadow
		e.trace("mode", "shadow ("+modeOf+"): evaluated and recorded, but the call is let through")
		e.dry = true
	default:
		e.mode = portcullis.ModeEnforce
		e.trace("mode", "enforce")
	}
	return false
}

// conclude is the confirmation stage: a DENY that no stage ended is
// denied, a CONFIRM_* goes to confirmation, anything else is allowed.
func (e *eval) conclude(ctx context.Context) {
	switch {
	case e.level == portcullis.Deny:
		e.end(nil, ending{outcome: portcullis.OutcomeDeny, level: portcullis.Deny, reason: e.denyReason()})
	case e.level.IsConfirm():
		e.confirmation(ctx)
	default:
		e.end(nil, ending{outcome: portcullis.OutcomeAllow, level: e.level, reason: e.allowReason()})
	}
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
	// mode is the mode the call is decided in (the mode stage's).
	mode portcullis.Mode
	// start is when a decision to be audited began, for its latency.
	start time.Time

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
	// budgetTaken is what the budget stage took from the store, given
	// back at the end unless the call is let through.
	budgetTaken []portcullis.BudgetCharge
	// overBudget: the call does not fit a budget whose over is confirm;
	// overCharges are counted past the limit if a person lets it through,
	// and overReason tells the agent why it waits.
	overBudget  bool
	overCharges []portcullis.BudgetCharge
	overReason  string
}

// trace records a stage's result.
func (e *eval) trace(stage, result string) {
	e.record(portcullis.TraceEntry{Stage: stage, Result: result})
}

// traceFact records a stage's result with facts a program may read.
func (e *eval) traceFact(stage, result string, facts []portcullis.Fact) {
	e.record(portcullis.TraceEntry{Stage: stage, Result: result, Facts: facts})
}

// record appends a stage's trace entry at the call's level so far. Every
// entry of the route stage carries what the route stage found of the
// call's upstream tool (routeFacts). Each entry has its own copy of its
// facts: a caller may change its decision.
func (e *eval) record(t portcullis.TraceEntry) {
	t.Level = e.level
	if t.Stage == "route" {
		t.Facts, t.Upstream = e.routeFacts, e.routeUpstream
	}
	t.Facts = slices.Clone(t.Facts)
	e.d.Trace = append(e.d.Trace, t)
}

// ending is how a stage ends the decision.
type ending struct {
	outcome portcullis.Outcome
	level   portcullis.Level
	code    portcullis.Code
	// source is the decision's source; empty: the one the stages so far
	// set (e.source).
	source portcullis.Source
	// reason is for the agent; authorize is what would let the call
	// through (Decision.WhatWouldAuthorize).
	reason, authorize string
	// challenge is the challenge or approval request behind the decision;
	// empty keeps the one already set.
	challenge  string
	failClosed bool
}

// end ends the decision: it records the stage's trace entry t (nil: the
// stage's entry is the last one already recorded), marks that entry as the
// one that decided, at the decision's level, and sets the decision's
// outcome, level, code, source, reason and what would authorize it. Every
// stage ends a decision through end; no other code sets these fields
// (shadow mode aside, which rewrites the decision made).
func (e *eval) end(t *portcullis.TraceEntry, x ending) {
	if t != nil {
		e.record(*t)
	}
	src := x.source
	if src == "" {
		src = e.source
	}
	e.level = x.level
	e.d.Outcome = x.outcome
	e.d.PermissionLevel = x.level
	e.d.Code = x.code
	e.d.Source = src
	e.d.SourceElement = e.sourceElement
	e.d.Reason = x.reason
	e.d.MatchedPolicy = e.matchedPolicy
	e.d.ConflictingElements = e.conflicts
	e.d.Tool = e.canonical
	e.d.Endpoint = e.endpoint()
	e.d.Risk = e.risk
	e.d.WhatWouldAuthorize = x.authorize
	if x.challenge != "" {
		e.d.ChallengeID = x.challenge
	}
	if x.failClosed {
		e.d.FailClosed = true
	}
	if n := len(e.d.Trace); n > 0 {
		e.d.Trace[n-1].Decided = true
		e.d.Trace[n-1].Level = x.level
	}
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
	e.d.ChallengeID = ""
	src := e.source
	if src == "" {
		src = portcullis.SourceOperationDefault
	}
	e.end(&portcullis.TraceEntry{Stage: stage, Result: "failed closed: " + err.Error()}, ending{
		outcome: portcullis.OutcomeDeny, level: portcullis.Deny, code: portcullis.CodeFailClosed, source: src,
		reason:     "the gate could not decide this call (" + stage + " failed), so it is denied: " + err.Error(),
		failClosed: true,
	})
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
