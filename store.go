package portcullis

import (
	"context"
	"time"
)

// Store is the state the gate keeps between decisions. Implementations must
// be safe for concurrent use, and must make every method atomic: the gate
// relies on UseGrant consuming a single-use grant exactly once however many
// callers race for it.
//
// Any error from a Store makes the gate deny the call with FailClosed set.
type Store interface {
	// AddGrant records a grant and returns it with its ID (assigned when
	// empty) and CreatedAt set.
	AddGrant(ctx context.Context, g Grant) (Grant, error)

	// UseGrant finds a live grant that satisfies q and reports whether there
	// was one. A single-use grant that is found is deleted when q.Consume is
	// set; of several concurrent callers, exactly one gets it. Expired grants
	// never match.
	UseGrant(ctx context.Context, q GrantQuery) (Grant, bool, error)

	// RevokeGrant deletes a grant. It returns an error with code NOT_FOUND
	// when there is no such grant.
	RevokeGrant(ctx context.Context, id string) error

	// CreateApproval records a pending approval request. The ID must be set.
	CreateApproval(ctx context.Context, a Approval) error

	// Approval returns an approval request by ID, or an error with code
	// NOT_FOUND.
	Approval(ctx context.Context, id string) (Approval, error)

	SafetyStore
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
}
