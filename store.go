package portcullis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"time"
)

// Store is everything Portcullis remembers between decisions: grants,
// approval requests, agent safety state (blocks, challenges, failed
// attempts, run state), the retry-guard memo, tool-definition pins, and the
// audit log. Implementations (memstore, sqlite, postgres) share one
// conformance suite, storetest.
//
// Implementations must be safe for concurrent use and make every method
// atomic: the gate relies on UseGrant consuming a single-use grant exactly
// once, and on DecideApproval deciding an approval exactly once, however
// many callers race. Any error from a Store makes the gate deny the call
// with FailClosed set.
type Store interface {
	// AddGrant records a grant and returns it with its ID (assigned when
	// empty) and CreatedAt (when zero) set. A single-use grant's ArgsDigest
	// is computed from Args when empty; Args are not kept.
	AddGrant(ctx context.Context, g Grant) (Grant, error)

	// UseGrant finds a live grant that satisfies q and reports whether there
	// was one. A session grant is preferred; a single-use grant that is used
	// is deleted when q.Consume is set; of several concurrent callers,
	// exactly one gets it. Expired grants never match.
	UseGrant(ctx context.Context, q GrantQuery) (Grant, bool, error)

	// RevokeGrant deletes a grant; NOT_FOUND when there is no such grant.
	RevokeGrant(ctx context.Context, id string) error

	// Grants lists live grants at `now` (all sessions when session is
	// empty), oldest first.
	Grants(ctx context.Context, session string, now time.Time) ([]Grant, error)

	// CreateApproval records a pending approval request. The ID must be set
	// and new.
	CreateApproval(ctx context.Context, a Approval) error

	// CreateApprovalWithin records a pending approval request like
	// CreateApproval, unless the call's agent already has lim.PerAgent
	// pending, unexpired requests, or the agent's session (a.Call.Session,
	// counted within a.Call.Agent) lim.PerSession; then it records nothing
	// and says which cap refused it. Counting and recording are one atomic
	// step: however many callers race (on any replica), the caps are never
	// exceeded. The first refusal since the agent (or session) was last
	// under its cap has Notify set, exactly once; a request recorded for
	// the agent and session re-arms it. Zero fields of lim do not cap.
	// INVALID_REQUEST without an ID or for a status other than pending;
	// CONFLICT when the ID exists.
	CreateApprovalWithin(ctx context.Context, a Approval, lim PendingLimit) (Admission, error)

	// PendingCounts counts the pending, unexpired approval requests of
	// each agent that has any, most first (then by agent).
	PendingCounts(ctx context.Context) ([]PendingCount, error)

	// Approval returns an approval request by ID, or NOT_FOUND. A pending
	// request past its ExpiresAt is reported as expired.
	Approval(ctx context.Context, id string) (Approval, error)

	// Approvals lists approval requests, newest first.
	Approvals(ctx context.Context, f ApprovalFilter) ([]Approval, error)

	// DecideApproval moves a pending, unexpired request to approved or
	// denied, and when d.Grant is set records that grant in the same
	// transaction. Exactly one of several concurrent deciders succeeds; the
	// others get CONFLICT. An expired request gives CONFLICT too; a missing
	// one NOT_FOUND.
	DecideApproval(ctx context.Context, id string, d ApprovalDecision) (Approval, error)

	SafetyStore

	BudgetStore

	// RecordDenial remembers that the run's action with this signature was
	// denied and returns how many times it has been denied since the run's
	// last new user input, this one included.
	RecordDenial(ctx context.Context, runID, signature string, at time.Time) (int, error)
	// ClearDenials forgets the run's denials: the user said something new.
	ClearDenials(ctx context.Context, runID string) error

	// ToolPin returns the pinned definition of an upstream's tool.
	ToolPin(ctx context.Context, upstream, tool string) (ToolPin, bool, error)
	// PutToolPin creates or replaces a pin.
	PutToolPin(ctx context.Context, p ToolPin) error
	// ToolPins lists every pin.
	ToolPins(ctx context.Context) ([]ToolPin, error)

	AuditLog

	// Watch delivers a Change for every grant, approval, block and pin
	// written through any store on the same database (other gateway
	// replicas included) until ctx ends. Slow readers may miss changes but
	// are then sent a Change of kind "resync": re-read what you show.
	Watch(ctx context.Context) (<-chan Change, error)

	// Close releases the store.
	Close() error
}

