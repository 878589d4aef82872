package gate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/portcullis/portcullis"
)

// WithValidator gives the gate the independent LLM validator of stage 6.
// A policy with a `validator` block and a gate without one denies every
// call in the validator's scope (fail closed).
func WithValidator(v portcullis.Validator) Option { return func(g *Gate) { g.validator = v } }

// migrationPrefix marks a run's trigger as a declared migration:
// `run.trigger: "migration:add-tentative-default"`.
const migrationPrefix = "migration:"

// inValidatorScope reports whether the policy's validator judges this call:
// by default risk external-write and policy-write; the scope may add tools
// and every shell command.
func (e *eval) inValidatorScope() bool {
	cfg := e.pol.pol.Validator
	if cfg == nil {
		return false
	}
	sc := cfg.Scope
	risks := sc.Risks
	if len(risks) == 0 && len(sc.Tools) == 0 && !sc.Shell {
		risks = []portcullis.Risk{portcullis.RiskExternalWrite, portcullis.RiskPolicyWrite}
	}
	if e.risk != "" && slices.Contains(risks, e.risk) {
		return true
	}
	if slices.Contains(sc.Tools, e.canonical) {
		return true
	}
	return sc.Shell && e.r != nil && e.r.shellArg != ""
}

// migrationBypass reports whether the call is a declared migration writing
// one of its declared paths: it skips the validator (still audited). A
// migration that reaches an external-write tool is a contract violation: it
// is logged and goes through the validator.
func (e *eval) migrationBypass() (string, bool) {
	run := e.c.Run
	if run == nil || !strings.HasPrefix(run.Trigger, migrationPrefix) {
		return "", false
	}
	name := strings.TrimPrefix(run.Trigger, migrationPrefix)
	var paths []string
	found := false
	for _, m := range e.pol.pol.Migrations {
		if m.Name == name {
			paths, found = m.Paths, true
			break
		}
	}
	if !found {
		return "", false
	}
	if e.risk == portcullis.RiskExternalWrite {
		e.g.log.Error("migration reached an external-write tool: contract violation, routed to the validator",
			"migration", name, "tool", e.canonical, "decision", e.d.DecisionID)
		return "", false
	}
	if e.r == nil || e.r.pathArg == "" {
		return "", false
	}
	path, _ := e.c.Args[e.r.pathArg].(string)
	for _, p := range paths {
		if path != "" && cleanPath(path) == cleanPath(p) {
			return name, true
		}
	}
	return "", false
}

// contextSource is who stated the call's conversation and userPresent, as
// the gate goes by it: an agent the policy trusts to state them
// (validator.trustedContext) is an integrator; an unset source is the
// in-process caller.
func (e *eval) contextSource() portcullis.ContextSource {
	switch src := e.c.ContextSource; src {
	case "":
		return portcullis.ContextCaller
	case portcullis.ContextAgent:
		if cfg := e.pol.pol.Validator; cfg != nil && e.c.Agent != "" && slices.Contains(cfg.TrustedContext, e.c.Agent) {
			return portcullis.ContextIntegrator
		}
		return src
	default:
		return src
	}
}

