package portcullis

import (
	"fmt"
	"slices"
)

// Level is one of the four permission levels. Levels are ordered by
// strictness: AutoApprove < ConfirmSession < ConfirmSingleUse < Deny.
// The zero Level is not a level: it means "unset" in configuration and is
// never the level of a Decision.
type Level uint8

// The four permission levels, in order of strictness.
const (
	LevelUnset       Level = iota
	AutoApprove            // always allowed, no confirmation needed
	ConfirmSession         // confirm once, then allowed for the rest of the session
	ConfirmSingleUse       // confirm this exact call only; ask again next time
	Deny                   // never allowed
)

var levelNames = [...]string{"", "AUTO_APPROVE", "CONFIRM_SESSION", "CONFIRM_SINGLE_USE", "DENY"}

// String returns the level's name as written in policy files and decisions.
func (l Level) String() string {
	if int(l) < len(levelNames) {
		return levelNames[l]
	}
	return fmt.Sprintf("Level(%d)", uint8(l))
}

// Valid reports whether l is one of the four levels.
func (l Level) Valid() bool { return l >= AutoApprove && l <= Deny }

// Stricter returns the stricter of l and m.
func (l Level) Stricter(m Level) Level {
	if m > l {
		return m
	}
	return l
}

// IsConfirm reports whether l asks for a person's confirmation.
func (l Level) IsConfirm() bool { return l == ConfirmSession || l == ConfirmSingleUse }

// LevelNames lists the level names for messages: "AUTO_APPROVE, CONFIRM_SESSION, CONFIRM_SINGLE_USE or DENY".
const LevelNames = "AUTO_APPROVE, CONFIRM_SESSION, CONFIRM_SINGLE_USE or DENY"

// ParseLevel parses a level name. Names are exact (upper case).
func ParseLevel(s string) (Level, error) {
	for i := AutoApprove; i <= Deny; i++ {
		if levelNames[i] == s {
			return i, nil
		}
	}
	return LevelUnset, fmt.Errorf("unknown level %q (want %s)", s, LevelNames)
}

// MarshalText implements encoding.TextMarshaler.
func (l Level) MarshalText() ([]byte, error) {
	if !l.Valid() {
		return nil, fmt.Errorf("invalid permission level %d", uint8(l))
	}
	return []byte(levelNames[l]), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (l *Level) UnmarshalText(b []byte) error {
	v, err := ParseLevel(string(b))
	if err != nil {
		return err
	}
	*l = v
	return nil
}

// Endpoint is the CRUD(E) class of an operation.
type Endpoint string

// The endpoints. The empty Endpoint means unclassified.
const (
	Read    Endpoint = "READ"
	Create  Endpoint = "CREATE"
	Update  Endpoint = "UPDATE"
	Delete  Endpoint = "DELETE"
	Execute Endpoint = "EXECUTE"
)

// Endpoints lists the endpoints in CRUD order.
var Endpoints = []Endpoint{Read, Create, Update, Delete, Execute}

// ParseEndpoint parses an endpoint name (exact, upper case).
func ParseEndpoint(s string) (Endpoint, error) {
	for _, e := range Endpoints {
		if string(e) == s {
			return e, nil
		}
	}
	return "", fmt.Errorf("unknown endpoint %q (want READ, CREATE, UPDATE, DELETE or EXECUTE)", s)
}

// DefaultLevel is the route default of an endpoint: reads are auto-approved,
// creates are confirmed once per session, everything else is confirmed every
// time. An unclassified (empty or unknown) endpoint gets ConfirmSingleUse:
// an unknown operation never falls through to allowed.
func (e Endpoint) DefaultLevel() Level {
	switch e {
	case Read:
		return AutoApprove
	case Create:
		return ConfirmSession
	default:
		return ConfirmSingleUse
	}
}

// Outcome is what the caller must do with a call.
type Outcome string

// The outcomes.
const (
	OutcomeAllow   Outcome = "allow"   // forward the call
	OutcomeConfirm Outcome = "confirm" // a person must approve it first
	OutcomeDeny    Outcome = "deny"    // do not forward it
	OutcomeStop    Outcome = "stop"    // hard stop: danger zone or retry loop; the agent must wait for a person
)

// Source says which part of the pipeline decided.
type Source string

// The decision sources.
const (
	SourceOperationDefault Source = "operation_default"
	SourceElementPolicy    Source = "element_policy"
	SourceSessionGrant     Source = "session_grant"
	SourceAutonomy         Source = "autonomy"
	SourceValidator        Source = "validator"
	SourceDangerZone       Source = "danger_zone"
	SourceRetryGuard       Source = "retry_guard"
	SourceMode             Source = "mode"
)

// Risk is a tool's static risk annotation (Dispatch's, docs/POLICY.md `risk`). The empty Risk means
// the tool is not annotated.
type Risk string

// The risks.
const (
	RiskExternalWrite Risk = "external-write" // writes to a system outside the agent
	RiskPolicyWrite   Risk = "policy-write"   // edits the permission policy document
)

// ParseRisk parses a risk annotation.
func ParseRisk(s string) (Risk, error) {
	switch Risk(s) {
	case RiskExternalWrite, RiskPolicyWrite:
		return Risk(s), nil
	}
	return "", fmt.Errorf("unknown risk %q (want external-write or policy-write)", s)
}

// Mode is the enforcement mode of a policy.
type Mode string

// The modes.
const (
	ModeEnforce Mode = "enforce" // decisions are enforced (the default)
	ModeShadow  Mode = "shadow"  // evaluate and record, but let every call through
	ModeOff     Mode = "off"     // pass everything through unevaluated
)

// ParseMode parses a mode name.
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case ModeEnforce, ModeShadow, ModeOff:
		return Mode(s), nil
	}
	return "", fmt.Errorf("unknown mode %q (want enforce, shadow or off)", s)
}