// ApprovalFilter selects approval requests. Zero fields do not filter.
type ApprovalFilter struct {
	Status  ApprovalStatus
	Session string
	Agent   string
	// DecisionID selects the request a decision made (outcome confirm).
	DecisionID string
	Limit      int // 0: 100
}

// PendingLimit caps the approval requests waiting for a person: per agent,
// and per session of an agent. Zero fields do not cap.
type PendingLimit struct {
	PerAgent   int
	PerSession int
}

// PendingScope names the cap that refused an approval request.
type PendingScope string

// The pending scopes.
const (
	PendingScopeAgent   PendingScope = "agent"
	PendingScopeSession PendingScope = "session"
)

// Admission is what CreateApprovalWithin did.
type Admission struct {
	// Created is set when the request was recorded.
	Created bool
	// Scope is the cap that refused the request; empty when Created.
	Scope PendingScope
	// Pending is how many requests were waiting in Scope when refused
	// (the agent's, or its session's).
	Pending int
	// Notify is set on the first refusal since the agent (or session)
	// was last under its cap: a person should be told, once.
	Notify bool
}

// PendingCount is how many approval requests of one agent wait for a
// person.
type PendingCount struct {
	Agent   string `json:"agent"`
	Pending int    `json:"pending"`
}

// SortPendingCounts sorts counts as PendingCounts returns them: most
// pending first, then by agent.
func SortPendingCounts(c []PendingCount) {
	sort.Slice(c, func(i, j int) bool {
		if c[i].Pending != c[j].Pending {
			return c[i].Pending > c[j].Pending
		}
		return c[i].Agent < c[j].Agent
	})
}

// ApprovalDecision is a person's answer to an approval request.
type ApprovalDecision struct {
	Status ApprovalStatus // approved or denied
	By     string         // who decided
	Reason string         // a denial's reason, shown to the agent
	At     time.Time
	// Grant, when set, is recorded with the decision (an approval's grant).
	Grant *Grant
}

// ToolPin is the definition of an upstream tool as first seen (and later
// accepted by a person). A definition that differs is pending until
// accepted.
type ToolPin struct {
	Upstream string `json:"upstream"`
	Tool     string `json:"tool"`
	// Hash and Definition are the accepted definition (description,
	// schema, annotations) as canonical JSON.
	Hash       string          `json:"hash"`
	Definition json.RawMessage `json:"definition"`
	// PendingHash and PendingDefinition are a changed definition waiting
	// for a person; empty when none.
	PendingHash       string          `json:"pendingHash,omitempty"`
	PendingDefinition json.RawMessage `json:"pendingDefinition,omitempty"`
	FirstSeen         time.Time       `json:"firstSeen"`
	UpdatedAt         time.Time       `json:"updatedAt"`
	AcceptedBy        string          `json:"acceptedBy,omitempty"`
}

// ToolSetPin is the Tool of the pin that records that an upstream's tool
// set was pinned (its Hash is ToolSetHash). It is not a tool: listings
// leave it out. A tool the upstream offers later, with no pin of its own,
// is new and held until a person accepts it.
const ToolSetPin = "*"

// ToolSetHash is the Hash of an upstream's ToolSetPin.
const ToolSetHash = "tool-set"

// UnacceptedHash is the Hash of the pin of a tool that first appeared
// after its upstream's tool set was pinned: no definition of it was ever
// accepted. Its Definition is the stand-in clients see; its
// PendingDefinition is the tool's own, waiting for a person.
const UnacceptedHash = "unaccepted"

// IsToolSet says the pin marks an upstream's pinned tool set rather than
// pinning a tool.
func (p ToolPin) IsToolSet() bool { return p.Tool == ToolSetPin }

// Unaccepted says the pin's tool is new: no person has accepted any
// definition of it.
func (p ToolPin) Unaccepted() bool { return p.Hash == UnacceptedHash }

// ChangeKind says what a Change is about.
type ChangeKind string

// The change kinds.
const (
	ChangeGrant    ChangeKind = "grant"
	ChangeApproval ChangeKind = "approval"
	ChangeBlock    ChangeKind = "block"
	ChangePin      ChangeKind = "pin"
	ChangeResync   ChangeKind = "resync" // changes may have been missed: re-read
)