// validatorStage asks the validator about a call in its scope. Deny →
// DENY (VALIDATOR_DENIED); an answer it could not give → DENY with
// failClosed; allow → the level stands (an allow never lowers it). It
// returns true when it ended the decision.
func (e *eval) validatorStage(ctx context.Context) bool {
	if !e.inValidatorScope() {
		return false
	}
	if name, ok := e.migrationBypass(); ok {
		e.verdict = &portcullis.ValidatorRecord{Verdict: "migration-bypass"}
		e.trace("validator", "migration-bypass: migration "+quote(name)+" writes one of its declared paths")
		return false
	}
	if e.g.validator == nil {
		e.source, e.sourceElement, e.matchedPolicy, e.conflicts = portcullis.SourceValidator, "", "", nil
		e.end(&portcullis.TraceEntry{Stage: "validator", Result: "the policy configures a validator, but this gate has none: fail closed", Facts: factsNoVerdict}, ending{
			outcome: portcullis.OutcomeDeny, level: portcullis.Deny, code: portcullis.CodeFailClosed,
			reason:     "Operation " + e.quotedTool() + " must be checked by the validator, which is not available, so it is denied",
			authorize:  "the validator being available again",
			failClosed: true,
		})
		return true
	}
	req := portcullis.ValidationRequest{
		Tool:        e.canonical,
		Summary:     e.actionSummary(),
		Args:        e.c.Args,
		Risk:        e.risk,
		PolicyWrite: e.risk == portcullis.RiskPolicyWrite,
	}
	req.Agent = e.c.Agent
	if cfg := e.pol.pol.Validator; cfg.Mode == string(portcullis.ValidateContextual) {
		req.Mode = portcullis.ValidateContextual
		req.Conversation = e.c.Conversation
		req.UserPresent = e.c.UserPresent
		req.ContextSource = e.contextSource()
		if e.c.Run != nil {
			req.Trigger = e.c.Run.Trigger
		}
	} else {
		req.Mode = portcullis.ValidateStateless
	}
	v, err := e.g.validator.Validate(ctx, req)
	if err != nil {
		v = portcullis.Verdict{FailClosed: true, Reasoning: "the validator failed: " + err.Error()}
	}
	e.verdict = &portcullis.ValidatorRecord{
		Provider: v.Provider, Model: v.Model, PromptHash: v.PromptHash, Confidence: v.Confidence,
		LatencyNS: int64(v.Latency), Cached: v.Cached, FailClosed: v.FailClosed, OverBudget: v.OverBudget, Verdict: "deny",
	}
	conf := strconv.FormatFloat(v.Confidence, 'f', -1, 64)
	switch {
	case v.FailClosed:
		e.source, e.sourceElement, e.matchedPolicy, e.conflicts = portcullis.SourceValidator, "", "", nil
		authorize := "the validator answering; try again later"
		if v.OverBudget {
			authorize = "waiting: the validator's budget for this agent is spent; try again later, not at once"
		}
		e.end(&portcullis.TraceEntry{Stage: "validator", Result: "no verdict (" + v.Reasoning + "): fail closed", Facts: factsNoVerdict}, ending{
			outcome: portcullis.OutcomeDeny, level: portcullis.Deny, code: portcullis.CodeFailClosed,
			reason:     "Operation " + e.quotedTool() + " is denied: the validator could not judge it (" + v.Reasoning + ")",
			authorize:  authorize,
			failClosed: true,
		})
		return true
	case !v.Allow:
		e.source, e.sourceElement, e.matchedPolicy, e.conflicts = portcullis.SourceValidator, "", "", nil
		e.end(&portcullis.TraceEntry{Stage: "validator", Result: "deny (confidence " + conf + "): " + v.Reasoning}, ending{
			outcome: portcullis.OutcomeDeny, level: portcullis.Deny, code: portcullis.CodeValidatorDenied,
			reason:    "The validator denied " + e.quotedTool() + ": " + v.Reasoning,
			authorize: v.WhatWouldAuthorize,
		})
		return true
	}
	e.verdict.Verdict = "allow"
	e.trace("validator", "allow (confidence "+conf+"): "+v.Reasoning)
	return false
}

// factsNoVerdict marks a validator stage that had no verdict to give.
var factsNoVerdict = []portcullis.Fact{portcullis.FactNoVerdict}

