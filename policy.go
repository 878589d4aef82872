package portcullis

import (
	"maps"
	"time"
)

// Policy is a loaded, validated policy file. Package policy builds it from
// YAML; the gate compiles it. Every field's YAML key is given in its comment;
// docs/POLICY.md is the reference for the file.
//
// A Policy built in code should be checked with package policy's Validate
// before it is given to the gate.
type Policy struct {
	// Version is `version`; only 1 exists.
	Version int
	// Mode is `mode`: enforce (default), shadow or off.
	Mode Mode
	// UnknownTools is `unknownTools`: confirm (default) or deny.
	UnknownTools UnknownTools
	// Tools is `tools`, in file order.
	Tools []ToolPolicy
	// PolicyDocument is `policyDocument`: the prose rules for the validator.
	// Writes to it are policy-write.
	PolicyDocument string
	// Elements is `elements`, in file order.
	Elements []Element
	// Shell is `shell`: rules on top of the built-in shell classifier.
	Shell ShellPolicy
	// Validator is `validator`; nil when the file has none.
	Validator *ValidatorConfig
	// Migrations is `migrations`.
	Migrations []Migration
	// Approvals is `approvals`.
	Approvals ApprovalsConfig
	// Audit is `audit`.
	Audit AuditConfig
	// UpstreamRequests is `upstreamRequests`: what an MCP gateway does with
	// the requests its upstream servers send to their client.
	UpstreamRequests UpstreamRequestsConfig
	// Budgets is `budgets`: rate limits and spend caps, in file order. An
	// element's own budgets are in its Budgets.
	Budgets []Budget

	// Source is the file the policy was read from ("" when built in code).
	Source string
	// Hash identifies this version of the policy: "sha256:" and the hex
	// digest of the file's bytes.
	Hash string
}

// ToolPolicy is one entry of `tools`: the classification of an operation.
type ToolPolicy struct {
	// Name is the canonical operation name (the key in `tools`).
	Name string
	// Endpoint is `endpoint`: READ, CREATE, UPDATE, DELETE or EXECUTE.
	Endpoint Endpoint
	// DefaultLevel is `defaultLevel`; LevelUnset means the endpoint's default.
	DefaultLevel Level
	// CanBeElevated is `canBeElevated` (default true): whether an element's
	// allow may auto-approve the operation. false pins it.
	CanBeElevated bool
	// Rationale is `rationale`: why the tool has its level, shown to people.
	Rationale string
	// Risk is `risk`: external-write or policy-write.
	Risk Risk
	// Aliases is `aliases`: other names that resolve to this tool.
	Aliases []string
	// Summary is `summary`: a text/template over the arguments that
	// describes the action to people and to the validator.
	Summary string
	// ShellArg is `shellArg`: the argument holding a shell command; the
	// command is classified by the shell classifier.
	ShellArg string
	// PathArg is `pathArg`: the argument holding a file path; writes to the
	// policy document are policy-write.
	PathArg string
	// OutsideWorkdir is `outsideWorkdir`: the least level of a write
	// (pathArg) whose path is not inside the call's working directory, or
	// whose working directory is unknown or not believed (Call.Workdir);
	// LevelUnset means the path does not matter.
	OutsideWorkdir Level
	// Redact is `redact`: argument names whose values the audit log does
	// not keep (in addition to audit.redact).
	Redact []string
	// Mode is `mode`: this tool's enforcement mode (enforce, shadow or off),
	// overriding the policy's; "" means the policy's. Dispatch's per-tool
	// rollout: a tool in shadow is evaluated and recorded but let through.
	Mode Mode
	// Line is the line of the entry in the policy file (0 when built in code).
	Line int
}

// AllBudgets returns the policy's budgets and then each element's, in
// file order.
func (p *Policy) AllBudgets() []*Budget {
	var out []*Budget
	for i := range p.Budgets {
		out = append(out, &p.Budgets[i])
	}
	for i := range p.Elements {
		for j := range p.Elements[i].Budgets {
			out = append(out, &p.Elements[i].Budgets[j])
		}
	}
	return out
}

// Level returns the tool's base level: DefaultLevel, or the endpoint's default.
func (t *ToolPolicy) Level() Level {
	if t.DefaultLevel.Valid() {
		return t.DefaultLevel
	}
	return t.Endpoint.DefaultLevel()
}

// Element is one entry of `elements`: a persona, skill, ensemble or agent
// whose policy applies while it is active.
type Element struct {
	// Name is `name`, unique in the file.
	Name string
	// Type is `type`.
	Type ElementType
	// Active is `active` (default true).
	Active bool
	// Gatekeeper is `gatekeeper`.
	Gatekeeper GatekeeperPolicy
	// Autonomy is `autonomy` (agents only); nil when absent.
	Autonomy *Autonomy
	// Budgets is `budgets`: budgets that count while the element is
	// active (each with Element set to the element's name).
	Budgets []Budget
	// Line is the line of the entry in the policy file.
	Line int
}

