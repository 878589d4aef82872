package validator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/validator/internal/failure"
)

// Config configures a Validator. The zero value of each field is its
// default.
type Config struct {
	// Mode is what the model sees unless a request says otherwise:
	// portcullis.ValidateStateless (the default) or ValidateContextual.
	Mode portcullis.ValidationMode
	// RulesFile is the ground rules file of the stateless mode (`rules`).
	// PolicyDocument is the user's prose policy of the contextual mode
	// (`policyDocument`). The file of the configured mode is required; each
	// is read again whenever its modification time or size changes, and a
	// missing, unreadable or empty (whitespace-only) file denies every
	// action fail-closed.
	RulesFile      string
	PolicyDocument string
	// Timeout bounds one validation, retries included; the model call is
	// cancelled then and the action denied fail-closed. Default 10s.
	Timeout time.Duration
	// Retries is how many times an error the Model reports as retryable
	// (see Retryable) is retried, with a short backoff, within Timeout.
	// 0 means the default of 2; a negative value means no retry.
	Retries int
	// CacheTTL is how long a well-formed verdict is reused for an identical
	// request. 0 means the default of 10m; a negative value disables the
	// cache (identical concurrent requests still share one model call).
	CacheTTL time.Duration
	// MinConfidence, when above 0, turns an allow whose confidence is below
	// it into a deny (not fail-closed: the model did judge; the deny is
	// cached like any verdict). The default is no floor: the model is told
	// to deny when unsure, and an allow is never more than "no objection"
	// to a level the gate computed before.
	MinConfidence float64
	// PolicyHash identifies the policy in force; it is part of the cache
	// key, so a policy change does not reuse old verdicts.
	PolicyHash string
	// Budget bounds the model calls made for one agent; past it a request
	// is denied fail-closed with OverBudget set and a reason telling the
	// agent to wait. The zero value is the default budget.
	Budget Budget
	// Clock tells the time for the cache, the budget and the latency;
	// default the wall clock.
	Clock portcullis.Clock
	// Logger receives one event per validation that failed closed; default
	// none.
	Logger *slog.Logger
}

// The defaults of Config.
const (
	DefaultTimeout  = 10 * time.Second
	DefaultRetries  = 2
	DefaultCacheTTL = 10 * time.Minute
)

// retryBackoff is the wait before the first retry; it doubles after each.
const retryBackoff = 50 * time.Millisecond

// Validator is the LLM validator on top of a portcullis.Model. It is safe
// for concurrent use.
type Validator struct {
	model     portcullis.Model
	name      string // model.Name()
	provider  string // before the first "/" of name
	modelName string // after it
	cfg       Config
	retries   int
	stateless rulesFile
	policy    rulesFile

	mu      sync.Mutex
	cache   cache
	flights map[key]*flight
	budgets map[string]*agentBudget
}

var _ portcullis.Validator = (*Validator)(nil)