// Change tells a watcher that something was written.
type Change struct {
	Kind ChangeKind `json:"kind"`
	// ID names what changed: a grant, approval or challenge ID, an agent
	// for a block, "upstream/tool" for a pin.
	ID string `json:"id"`
}

// GrantQuery asks for a grant that satisfies a call's confirmation level.
type GrantQuery struct {
	Session     string
	Tool        string // canonical name
	ElementType string
	ArgsDigest  string
	// Level is what must be satisfied: ConfirmSession is satisfied by a
	// session grant for (Session, Tool), covering ElementType when the grant
	// names one, or by a single-use grant for the same arguments;
	// ConfirmSingleUse only by a single-use grant for (Session, Tool,
	// ArgsDigest).
	Level Level
	// Consume deletes a matching single-use grant. Dry runs (explain, shadow
	// mode) leave it in place.
	Consume bool
	Now     time.Time
}

// Covers reports whether g satisfies q at q.Now. Stores may use it to filter
// candidates; the rules are the ones in GrantQuery's documentation.
func (q *GrantQuery) Covers(g *Grant) bool {
	if g.Tool != q.Tool || g.Session != q.Session {
		return false
	}
	if !g.ExpiresAt.IsZero() && !q.Now.Before(g.ExpiresAt) {
		return false
	}
	switch g.Kind {
	case GrantSingle:
		return q.Level.IsConfirm() && g.ArgsDigest != "" && g.ArgsDigest == q.ArgsDigest
	case GrantSession:
		if q.Level != ConfirmSession {
			return false
		}
		return g.ElementType == "" || g.ElementType == q.ElementType
	}
	return false
}

// ApprovalStatus is the state of an approval request.
type ApprovalStatus string

// The approval states.
const (
	ApprovalPending  ApprovalStatus = "pending"
	ApprovalApproved ApprovalStatus = "approved"
	ApprovalDenied   ApprovalStatus = "denied"
	ApprovalExpired  ApprovalStatus = "expired"
)

// Approval is a request for a person to confirm a call.
type Approval struct {
	ID         string         `json:"id"`
	DecisionID string         `json:"decisionId"`
	Status     ApprovalStatus `json:"status"`
	// Call is the request as the agent made it.
	Call Call `json:"call"`
	// Tool is the canonical tool name.
	Tool       string `json:"tool"`
	ArgsDigest string `json:"argsDigest"`
	// Level is the confirmation the call needs: a CONFIRM_SINGLE_USE call
	// can only be approved once, never for the session.
	Level     Level     `json:"level"`
	Reason    string    `json:"reason"`
	CreatedAt time.Time `json:"createdAt"`
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
	// DecidedBy, DecidedAt and DenyReason are set once a person answers.
	DecidedBy  string    `json:"decidedBy,omitempty"`
	DecidedAt  time.Time `json:"decidedAt,omitzero"`
	DenyReason string    `json:"denyReason,omitempty"`
}

// PrepareGrant checks a grant a store is about to record and fills in what
// AddGrant promises: an ID ("grt_" and 24 random hex digits) when it has
// none, CreatedAt (now) when it is zero, a single-use grant's ArgsDigest
// from its Args when empty. Args are dropped (a store keeps the digest
// only); times are UTC. Every Store uses it, so they agree.
func PrepareGrant(g Grant, now time.Time) (Grant, error) {
	switch g.Kind {
	case GrantSession:
	case GrantSingle:
		if g.ArgsDigest == "" {
			d, err := ArgsDigest(g.Args)
			if err != nil {
				return Grant{}, err
			}
			g.ArgsDigest = d
		}
	default:
		return Grant{}, Errorf(CodeInvalidRequest, "unknown grant kind %q (want session or single)", g.Kind)
	}
	if g.Tool == "" {
		return Grant{}, Errorf(CodeInvalidRequest, "grant names no tool")
	}
	if g.ID == "" {
		var b [12]byte
		if _, err := rand.Read(b[:]); err != nil {
			return Grant{}, fmt.Errorf("grant id: %w", err)
		}
		g.ID = "grt_" + hex.EncodeToString(b[:])
	}
	if g.CreatedAt.IsZero() {
		g.CreatedAt = now
	}
	g.CreatedAt = g.CreatedAt.UTC()
	if !g.ExpiresAt.IsZero() {
		g.ExpiresAt = g.ExpiresAt.UTC()
	}
	g.Args = nil
	return g, nil
}