// UnknownTools says what happens to a tool the policy does not classify.
type UnknownTools string

// The unknown-tool settings.
const (
	UnknownConfirm UnknownTools = "confirm" // CONFIRM_SINGLE_USE (the default)
	UnknownDeny    UnknownTools = "deny"    // DENY with UNKNOWN_OPERATION
)

// ElementType is the kind of an element.
type ElementType string

// The element types.
const (
	Persona  ElementType = "persona"
	Skill    ElementType = "skill"
	Ensemble ElementType = "ensemble"
	Agent    ElementType = "agent"
)

// ParseElementType parses an element type.
func ParseElementType(s string) (ElementType, error) {
	switch ElementType(s) {
	case Persona, Skill, Ensemble, Agent:
		return ElementType(s), nil
	}
	return "", fmt.Errorf("unknown element type %q (want persona, skill, ensemble or agent)", s)
}

// ungatable are the recovery operations no policy can gate, so the human
// path can never be locked out (as in DollhouseMCP's Gatekeeper; see
// docs/ARCHITECTURE.md, "Who may override what").
var ungatable = [...]string{"verify_challenge", "release_deadlock", "approve_cli_permission", "permission_prompt"}

// ConfirmOperation is the operation whose denial by an element puts the
// session in the nuclear sandbox: nothing can be confirmed, so every
// CONFIRM_* call is denied and the session is read-only.
const ConfirmOperation = "confirm_operation"

// IsUngatable reports whether op is one of the ungatable recovery operations
// (verify_challenge, release_deadlock, approve_cli_permission,
// permission_prompt). They are removed from every element list and skip the
// elements stage and the nuclear sandbox.
func IsUngatable(op string) bool {
	return slices.Contains(ungatable[:], op)
}

// UngatableOperations returns the ungatable operation names.
func UngatableOperations() []string { return append([]string(nil), ungatable[:]...) }

// TargetTypes lists the element types an operation can act on (a call's
// elementType, and the names in an element's scope): the four that carry
// policy, and DollhouseMCP's memory and template.
var TargetTypes = []string{"persona", "skill", "ensemble", "agent", "memory", "template"}