// New returns a Validator that asks m. It checks cfg: an unknown mode, a
// negative timeout, or no rules file for the configured mode is an error.
func New(m portcullis.Model, cfg Config) (*Validator, error) {
	if m == nil {
		return nil, errors.New("validator: no model")
	}
	switch cfg.Mode {
	case "":
		cfg.Mode = portcullis.ValidateStateless
	case portcullis.ValidateStateless, portcullis.ValidateContextual:
	default:
		return nil, fmt.Errorf("validator: unknown mode %q (want stateless or contextual)", cfg.Mode)
	}
	switch {
	case cfg.Mode == portcullis.ValidateStateless && cfg.RulesFile == "":
		return nil, errors.New("validator: the stateless mode needs a ground rules file (validator.rules)")
	case cfg.Mode == portcullis.ValidateContextual && cfg.PolicyDocument == "":
		return nil, errors.New("validator: the contextual mode needs the prose policy document (policyDocument)")
	case cfg.Timeout < 0:
		return nil, fmt.Errorf("validator: negative timeout %v", cfg.Timeout)
	case cfg.MinConfidence < 0 || cfg.MinConfidence > 1:
		return nil, fmt.Errorf("validator: minimum confidence %v is not between 0 and 1", cfg.MinConfidence)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.CacheTTL == 0 {
		cfg.CacheTTL = DefaultCacheTTL
	}
	if cfg.Clock == nil {
		cfg.Clock = portcullis.SystemClock{}
	}
	cfg.Budget = cfg.Budget.withDefaults()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	retries := cfg.Retries
	switch {
	case retries == 0:
		retries = DefaultRetries
	case retries < 0:
		retries = 0
	}
	v := &Validator{
		model:     m,
		name:      m.Name(),
		cfg:       cfg,
		retries:   retries,
		stateless: rulesFile{path: cfg.RulesFile},
		policy:    rulesFile{path: cfg.PolicyDocument},
		flights:   make(map[key]*flight),
		budgets:   make(map[string]*agentBudget),
	}
	v.provider, v.modelName, _ = strings.Cut(v.name, "/")
	if v.modelName == "" {
		v.modelName = v.name
	}
	return v, nil
}

// Validate judges one action. It returns an allow only for a well-formed
// allow from the model; every failure is a deny with FailClosed set and a
// nil error. The error is non-nil (code INVALID_REQUEST) only for a request
// that is itself invalid — no tool, or an unknown mode — and the verdict is
// then a fail-closed deny too.
func (v *Validator) Validate(ctx context.Context, req portcullis.ValidationRequest) (vd portcullis.Verdict, err error) {
	start := v.cfg.Clock.Now()
	defer func() {
		if r := recover(); r != nil {
			// Validate itself must never panic outward.
			v.cfg.Logger.Error("validator panicked", "model", v.name, "detail", failure.Mask(fmt.Sprint(r)))
			vd, err = v.failClosed(start, "", "the validator failed internally; the call is refused"), nil
		}
	}()
	mode := req.Mode
	if mode == "" {
		mode = v.cfg.Mode
	}
	var rules *rulesFile
	switch mode {
	case portcullis.ValidateStateless:
		rules = &v.stateless
	case portcullis.ValidateContextual:
		rules = &v.policy
	default:
		err := portcullis.Errorf(portcullis.CodeInvalidRequest, "unknown validation mode %q (want stateless or contextual)", mode)
		return v.failClosed(start, "", err.Error()), err
	}
	if req.Tool == "" {
		err := portcullis.Errorf(portcullis.CodeInvalidRequest, "validation request without a tool")
		return v.failClosed(start, "", err.Error()), err
	}

	text, rulesHash, rerr := rules.load()
	if rerr != nil {
		return v.failClosed(start, "", "no rules to judge by: "+rerr.Error()), nil
	}
	vw, verr := makeView(mode, text, &req)
	if verr != nil {
		return v.failClosed(start, "", verr.Error()), nil
	}
	k := v.cacheKey(vw, rulesHash)

	v.mu.Lock()
	if v.cfg.CacheTTL > 0 {
		if cached, ok := v.cache.get(k, start); ok {
			v.mu.Unlock()
			cached.Cached = true
			cached.Latency = v.cfg.Clock.Now().Sub(start)
			return cached, nil
		}
	}
	f := v.flights[k]
	if f == nil {
		// Only a new model call costs the agent's budget.
		if why, ok := v.spend(req.Agent, start); !ok {
			v.mu.Unlock()
			vd := v.failClosed(start, "", why)
			vd.OverBudget = true
			return vd, nil
		}
		f = v.startFlight(ctx, k, vw, req.Agent)
	}
	f.waiters++
	v.mu.Unlock()

	select {
	case <-f.done:
	case <-ctx.Done():
		v.leave(k, f)
		return v.failClosed(start, f.promptHash, "the validation was abandoned: "+ctxReason(ctx.Err(), 0)), nil
	case <-f.ctx.Done():
		select {
		case <-f.done:
		default:
			// The model ignores its context; do not wait for it.
			v.leave(k, f)
			return v.failClosed(start, f.promptHash, ctxReason(f.ctx.Err(), v.cfg.Timeout)), nil
		}
	}
	v.leave(k, f)
	out := f.verdict
	out.Latency = v.cfg.Clock.Now().Sub(start)
	return out, nil
}

// makeView checks the request's size and gathers what the model is shown.
func makeView(mode portcullis.ValidationMode, rules string, req *portcullis.ValidationRequest) (*view, error) {
	args, err := canonicalArgs(req.Args)
	if err != nil {
		return nil, fmt.Errorf("the action's arguments cannot be shown to the validator: %v", err)
	}
	if n := len(req.Tool) + len(req.Summary) + len(args); n > maxActionBytes {
		return nil, fmt.Errorf("the action is %d KiB, more than the validator judges (%d KiB)", n>>10, maxActionBytes>>10)
	}
	vw := &view{
		mode:        mode,
		rules:       rules,
		tool:        req.Tool,
		summary:     req.Summary,
		risk:        req.Risk,
		args:        args,
		policyWrite: req.PolicyWrite,
	}
	if mode == portcullis.ValidateContextual {
		vw.trusted = req.ContextSource.Trusted()
		vw.source = req.ContextSource
		if vw.source == "" {
			vw.source = portcullis.ContextCaller
		}
		vw.convo, vw.omittedUser, vw.omittedOther = window(req.Conversation, vw.trusted)
		vw.trigger = cut(req.Trigger, maxTriggerBytes)
		vw.userPresent = req.UserPresent
	}
	return vw, nil
}

// canonicalArgs is the arguments' canonical JSON: keys sorted, no HTML
// escaping, "{}" for none.
func canonicalArgs(args map[string]any) ([]byte, error) {
	if len(args) == 0 {
		return []byte("{}"), nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(args); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// flight is one model call, shared by identical concurrent requests.
type flight struct {
	ctx        context.Context
	cancel     context.CancelFunc
	done       chan struct{}
	promptHash string // set before the flight starts
	agent      string // whose budget the call is spent from
	verdict    portcullis.Verdict
	waiters    int // guarded by Validator.mu
}

// startFlight starts the model call for k. v.mu is held.
func (v *Validator) startFlight(ctx context.Context, k key, vw *view, agent string) *flight {
	p := buildPrompt(vw)
	// The call outlives any one caller (others may share it) but not the
	// timeout, and is cancelled when every caller has gone.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), v.cfg.Timeout)
	f := &flight{ctx: fctx, cancel: cancel, done: make(chan struct{}), promptHash: p.hash, agent: agent}
	v.flights[k] = f
	go v.run(k, f, p)
	return f
}

// leave drops one waiter; the last one cancels an unfinished call.
func (v *Validator) leave(k key, f *flight) {
	v.mu.Lock()
	defer v.mu.Unlock()
	f.waiters--
	if f.waiters == 0 {
		f.cancel()
		if v.flights[k] == f {
			delete(v.flights, k)
		}
	}
}

// run makes the model call with its retries, parses the answer, and caches
// a well-formed verdict.
func (v *Validator) run(k key, f *flight, p prompt) {
	start := v.cfg.Clock.Now()
	vd, ok, detail := v.judge(f.ctx, p)
	vd.Provider, vd.PromptHash = v.provider, p.hash
	if vd.Model == "" {
		vd.Model = v.modelName
	}
	if !ok {
		vd.Allow, vd.FailClosed, vd.WhatWouldAuthorize = false, true, failClosedWWA
		attrs := []any{"model", v.name, "reason", vd.Reasoning, "promptHash", p.hash}
		if detail != "" {
			attrs = append(attrs, "detail", detail)
		}
		v.cfg.Logger.Warn("validator failed closed", attrs...)
	}
	v.mu.Lock()
	if ok && v.cfg.CacheTTL > 0 {
		v.cache.put(k, vd, start.Add(v.cfg.CacheTTL))
	}
	if v.flights[k] == f {
		delete(v.flights, k)
	}
	v.refund(f.agent)
	f.verdict = vd
	v.mu.Unlock()
	close(f.done)
	f.cancel()
}

// judge asks the model, retrying retryable errors, and returns the verdict,
// whether it is well-formed (cacheable), and for a failed call the detail
// for operators (the provider's error, credentials masked), which the
// verdict does not carry: the agent is told a fixed text.
func (v *Validator) judge(ctx context.Context, p prompt) (portcullis.Verdict, bool, string) {
	var (
		ans      portcullis.ModelAnswer
		err      error
		attempts int
		backoff  = retryBackoff
	)
	for attempts = 1; ; attempts++ {
		ans, err = v.ask(ctx, p)
		if err == nil || ctx.Err() != nil || attempts > v.retries || !IsRetryable(err) {
			break
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
		if ctx.Err() != nil {
			break
		}
		backoff *= 2
	}
	var detail string
	if err != nil {
		detail = fmt.Sprintf("%s (%d attempts)", failure.Mask(cut(err.Error(), 2000)), attempts)
	}
	switch {
	case ctx.Err() != nil:
		return portcullis.Verdict{Reasoning: ctxReason(ctx.Err(), v.cfg.Timeout)}, false, detail
	case errors.Is(err, errPanic):
		return portcullis.Verdict{Reasoning: "the validator failed internally; the call is refused"}, false, detail
	case err != nil:
		return portcullis.Verdict{Reasoning: v.unavailable(err)}, false, detail
	}
	a, perr := parseAnswer(ans)
	vd := portcullis.Verdict{Model: ans.Model}
	if perr != nil {
		vd.Reasoning = "the validator's answer is not a clear verdict: " + failure.Mask(perr.Error())
		return vd, false, ""
	}
	vd.Allow, vd.Reasoning, vd.WhatWouldAuthorize, vd.Confidence = a.allow, a.reasoning, a.whatWouldAuthorize, a.confidence
	if vd.Allow && a.confidence < v.cfg.MinConfidence {
		vd.Allow = false
		vd.Reasoning = fmt.Sprintf("the validator allowed with confidence %.2f, below the required %.2f: %s", a.confidence, v.cfg.MinConfidence, a.reasoning)
	}
	return vd, true, ""
}

// unavailable is what the agent is told of a model call that failed: a
// fixed text with the HTTP status, when there is one, and nothing of the
// provider's own text, which may echo a key or the prompt.
func (v *Validator) unavailable(err error) string {
	var hs interface{ HTTPStatus() int }
	if errors.As(err, &hs) && hs.HTTPStatus() > 0 {
		return fmt.Sprintf("the validator is unavailable (HTTP %d); the call is refused", hs.HTTPStatus())
	}
	if v.provider == "command" {
		return "the validator's program failed; the call is refused"
	}
	return "the validator is unreachable; the call is refused"
}

var errPanic = errors.New("the model panicked")

// ask calls the model, turning a panic into an error.
func (v *Validator) ask(ctx context.Context, p prompt) (ans portcullis.ModelAnswer, err error) {
	defer func() {
		if r := recover(); r != nil {
			ans, err = portcullis.ModelAnswer{}, fmt.Errorf("%w: %v", errPanic, r)
		}
	}()
	return v.model.Ask(ctx, p.ModelPrompt)
}

// ctxReason says why a context ended.
func ctxReason(err error, timeout time.Duration) string {
	if errors.Is(err, context.DeadlineExceeded) {
		if timeout > 0 {
			return fmt.Sprintf("the validator timed out after %v", timeout)
		}
		return "the caller's deadline passed"
	}
	return "the validation was cancelled"
}

// failClosedWWA is the whatWouldAuthorize of a fail-closed deny.
const failClosedWWA = "nothing the agent can say: the validator could not judge the action; a person can retry it or approve it out of band"

// failClosed is a deny for an action the validator could not judge.
func (v *Validator) failClosed(start time.Time, promptHash, reason string) portcullis.Verdict {
	v.cfg.Logger.Warn("validator failed closed", "model", v.name, "reason", failure.Mask(reason))
	return portcullis.Verdict{
		Reasoning:          reason,
		WhatWouldAuthorize: failClosedWWA,
		FailClosed:         true,
		Provider:           v.provider,
		Model:              v.modelName,
		PromptHash:         promptHash,
		Latency:            v.cfg.Clock.Now().Sub(start),
	}
}
