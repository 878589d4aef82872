// Package memstore is an in-process portcullis.Store: grants and approval
// requests kept in memory for as long as the process runs. It suits tests,
// the Go library, and one-shot commands; a gateway that people approve
// through needs a durable store.
//
// It must stay a faithful Store: atomic single-use grants, expiry by the
// caller's clock, NOT_FOUND errors where the interface says so.
package memstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"

	"github.com/portcullis/portcullis"
)

// Store keeps state in memory. The zero value is not usable; call New.
type Store struct {
	clock portcullis.Clock

	mu        sync.Mutex
	grants    map[string]portcullis.Grant
	approvals map[string]portcullis.Approval
}

var _ portcullis.Store = (*Store)(nil)

// New returns an empty store. A nil clock means the system clock; it stamps
// CreatedAt on grants.
func New(clock portcullis.Clock) *Store {
	if clock == nil {
		clock = portcullis.SystemClock{}
	}
	return &Store{clock: clock, grants: map[string]portcullis.Grant{}, approvals: map[string]portcullis.Approval{}}
}

// AddGrant records g, assigning an ID when it has none.
func (s *Store) AddGrant(ctx context.Context, g portcullis.Grant) (portcullis.Grant, error) {
	if err := ctx.Err(); err != nil {
		return portcullis.Grant{}, err
	}
	switch g.Kind {
	case portcullis.GrantSession:
	case portcullis.GrantSingle:
		if g.ArgsDigest == "" {
			d, err := portcullis.ArgsDigest(g.Args)
			if err != nil {
				return portcullis.Grant{}, err
			}
			g.ArgsDigest = d
		}
	default:
		return portcullis.Grant{}, fmt.Errorf("add grant: unknown kind %q", g.Kind)
	}
	if g.Tool == "" {
		return portcullis.Grant{}, fmt.Errorf("add grant: missing tool")
	}
	if g.ID == "" {
		var b [12]byte
		if _, err := rand.Read(b[:]); err != nil {
			return portcullis.Grant{}, fmt.Errorf("add grant: %w", err)
		}
		g.ID = "grt_" + hex.EncodeToString(b[:])
	}
	if g.CreatedAt.IsZero() {
		g.CreatedAt = s.clock.Now()
	}
	g.Args = nil
	s.mu.Lock()
	defer s.mu.Unlock()
	s.grants[g.ID] = g
	return g, nil
}

// UseGrant finds a grant covering q; a single-use grant is deleted when
// q.Consume is set. Session grants are preferred, so a call covered by one
// does not use up a single-use grant.
func (s *Store) UseGrant(ctx context.Context, q portcullis.GrantQuery) (portcullis.Grant, bool, error) {
	if err := ctx.Err(); err != nil {
		return portcullis.Grant{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var single *portcullis.Grant
	for id, g := range s.grants {
		if !g.ExpiresAt.IsZero() && !q.Now.Before(g.ExpiresAt) {
			delete(s.grants, id)
			continue
		}
		if !q.Covers(&g) {
			continue
		}
		if g.Kind == portcullis.GrantSession {
			return g, true, nil
		}
		if single == nil {
			g := g
			single = &g
		}
	}
	if single == nil {
		return portcullis.Grant{}, false, nil
	}
	if q.Consume {
		delete(s.grants, single.ID)
	}
	return *single, true, nil
}

// RevokeGrant deletes a grant.
func (s *Store) RevokeGrant(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.grants[id]; !ok {
		return portcullis.Errorf(portcullis.CodeNotFound, "no grant %q", id)
	}
	delete(s.grants, id)
	return nil
}

// CreateApproval records a pending approval request.
func (s *Store) CreateApproval(ctx context.Context, a portcullis.Approval) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if a.ID == "" {
		return fmt.Errorf("create approval: missing id")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.approvals[a.ID]; dup {
		return fmt.Errorf("create approval: id %q exists", a.ID)
	}
	s.approvals[a.ID] = a
	return nil
}

// Approval returns an approval request; a pending one past its expiry is
// reported as expired.
func (s *Store) Approval(ctx context.Context, id string) (portcullis.Approval, error) {
	if err := ctx.Err(); err != nil {
		return portcullis.Approval{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.approvals[id]
	if !ok {
		return portcullis.Approval{}, portcullis.Errorf(portcullis.CodeNotFound, "no approval request %q", id)
	}
	if a.Status == portcullis.ApprovalPending && !a.ExpiresAt.IsZero() && !s.clock.Now().Before(a.ExpiresAt) {
		a.Status = portcullis.ApprovalExpired
	}
	return a, nil
}
