// Package approvals is what people do with the requests that wait for
// them and the grants their answers made: list and show requests, approve
// or deny one, watch them arrive and be answered, list and revoke grants.
// It works the same through a running gateway's approvals API (a
// *client.Client is a Service) and on the store directly (Local), so a
// command that serves people does not care which it has. It writes
// requests and grants as the commands show them (text.go), and the pinned
// MCP tools with the change a person accepts (tools.go). Blocks clears
// the danger-zone blocks of agents, each audited with who cleared it.
// What the people's commands do with their options, and how such a
// command ends on an error (ExitStatus), is in people.go.
//
// It decides nothing itself: answers go through the gate (or the
// gateway's), which records each with its grant and an audit row naming
// who answered; a cleared block, which the gate does not audit, Blocks
// records itself. It imports only the root package, the line diff and
// the client.
package approvals

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/portcullis/portcullis"
)

// Service is the people's side of approvals. Errors carry the codes of
// portcullis.ErrorCode: NOT_FOUND for an unknown request or grant,
// CONFLICT for a request already answered or expired, INVALID_REQUEST for
// an answer that does not fit the request (--session on a single-use
// request); through a gateway also UNAUTHORIZED and FORBIDDEN.
type Service interface {
	// Approvals lists requests, newest first.
	Approvals(ctx context.Context, f portcullis.ApprovalFilter) ([]portcullis.Approval, error)
	// Approval returns one request.
	Approval(ctx context.Context, id string) (portcullis.Approval, error)
	// Approve approves a pending request, once or for the call's session.
	Approve(ctx context.Context, id string, forSession bool) (portcullis.Approval, error)
	// Deny denies a pending request with a reason the agent is shown.
	Deny(ctx context.Context, id, reason string) (portcullis.Approval, error)
	// Grants lists the live grants, of one session when session is set.
	Grants(ctx context.Context, session string) ([]portcullis.Grant, error)
	// RevokeGrant revokes a grant.
	RevokeGrant(ctx context.Context, id string) error
}

// Gate is what Local needs of the gate: the answers that record a
// person's decision with its grant and audit row. *gate.Gate is one.
type Gate interface {
	Approve(ctx context.Context, id, by string, forSession bool) (portcullis.Approval, error)
	DenyApproval(ctx context.Context, id, by, reason string) (portcullis.Approval, error)
	RevokeGrant(ctx context.Context, id, by string) error
}

// Local is the Service on the store itself, answering through a gate
// built on the same store, as the person By.
type Local struct {
	Store portcullis.Store
	Gate  Gate
	// By names who acts, for the audit log and the grants.
	By string
	// Clock tells which grants are live (nil: the system clock).
	Clock portcullis.Clock
}

var _ Service = (*Local)(nil)

// Approvals lists the store's requests.
func (l *Local) Approvals(ctx context.Context, f portcullis.ApprovalFilter) ([]portcullis.Approval, error) {
	return l.Store.Approvals(ctx, f)
}

// Approval returns one of the store's requests.
func (l *Local) Approval(ctx context.Context, id string) (portcullis.Approval, error) {
	return l.Store.Approval(ctx, id)
}

// Approve approves a request through the gate, as l.By.
func (l *Local) Approve(ctx context.Context, id string, forSession bool) (portcullis.Approval, error) {
	return l.Gate.Approve(ctx, id, l.By, forSession)
}

// Deny denies a request through the gate, as l.By.
func (l *Local) Deny(ctx context.Context, id, reason string) (portcullis.Approval, error) {
	return l.Gate.DenyApproval(ctx, id, l.By, reason)
}

// Grants lists the store's grants live now.
func (l *Local) Grants(ctx context.Context, session string) ([]portcullis.Grant, error) {
	var clock portcullis.Clock = portcullis.SystemClock{}
	if l.Clock != nil {
		clock = l.Clock
	}
	return l.Store.Grants(ctx, session, clock.Now())
}

// RevokeGrant revokes a grant through the gate, as l.By.
func (l *Local) RevokeGrant(ctx context.Context, id string) error {
	return l.Gate.RevokeGrant(ctx, id, l.By)
}

// Round is what one look of Watch found.
type Round struct {
	// First is set on the first look, whose Arrived are the requests that
	// were already waiting.
	First bool
	// Arrived are the requests pending now that were not before, oldest
	// first.
	Arrived []portcullis.Approval
	// Answered are requests seen pending before that are no longer:
	// approved, denied or expired.
	Answered []portcullis.Approval
}

// Watch looks at the pending requests f selects every interval and hands
// fn what changed since the last look (the first look always, later ones
// only when something changed), until ctx ends, when it returns nil. An
// error of s or of fn ends it.
func Watch(ctx context.Context, s Service, f portcullis.ApprovalFilter, every time.Duration, fn func(Round) error) error {
	if every <= 0 {
		return fmt.Errorf("approvals: watch interval %s: want more than 0", every)
	}
	f.Status = portcullis.ApprovalPending
	seen := map[string]bool{}
	first := true
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		list, err := s.Approvals(ctx, f)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		r := Round{First: first}
		now := map[string]bool{}
		for _, a := range list {
			now[a.ID] = true
			if !seen[a.ID] {
				r.Arrived = append(r.Arrived, a)
			}
		}
		// The list is newest first; report them as they arrived.
		slices.Reverse(r.Arrived)
		for id := range seen {
			if now[id] {
				continue
			}
			// Answered, expired, or past the list's limit: ask which.
			a, err := s.Approval(ctx, id)
			if ctx.Err() != nil {
				return nil
			}
			if err != nil {
				return err
			}
			if a.Status == portcullis.ApprovalPending {
				continue
			}
			r.Answered = append(r.Answered, a)
			delete(seen, id)
		}
		for id := range now {
			seen[id] = true
		}
		if first || len(r.Arrived) > 0 || len(r.Answered) > 0 {
			if err := fn(r); err != nil {
				return err
			}
		}
		first = false
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
