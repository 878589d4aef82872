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
	"sort"
	"sync"
	"time"

	"github.com/portcullis/portcullis"
)

// Store keeps state in memory. The zero value is not usable; call New.
type Store struct {
	clock portcullis.Clock

	mu         sync.Mutex
	grants     map[string]portcullis.Grant
	approvals  map[string]portcullis.Approval
	blocks     map[string]portcullis.Block
	challenges map[string]portcullis.Challenge
	failures   map[string][]time.Time
	runs       map[string]portcullis.RunState
}

var _ portcullis.Store = (*Store)(nil)

// New returns an empty store. A nil clock means the system clock; it stamps
// CreatedAt on grants.
func New(clock portcullis.Clock) *Store {
	if clock == nil {
		clock = portcullis.SystemClock{}
	}
	return &Store{
		clock:      clock,
		grants:     map[string]portcullis.Grant{},
		approvals:  map[string]portcullis.Approval{},
		blocks:     map[string]portcullis.Block{},
		challenges: map[string]portcullis.Challenge{},
		failures:   map[string][]time.Time{},
		runs:       map[string]portcullis.RunState{},
	}
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

// PutBlock records a block, replacing the agent's earlier one.
func (s *Store) PutBlock(ctx context.Context, b portcullis.Block) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if b.Agent == "" {
		return fmt.Errorf("put block: missing agent")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.blocks[b.Agent] = b
	return nil
}

// Block returns the agent's block.
func (s *Store) Block(ctx context.Context, agent string) (portcullis.Block, bool, error) {
	if err := ctx.Err(); err != nil {
		return portcullis.Block{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.blocks[agent]
	return b, ok, nil
}

// DeleteBlock clears the agent's block.
func (s *Store) DeleteBlock(ctx context.Context, agent string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.blocks[agent]; !ok {
		return portcullis.Errorf(portcullis.CodeNotFound, "agent %q is not blocked", agent)
	}
	delete(s.blocks, agent)
	return nil
}

// Blocks lists every block, oldest first.
func (s *Store) Blocks(ctx context.Context) ([]portcullis.Block, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]portcullis.Block, 0, len(s.blocks))
	for _, b := range s.blocks {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].Agent < out[j].Agent
	})
	return out, nil
}

// CreateChallenge records a challenge.
func (s *Store) CreateChallenge(ctx context.Context, c portcullis.Challenge) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if c.ID == "" {
		return fmt.Errorf("create challenge: missing id")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.challenges[c.ID]; dup {
		return fmt.Errorf("create challenge: id %q exists", c.ID)
	}
	s.challenges[c.ID] = c
	return nil
}

// Challenge returns a challenge.
func (s *Store) Challenge(ctx context.Context, id string) (portcullis.Challenge, error) {
	if err := ctx.Err(); err != nil {
		return portcullis.Challenge{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.challenges[id]
	if !ok {
		return portcullis.Challenge{}, portcullis.Errorf(portcullis.CodeNotFound, "no challenge %q", id)
	}
	return c, nil
}

// DeleteChallenge removes a challenge.
func (s *Store) DeleteChallenge(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.challenges, id)
	return nil
}

// AddFailedAttempt records a failure and counts the agent's failures since
// the given time; older ones are forgotten.
func (s *Store) AddFailedAttempt(ctx context.Context, agent string, at, since time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures[agent] = append(pruneBefore(s.failures[agent], since), at)
	return len(s.failures[agent]), nil
}

// FailedAttempts counts the agent's failures since the given time.
func (s *Store) FailedAttempts(ctx context.Context, agent string, since time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(pruneBefore(s.failures[agent], since)), nil
}

func pruneBefore(ts []time.Time, since time.Time) []time.Time {
	out := ts[:0]
	for _, t := range ts {
		if !t.Before(since) {
			out = append(out, t)
		}
	}
	return out
}

// RecordStep counts a step of the run and returns the state before it.
func (s *Store) RecordStep(ctx context.Context, runID, agent string, at time.Time) (portcullis.RunState, error) {
	if err := ctx.Err(); err != nil {
		return portcullis.RunState{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	before, ok := s.runs[runID]
	if !ok {
		before = portcullis.RunState{RunID: runID, Agent: agent}
	}
	after := before
	after.Steps++
	after.UpdatedAt = at
	s.runs[runID] = after
	return before, nil
}

// RecordOutcome records the outcome of the run's latest step.
func (s *Store) RecordOutcome(ctx context.Context, runID string, outcome portcullis.StepOutcome, at time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runs[runID]
	if !ok {
		return portcullis.Errorf(portcullis.CodeNotFound, "no run %q", runID)
	}
	r.LastOutcome = outcome
	r.UpdatedAt = at
	s.runs[runID] = r
	return nil
}

// RunState returns a run's state.
func (s *Store) RunState(ctx context.Context, runID string) (portcullis.RunState, bool, error) {
	if err := ctx.Err(); err != nil {
		return portcullis.RunState{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runs[runID]
	return r, ok, nil
}