// GatekeeperPolicy is an element's `gatekeeper`: lists of operation names or
// globs (`*` any run, `?` one character). deny > confirm > allow.
type GatekeeperPolicy struct {
	Allow   []string `json:"allow"`
	Confirm []string `json:"confirm"`
	Deny    []string `json:"deny"`
	// Scope is `scope`: which element types the operation may act on.
	Scope Scope `json:"scope"`
}

// Scope restricts the element types an operation may act on. An empty
// AllowedTypes means any type.
type Scope struct {
	AllowedTypes []string `json:"allowedTypes"`
	BlockedTypes []string `json:"blockedTypes"`
}

// RiskTolerance is an agent's appetite for risk.
type RiskTolerance string

// The tolerances, with their risk thresholds 25, 50 and 75.
const (
	Conservative RiskTolerance = "conservative"
	Moderate     RiskTolerance = "moderate"
	Aggressive   RiskTolerance = "aggressive"
)

// Autonomy is an agent's `autonomy` envelope (docs/ARCHITECTURE.md, stage "autonomy").
type Autonomy struct {
	// RiskTolerance is `riskTolerance` (default moderate).
	RiskTolerance RiskTolerance
	// MaxAutonomousSteps is `maxAutonomousSteps` (default 10; 0 = unlimited).
	MaxAutonomousSteps int
	// RequiresApproval is `requiresApproval`: globs over the next action that
	// pause the run.
	RequiresApproval []string
	// AutoApprove is `autoApprove`: globs over the next action that need no pause.
	AutoApprove []string
}

// ShellDecision is what a shell rule decides.
type ShellDecision string

// The shell rule decisions; the strictest matching rule wins.
const (
	ShellAllow   ShellDecision = "allow"
	ShellConfirm ShellDecision = "confirm"
	ShellDeny    ShellDecision = "deny"
)

// ShellPolicy is `shell`.
type ShellPolicy struct {
	Rules []ShellRule
}

// ShellRule is one entry of `shell.rules`.
type ShellRule struct {
	// Pattern is `pattern`: a token prefix; each position lists the tokens it
	// accepts (a plain string in YAML is a one-token list).
	Pattern [][]string
	// Decision is `decision`.
	Decision ShellDecision
	// Justification is `justification`.
	Justification string
	// Match is `match`: commands the rule must match (checked at load).
	Match []string
	// NotMatch is `notMatch`: commands the rule must not match.
	NotMatch []string
	Line     int
}

// ValidatorConfig is `validator`: the independent LLM validator.
type ValidatorConfig struct {
	Provider  string        // `provider`: anthropic, openai or command
	Model     string        // `model`
	BaseURL   string        // `baseURL`
	APIKeyEnv string        // `apiKeyEnv`: the environment variable holding the key
	Command   []string      // `command`: the provider command; the prompt goes to its stdin
	Timeout   time.Duration // `timeout` (default 10s)
	Mode      string        // `mode`: stateless or contextual
	Rules     string        // `rules`: the stateless mode's ground rules file
	Scope     ValidatorScope
	// TrustedContext is `trustedContext`: the agent identities (token
	// agents of the decision API) trusted to state the conversation and
	// userPresent, e.g. the identity of a host hook that reads the client's
	// own transcript. From any other agent the contextual validator shows
	// them as the agent's unverified claims.
	TrustedContext []string
	// Budget is `budget`: how many model calls the validator makes for one
	// agent.
	Budget ValidatorBudget
}

// ValidatorBudget is `validator.budget`: the per-agent bound on model
// calls (a cached verdict costs nothing). Past it a call is denied
// fail-closed, with a reason that tells the agent to wait.
type ValidatorBudget struct {
	PerMinute  int // `perMinute`: model calls a minute, sustained (default 30)
	Burst      int // `burst`: calls at once above the rate (default 10)
	Concurrent int // `concurrent`: model calls in flight at once (default 4)
}

// The defaults of ValidatorBudget.
const (
	DefaultValidatorPerMinute  = 30
	DefaultValidatorBurst      = 10
	DefaultValidatorConcurrent = 4
)

// ValidatorScope is `validator.scope`: which calls the validator sees.
type ValidatorScope struct {
	Risks []Risk   // `risks` (default external-write, policy-write)
	Tools []string // `tools`
	Shell bool     // `shell`: every shell command
}

// Migration is one entry of `migrations`: declared paths a migration may
// write without the validator.
type Migration struct {
	Name  string
	Paths []string
}

