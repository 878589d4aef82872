package portcullis

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"time"
)

// Call is a decision request: one action an agent wants to take.
// Only Tool is required. Its JSON form is the contract of
// `portcullis decide` and `POST /v1/decide`.
type Call struct {
	// Tool is the operation's name as the agent called it; aliases are
	// resolved to the canonical name by the route stage.
	Tool string `json:"tool"`
	// Args are the call's arguments. Numbers decoded by DecodeCall are
	// json.Number, so the argument digest is exact.
	Args map[string]any `json:"args,omitempty"`
	// Session identifies the conversation or client session; session grants
	// are scoped to it.
	Session string `json:"session,omitempty"`
	// Agent is the acting agent's identity, set by configuration or a token,
	// never by the model. Its autonomy envelope is the element of type agent
	// with this name.
	Agent string `json:"agent,omitempty"`
	// ElementType is the type of element the operation acts on, checked
	// against the active elements' scope restrictions.
	ElementType string `json:"elementType,omitempty"`
	// ActiveElements, when non-nil, replaces the policy's active set for this
	// call (an empty, non-nil list means no element is active). Names must be
	// elements of the policy.
	ActiveElements []string `json:"activeElements"`
	// UserPresent says whether a person is at the keyboard (interactive) or
	// the agent runs on its own.
	UserPresent bool `json:"userPresent,omitempty"`
	// Grants are grants that already exist, for testing and explaining. They
	// are checked before the store's and are never consumed.
	Grants []Grant `json:"grants,omitempty"`
	// Run, when present, makes the call a step of an autonomous run.
	Run *Run `json:"run,omitempty"`
	// Conversation is the conversation so far, for the contextual validator.
	Conversation []Message `json:"conversation,omitempty"`
	// ContextSource says who stated Conversation and UserPresent, and so
	// how far the validator believes them (see ContextSource). Empty is
	// ContextCaller. The decision API sets it to ContextAgent on every
	// request made with an agent token, whatever the body says.
	ContextSource ContextSource `json:"contextSource,omitempty"`
	// Workdir is the absolute directory the agent works in, as its host
	// states it (a host hook's cwd, the current directory of `portcullis
	// exec`). A tool's outsideWorkdir level applies to a write whose path
	// is not inside it. It is believed only from a trusted ContextSource:
	// an agent's own word cannot move its writes inside.
	Workdir string `json:"workdir,omitempty"`
	// Upstream is what an MCP gateway knows of the called tool from the
	// upstream server that offers it. It is set in process by the gateway,
	// never decoded from a request: an agent cannot describe its own tool.
	Upstream *UpstreamTool `json:"-"`
}

// UpstreamTool is an MCP gateway's knowledge of a called tool: whether any
// upstream offers it, its pinned MCP annotations, whether the operator
// trusts them, and whether its definition changed (or the tool is new)
// since a person last accepted it. The route stage uses it (docs/ARCHITECTURE.md,
// stage 3).
type UpstreamTool struct {
	// Server names the upstream that offers the tool.
	Server string
	// Offered is false when no upstream offers a tool of this name: the
	// call is denied (UNKNOWN_OPERATION) whatever the policy says.
	Offered bool
	// Annotated says the pinned definition carries MCP tool annotations;
	// ReadOnly, Destructive and OpenWorld are their hints. They are the
	// server's own claims: unless Trusted, they may make a tool stricter
	// (Destructive, OpenWorld) and never looser.
	Annotated   bool
	ReadOnly    bool
	Destructive bool
	OpenWorld   bool
	// Trusted says the operator trusts this upstream's annotations: they
	// classify a tool the policy does not name (Endpoint).
	Trusted bool
	// Changed says the tool's current definition differs from its pin and
	// no person has accepted the change: the call is held at
	// CONFIRM_SINGLE_USE.
	Changed bool
	// Request, when set, says the call is not a tool call but a request
	// the upstream Server sent to its client, with this MCP method
	// (MethodSampling, MethodElicitation, MethodRoots): the route stage
	// classifies it by the policy's upstreamRequests, whatever the tools
	// entries say.
	Request string
	// New says the tool first appeared after its upstream's tool set was
	// pinned and no person has accepted it yet: the call is held at
	// CONFIRM_SINGLE_USE like a changed one.
	New bool
}

