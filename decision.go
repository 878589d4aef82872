package portcullis

import (
	"encoding/json"
	"errors"
	"fmt"
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

// TraceEntry is one stage's contribution to a decision.
type TraceEntry struct {
	Stage  string `json:"stage"`
	Result string `json:"result"`
	// Level is the permission level after the stage, when the stage set one.
	Level Level `json:"level,omitempty"`
	// Decided is true on the stage that ended the decision.
	Decided bool `json:"decided,omitempty"`
}

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
}