// retryGuard remembers a denial per run, session or agent by action
// signature: the tool, its arguments and the latest user message. The
// second identical denied attempt with no new user input is a stop
// (RETRY_LOOP): the agent must wait for the user, not ask a third time.
// Without a run or a session the memo is the agent's, so dropping the
// session does not reset it; arguments that differ only in whitespace or
// in the order of keys (also inside JSON held in a string) are the same
// action; and a "user" message the agent stated itself (contextSource
// agent) is not new user input.
func (e *eval) retryGuard(ctx context.Context) {
	st := e.g.store
	// A refusal for too many waiting requests is not remembered: it
	// passes once a person has answered them; nor is one for a spent
	// budget: it passes once the window reopens, which the agent is told.
	if st == nil || e.dry || e.d.Outcome != portcullis.OutcomeDeny || e.d.FailClosed || e.d.Code == portcullis.CodePendingLimit || e.d.Code == portcullis.CodeBudgetExceeded {
		return
	}
	key := e.c.Session
	switch {
	case e.c.Run != nil && e.c.Run.ID != "":
		key = "run:" + e.c.Run.ID
	case key == "" && e.c.Agent != "":
		key = "agent:" + e.c.Agent
	}
	if key == "" {
		return
	}
	sig, err := actionSignature(e.canonical, e.c.Args)
	if err != nil {
		return
	}
	h := sha256.New()
	h.Write([]byte(sig + "\n"))
	if e.contextSource().Trusted() {
		for i := len(e.c.Conversation) - 1; i >= 0; i-- {
			if m := e.c.Conversation[i]; m.Role == "user" {
				h.Write([]byte(m.Content))
				break
			}
		}
	}
	sig = hex.EncodeToString(h.Sum(nil))
	n, err := st.RecordDenial(ctx, key, sig, e.g.clock.Now())
	if err != nil {
		e.d.Trace = append(e.d.Trace, portcullis.TraceEntry{Stage: "retry_guard", Result: "could not record the denial: " + err.Error(), Level: portcullis.Deny})
		return
	}
	if n < 2 {
		e.d.Trace = append(e.d.Trace, portcullis.TraceEntry{Stage: "retry_guard", Result: "first denial of this action", Level: portcullis.Deny})
		return
	}
	first := e.d.Reason
	for i := range e.d.Trace {
		e.d.Trace[i].Decided = false
	}
	e.source = portcullis.SourceRetryGuard
	e.matchedPolicy, e.sourceElement, e.conflicts = "", "", nil
	e.end(&portcullis.TraceEntry{Stage: "retry_guard", Result: "denied " + strconv.Itoa(n) + " times with no new user input: stop"}, ending{
		outcome: portcullis.OutcomeStop, level: portcullis.Deny, code: portcullis.CodeRetryLoop,
		reason:    "This action was already denied (" + first + "). Do not propose it again: tell the user and wait for their answer.",
		authorize: "new input from the user",
	})
}

// actionSignature is the retry guard's name for an action: the tool and
// the digest of its arguments with every string's whitespace collapsed and
// JSON held in a string re-encoded canonically (keys sorted), so that a
// trivially varied retry is the same action.
func actionSignature(tool string, args map[string]any) (string, error) {
	norm, _ := normalizeArg(args).(map[string]any)
	digest, err := portcullis.ArgsDigest(norm)
	if err != nil {
		return "", err
	}
	return tool + "\n" + digest, nil
}

// normalizeArg is v with its strings' whitespace collapsed, recursively; a
// string that holds a JSON object or array is replaced by its normalized
// value.
func normalizeArg(v any) any {
	switch x := v.(type) {
	case string:
		if t := strings.TrimSpace(x); strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[") {
			dec := json.NewDecoder(strings.NewReader(t))
			dec.UseNumber()
			var inner any
			if dec.Decode(&inner) == nil {
				if _, err := dec.Token(); err != io.EOF {
					return strings.Join(strings.Fields(x), " ")
				}
				return map[string]any{"json": normalizeArg(inner)}
			}
		}
		return strings.Join(strings.Fields(x), " ")
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			out[k] = normalizeArg(val)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, val := range x {
			out[i] = normalizeArg(val)
		}
		return out
	default:
		return v
	}
}

func cleanPath(p string) string { return filepath.Clean(strings.TrimSpace(p)) }
