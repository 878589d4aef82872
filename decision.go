package portcullis

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// Code is a machine-readable reason for a decision or an error.
type Code string

// Decision codes (the contract) and error codes.
const (
	CodeNone                   Code = ""
	CodeUnknownOperation       Code = "UNKNOWN_OPERATION"
	CodeElementPolicyViolation Code = "ELEMENT_POLICY_VIOLATION"
	CodeScopeRestriction       Code = "SCOPE_RESTRICTION"
	CodeConfirmationRequired   Code = "CONFIRMATION_REQUIRED"
	CodeSandboxed              Code = "SANDBOXED"
	CodeAutonomyPause          Code = "AUTONOMY_PAUSE"
	CodeDangerZone             Code = "DANGER_ZONE"
	CodeValidatorDenied        Code = "VALIDATOR_DENIED"
	CodeFailClosed             Code = "FAIL_CLOSED"
	CodeRetryLoop              Code = "RETRY_LOOP"
	CodeBlockedCommand         Code = "BLOCKED_COMMAND"
	// CodePendingLimit (an extension of the contract): the call needs a
	// person, but its agent (or session) already has as many approval
	// requests waiting as the policy allows; no request was made. Outcome
	// deny; the call may pass once a person has answered the waiting ones.
	CodePendingLimit Code = "PENDING_LIMIT"

	// CodeInvalidRequest is an error code: the request itself is malformed.
	CodeInvalidRequest Code = "INVALID_REQUEST"
	// CodeInvalidPolicy is an error code: the policy file does not load.
	CodeInvalidPolicy Code = "INVALID_POLICY"
	// CodeNotFound is an error code: the named thing does not exist.
	CodeNotFound Code = "NOT_FOUND"
	// CodeVerificationFailed is an error code: a wrong or expired
	// verification code.
	CodeVerificationFailed Code = "VERIFICATION_FAILED"
	// CodeRateLimited is an error code: too many attempts; wait.
	CodeRateLimited Code = "RATE_LIMITED"
	// CodeConflict is an error code: the thing was changed by someone else
	// first (an approval already decided).
	CodeConflict Code = "CONFLICT"
)

// Decision is the gate's answer for one call. Its JSON form is the contract
// of `portcullis decide` and `POST /v1/decide`.
type Decision struct {
	DecisionID      string  `json:"decisionId"`
	Outcome         Outcome `json:"outcome"`
	PermissionLevel Level   `json:"permissionLevel"`
	Code            Code    `json:"code"`
	Reason          string  `json:"reason"`
	Source          Source  `json:"source"`
	SourceElement   string  `json:"sourceElement"`
	// MatchedPolicy is the element list that decided: allow, confirm, deny or
	// scope_restriction.
	MatchedPolicy       string     `json:"matchedPolicy"`
	ConflictingElements []Conflict `json:"conflictingElements"`
	// ChallengeID identifies the approval request (outcome confirm) or the
	// danger-zone challenge (outcome stop). The verification code itself never
	// appears in a Decision.
	ChallengeID        string       `json:"challengeId"`
	WhatWouldAuthorize string       `json:"whatWouldAuthorize"`
	FailClosed         bool         `json:"failClosed"`
	Trace              []TraceEntry `json:"trace"`

	// Extensions of the contract.

	// Tool is the canonical name the call resolved to (aliases resolved).
	Tool string `json:"tool,omitempty"`
	// Endpoint is the call's classification; empty when unclassified.
	Endpoint Endpoint `json:"endpoint,omitempty"`
	// Risk is the call's risk annotation, after dynamic upgrades.
	Risk Risk `json:"risk,omitempty"`
	// Shadow, in shadow mode, is what would have been decided in enforce
	// mode. The call itself is allowed.
	Shadow *ShadowResult `json:"shadow,omitempty"`
}

// Conflict names an element whose allow was overridden by another element's
// confirm.
type Conflict struct {
	Name        string `json:"name"`
	WantedLevel Level  `json:"wantedLevel"`
}

// TraceEntry is one stage's contribution to a decision. Result is written
// for people and may be reworded in any release; what a program needs to
// read from a trace (policy replay does) is in Facts, Upstream and Step.
type TraceEntry struct {
	Stage  string `json:"stage"`
	Result string `json:"result"`
	// Level is the permission level after the stage, when the stage set one.
	Level Level `json:"level,omitempty"`
	// Decided is true on the stage that ended the decision.
	Decided bool `json:"decided,omitempty"`

	// Extensions of the contract.

	// Facts are what the stage found, as stable names (see Fact).
	Facts []Fact `json:"facts,omitempty"`
	// Upstream is the MCP server whose pinned annotations classified the
	// tool (route stage, with FactUpstreamAnnotated).
	Upstream string `json:"upstream,omitempty"`
	// Step is the run step the autonomy stage judged.
	Step int `json:"step,omitempty"`
}

// Has reports whether the entry records fact f.
func (t TraceEntry) Has(f Fact) bool { return slices.Contains(t.Facts, f) }