// Held says the call is held until a person accepts the tool's definition.
func (u *UpstreamTool) Held() bool { return u.Changed || u.New }

// Endpoint is the endpoint the MCP annotations imply: readOnlyHint → READ,
// destructiveHint → DELETE, otherwise UPDATE. Only a trusted upstream's
// annotations classify a tool this way.
func (u *UpstreamTool) Endpoint() Endpoint {
	switch {
	case u.ReadOnly:
		return Read
	case u.Destructive:
		return Delete
	default:
		return Update
	}
}

// ContextSource says who stated a call's conversation and userPresent. The
// contextual validator shows a conversation from a trusted source as what
// it is, the user's words among the agent's; from the agent itself it shows
// it as the agent's unverified claims, never as the user's words, and does
// not believe its userPresent. The audit row records the source the gate
// went by.
type ContextSource string

// The context sources.
const (
	// ContextCaller: the program that calls the gate in process (the Go
	// library, `portcullis decide`), which the operator runs. Trusted.
	ContextCaller ContextSource = "caller"
	// ContextHost: read by Portcullis from the host itself: a host hook
	// reading the client's own transcript, the terminal of `portcullis
	// exec`. Trusted.
	ContextHost ContextSource = "host"
	// ContextOperator: the operator's configuration (the MCP gateway's
	// userPresent setting). Trusted.
	ContextOperator ContextSource = "operator"
	// ContextIntegrator: an agent identity the policy trusts to state the
	// context (validator.trustedContext), e.g. the token of a host hook that
	// reads the client's transcript. Trusted.
	ContextIntegrator ContextSource = "integrator"
	// ContextAgent: the agent's own word (a request made with an agent
	// token). Not believed: the conversation is shown as the agent's claims
	// and userPresent as unknown.
	ContextAgent ContextSource = "agent"
)

// Trusted reports whether the validator believes context from s: every
// source but ContextAgent. Empty is ContextCaller; an unknown source is
// not trusted.
func (s ContextSource) Trusted() bool {
	switch s {
	case "", ContextCaller, ContextHost, ContextOperator, ContextIntegrator:
		return true
	}
	return false
}

// Run describes the autonomous run a call is a step of.
type Run struct {
	ID              string      `json:"id"`
	Step            int         `json:"step"`
	PreviousOutcome StepOutcome `json:"previousOutcome,omitempty"`
	// RiskScore, when set, overrides the score computed from the call's
	// classification.
	RiskScore      *float64 `json:"riskScore,omitempty"`
	NextActionHint string   `json:"nextActionHint,omitempty"`
	Trigger        string   `json:"trigger,omitempty"`
}

// StepOutcome is the outcome of an autonomous run's previous step.
type StepOutcome string

// The step outcomes. A partial step lets the run continue.
const (
	StepSuccess StepOutcome = "success"
	StepFailure StepOutcome = "failure"
	StepPartial StepOutcome = "partial"
)

// Message is one message of a conversation.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// GrantKind says how long a grant holds.
type GrantKind string

// The grant kinds.
const (
	// GrantSession covers later calls to the same tool (and element type,
	// when set) in the same session until it expires or is revoked. It
	// satisfies CONFIRM_SESSION only.
	GrantSession GrantKind = "session"
	// GrantSingle covers exactly one call: the same tool with the same
	// argument digest. It is consumed on use. It satisfies CONFIRM_SESSION
	// and CONFIRM_SINGLE_USE.
	GrantSingle GrantKind = "single"
)