// ApprovalsConfig is `approvals`.
type ApprovalsConfig struct {
	// Wait is `wait`: how long a held call waits for a person (default 45s).
	Wait time.Duration
	// OutOfBand is `outOfBand`: a call that needs a person is approved
	// out of band (console, CLI, approvals API) with the call held, even
	// where the host could ask the person itself (a Claude Code hook's
	// "ask"), so the answer comes on a channel the agent cannot reach.
	OutOfBand bool
	// MaxPendingPerAgent is `maxPendingPerAgent`: how many approval
	// requests of one agent may wait for a person at once (0: the
	// default, DefaultMaxPending). Past it the agent's calls that need a
	// person are denied (PENDING_LIMIT) without a new request.
	MaxPendingPerAgent int
	// MaxPendingPerSession is `maxPendingPerSession`: the same for one
	// session of an agent (0: DefaultMaxPending).
	MaxPendingPerSession int
}

// DefaultMaxPending is the default of approvals.maxPendingPerAgent and
// approvals.maxPendingPerSession.
const DefaultMaxPending = 50

// PendingLimit returns the caps of approvals, defaults filled in.
func (c ApprovalsConfig) PendingLimit() PendingLimit {
	l := PendingLimit{PerAgent: c.MaxPendingPerAgent, PerSession: c.MaxPendingPerSession}
	if l.PerAgent <= 0 {
		l.PerAgent = DefaultMaxPending
	}
	if l.PerSession <= 0 {
		l.PerSession = DefaultMaxPending
	}
	return l
}

// UpstreamRequestsConfig is `upstreamRequests`: each kind of request an
// upstream MCP server sends to its client is decided by the gate as a call
// to a reserved tool name (UpstreamRequestTool) with this rule as its
// classification, and audited like every call. The checker fills in the
// defaults: sampling deny, elicitation allow, roots allow.
type UpstreamRequestsConfig struct {
	// Sampling is `sampling` (sampling/createMessage: the server asks the
	// client's model to write text, on a prompt the server wrote).
	Sampling UpstreamRule
	// Elicitation is `elicitation` (elicitation/create: the server asks the
	// person a question; the gateway labels it with the upstream's name).
	Elicitation UpstreamRule
	// Roots is `roots` (roots/list: the server asks which directories it
	// may work in).
	Roots UpstreamRule
}

// UpstreamRule is what the gateway does with one kind of upstream request.
type UpstreamRule string

// The upstream rules.
const (
	UpstreamAllow   UpstreamRule = "allow"   // AUTO_APPROVE: forwarded, audited
	UpstreamConfirm UpstreamRule = "confirm" // CONFIRM_SINGLE_USE: held until a person approves
	UpstreamDeny    UpstreamRule = "deny"    // DENY: the upstream gets an error
)

// The MCP methods an upstream sends its client that the gateway decides.
const (
	MethodSampling    = "sampling/createMessage"
	MethodElicitation = "elicitation/create"
	MethodRoots       = "roots/list"
)

// UpstreamRequestTool is the tool name under which the gate decides and the
// audit records an upstream's request of the given method:
// "mcp:sampling/createMessage". Only the gateway makes such calls (with
// UpstreamTool.Request set); a tools/call of that name is an ordinary,
// unoffered tool.
func UpstreamRequestTool(method string) string { return "mcp:" + method }

// Rule is the rule for an upstream request method ("" for another method).
func (u UpstreamRequestsConfig) Rule(method string) UpstreamRule {
	switch method {
	case MethodSampling:
		return u.Sampling
	case MethodElicitation:
		return u.Elicitation
	case MethodRoots:
		return u.Roots
	}
	return ""
}

// AuditConfig is `audit`.
type AuditConfig struct {
	// Redact is `redact`: argument names whose values the audit log does
	// not keep, for every tool.
	Redact []string
	// Retention is `retention`.
	Retention AuditRetention
}

// AuditRetention is `audit.retention`: how much of the audit log to keep.
// Zero fields keep everything. Pruned rows leave a signed checkpoint, so
// the rest of the chain still verifies.
type AuditRetention struct {
	// MaxAge is `maxAge`: rows older than this are pruned.
	MaxAge time.Duration
	// MaxRows is `maxRows`: only the newest this many rows are kept.
	MaxRows int64
}

// RedactedValue replaces a redacted argument's value in the audit log.
const RedactedValue = "[redacted]"

// RedactArgs returns args with the values of the arguments named in names
// replaced by RedactedValue. args itself is never changed: when something
// is redacted the result is a copy, otherwise it is args.
func RedactArgs(args map[string]any, names []string) map[string]any {
	var out map[string]any
	for _, n := range names {
		if _, ok := args[n]; !ok {
			continue
		}
		if out == nil {
			out = maps.Clone(args)
		}
		out[n] = RedactedValue
	}
	if out == nil {
		return args
	}
	return out
}