// Fact is a stable name for something a stage found, recorded in its trace
// entry so that programs reading a trace (policy replay, audit queries)
// need not match the entry's prose.
type Fact string

// The facts the stages record.
const (
	// FactUpstreamMissing (route): no upstream server offers a tool of the
	// call's name; the call is denied.
	FactUpstreamMissing Fact = "upstream-missing"
	// FactUpstreamAnnotated (route): the policy does not name the tool, and
	// it was classified from the MCP annotations pinned for the upstream
	// server the entry's Upstream names, which the operator trusts.
	FactUpstreamAnnotated Fact = "upstream-annotated"
	// FactDestructiveHint (route): the destructiveHint of the upstream the
	// entry's Upstream names raised a tool the policy names to
	// CONFIRM_SINGLE_USE (a server's hint only ever makes a tool stricter).
	FactDestructiveHint Fact = "destructive-hint"
	// FactOpenWorldHint (route): the openWorldHint of the upstream the
	// entry's Upstream names gave a tool the policy does not name risk
	// external-write.
	FactOpenWorldHint Fact = "open-world-hint"
	// FactDefinitionChanged (route): the upstream tool's definition changed
	// since it was pinned; the call needs CONFIRM_SINGLE_USE and is not
	// elevatable until a person accepts the change.
	FactDefinitionChanged Fact = "definition-changed"
	// FactToolNew (route): the tool first appeared after its upstream's
	// tool set was pinned; the call needs CONFIRM_SINGLE_USE and is not
	// elevatable until a person accepts the tool.
	FactToolNew Fact = "tool-new"
	// FactOutsideWorkdir (route): the write's path is not inside the
	// call's working directory (or the working directory is unknown or
	// not believed), and the tool's outsideWorkdir level applied.
	FactOutsideWorkdir Fact = "outside-workdir"
	// FactNoVerdict (validator): the validator gave no verdict; the call is
	// denied, fail closed.
	FactNoVerdict Fact = "no-verdict"
	// FactRunStateFromStore (autonomy): the run's step count and previous
	// outcome came from the store, not the request; the entry's Step is
	// the step judged.
	FactRunStateFromStore Fact = "run-state-from-store"
	// FactNotRecorded (audit): the decision's audit row could not be
	// written; an allow became a fail-closed deny. This entry is in the
	// decision returned, never in an audit row.
	FactNotRecorded Fact = "not-recorded"
)

// ShadowResult is the decision enforce mode would have made.
type ShadowResult struct {
	Outcome         Outcome `json:"outcome"`
	PermissionLevel Level   `json:"permissionLevel"`
	Code            Code    `json:"code"`
	Source          Source  `json:"source"`
	SourceElement   string  `json:"sourceElement,omitempty"`
	Reason          string  `json:"reason"`
}

// MarshalJSON writes every contract field, with empty lists as [] rather
// than null.
func (d Decision) MarshalJSON() ([]byte, error) {
	return json.Marshal(decisionFields(d))
}

// decisionJSON is a Decision without its MarshalJSON method: the fields
// as the encoder writes them.
type decisionJSON Decision

// decisionFields is d ready to encode, with empty lists as [] rather than
// null.
func decisionFields(d Decision) decisionJSON {
	p := decisionJSON(d)
	if p.ConflictingElements == nil {
		p.ConflictingElements = []Conflict{}
	}
	if p.Trace == nil {
		p.Trace = []TraceEntry{}
	}
	return p
}

// Allowed reports whether the call may be forwarded now.
func (d *Decision) Allowed() bool { return d.Outcome == OutcomeAllow }

// Error is an error a user may see, with a code the edges map to an exit
// status, an HTTP status or a JSON-RPC error.
type Error struct {
	Code    Code
	Message string
}

func (e *Error) Error() string { return e.Message }

// ErrorCode returns the code of the first *Error in err's chain, or "" when
// there is none.
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// Errorf returns an *Error with the given code.
func Errorf(code Code, format string, args ...any) error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

func invalid(format string, args ...any) error {
	return Errorf(CodeInvalidRequest, format, args...)
}

// Outcomes lists every outcome.
var Outcomes = []Outcome{OutcomeAllow, OutcomeConfirm, OutcomeDeny, OutcomeStop}

// Sources lists every decision source.
var Sources = []Source{
	SourceOperationDefault, SourceElementPolicy, SourceSessionGrant, SourceAutonomy,
	SourceValidator, SourceDangerZone, SourceRetryGuard, SourceMode,
}

// DecisionCodes lists every code a Decision can carry, CodeNone first.
var DecisionCodes = []Code{
	CodeNone, CodeUnknownOperation, CodeElementPolicyViolation, CodeScopeRestriction,
	CodeConfirmationRequired, CodeSandboxed, CodeAutonomyPause, CodeDangerZone,
	CodeValidatorDenied, CodeFailClosed, CodeRetryLoop, CodeBlockedCommand,
	CodePendingLimit,
}