// Grant is a person's confirmation of a tool, recorded so that later calls
// need not ask again.
type Grant struct {
	ID   string    `json:"id,omitempty"`
	Kind GrantKind `json:"kind"`
	// Tool is the canonical tool name (aliases are resolved when the grant is
	// matched).
	Tool        string `json:"tool"`
	ElementType string `json:"elementType,omitempty"`
	Session     string `json:"session,omitempty"`
	// Args are the arguments a single-use grant was approved for (in a
	// request); ArgsDigest is their digest (in a store).
	Args       map[string]any `json:"args,omitempty"`
	ArgsDigest string         `json:"argsDigest,omitempty"`
	GrantedBy  string         `json:"grantedBy,omitempty"`
	CreatedAt  time.Time      `json:"createdAt,omitzero"`
	// ExpiresAt is when the grant stops holding; zero means it holds until
	// revoked or, for a single-use grant, used.
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
}

// MaxRequestBytes bounds one decision request.
const MaxRequestBytes = 1 << 20

// DecodeCall parses one decision request. It is strict: unknown fields,
// trailing data, a missing or empty tool, arguments that are not an object,
// or an unknown grant kind are errors (code INVALID_REQUEST). Numbers in
// arguments are kept exact as json.Number.
func DecodeCall(data []byte) (Call, error) {
	var c Call
	if len(data) > MaxRequestBytes {
		return c, invalid("request is %d bytes, more than the limit of %d", len(data), MaxRequestBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Call{}, invalid("%s", describeJSONError(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return Call{}, invalid("unexpected data after the request object")
	}
	if err := c.Validate(); err != nil {
		return Call{}, err
	}
	return c, nil
}

// Validate checks a call built in code the way DecodeCall checks a decoded
// one.
func (c *Call) Validate() error {
	if c.Tool == "" {
		return invalid(`missing "tool" (the operation to decide, e.g. {"tool": "list_elements"})`)
	}
	if len(c.Tool) > 500 {
		return invalid("tool name is %d characters, more than the limit of 500", len(c.Tool))
	}
	for i, g := range c.Grants {
		switch g.Kind {
		case GrantSession, GrantSingle:
		default:
			return invalid("grants[%d]: unknown kind %q (want session or single)", i, g.Kind)
		}
		if g.Tool == "" {
			return invalid("grants[%d]: missing tool", i)
		}
	}
	switch c.ContextSource {
	case "", ContextCaller, ContextHost, ContextOperator, ContextIntegrator, ContextAgent:
	default:
		return invalid("contextSource: unknown source %q (want caller, host, operator, integrator or agent)", c.ContextSource)
	}
	if c.Run != nil {
		switch c.Run.PreviousOutcome {
		case "", StepSuccess, StepFailure, StepPartial:
		default:
			return invalid("run.previousOutcome: unknown outcome %q (want success, failure or partial)", c.Run.PreviousOutcome)
		}
		if c.Run.Step < 0 {
			return invalid("run.step: %d is negative", c.Run.Step)
		}
	}
	return nil
}

func describeJSONError(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("malformed JSON at byte %d: %v", syn.Offset, err)
	case errors.As(err, &typ):
		if typ.Field != "" {
			return fmt.Sprintf("field %q: got JSON %s, want %s", typ.Field, typ.Value, jsonKind(typ.Type))
		}
		return fmt.Sprintf("got JSON %s, want a request object", typ.Value)
	case err == io.EOF:
		return "empty request (want a JSON object with at least \"tool\")"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "truncated JSON"
	}
	return err.Error()
}

func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "an object"
}

// ArgsDigest returns the digest a single-use grant is bound to: SHA-256 of
// the arguments' canonical JSON (keys sorted, numbers as written). No
// arguments and an empty object have the same digest.
func ArgsDigest(args map[string]any) (string, error) {
	var b []byte
	if len(args) == 0 {
		b = []byte("{}")
	} else {
		var err error
		b, err = json.Marshal(args)
		if err != nil {
			return "", fmt.Errorf("digest arguments: %w", err)
		}
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}
