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
	denials    map[string]map[string]int
	pins       map[string]portcullis.ToolPin
	refusals   map[refusalKey]struct{} // caps reached since the last request recorded
	budgets    map[budgetKey]budgetRow
	audit      []auditRow
	checkpoint *portcullis.AuditCheckpoint
	watchers   map[*watcher]struct{}
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
		denials:    map[string]map[string]int{},
		pins:       map[string]portcullis.ToolPin{},
		refusals:   map[refusalKey]struct{}{},
		budgets:    map[budgetKey]budgetRow{},
		watchers:   map[*watcher]struct{}{},
	}
}

// AddGrant records g, assigning an ID when it has none.
func (s *Store) AddGrant(ctx context.Context, g portcullis.Grant) (portcullis.Grant, error) {
	if err := ctx.Err(); err != nil {
		return portcullis.Grant{}, err
	}
	g, err := s.prepareGrant(g)
	if err != nil {
		return portcullis.Grant{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.grants[g.ID] = g
	s.publishLocked(portcullis.Change{Kind: portcullis.ChangeGrant, ID: g.ID})
	return g, nil
}

// prepareGrant checks a grant and fills in its ID, digest and creation time.
func (s *Store) prepareGrant(g portcullis.Grant) (portcullis.Grant, error) {
	return portcullis.PrepareGrant(g, s.clock.Now())
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
	s.publishLocked(portcullis.Change{Kind: portcullis.ChangeGrant, ID: id})
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
	s.publishLocked(portcullis.Change{Kind: portcullis.ChangeApproval, ID: a.ID})
	return nil
}

// refusalKey names a cap that refused a request: an agent's (session
// empty) or a session's.
type refusalKey struct {
	scope          portcullis.PendingScope
	agent, session string
}

// CreateApprovalWithin records a pending approval request unless the
// agent or its session has as many pending, unexpired requests as lim
// allows. Counting and recording happen under one lock.
func (s *Store) CreateApprovalWithin(ctx context.Context, a portcullis.Approval, lim portcullis.PendingLimit) (portcullis.Admission, error) {
	if err := ctx.Err(); err != nil {
		return portcullis.Admission{}, err
	}
	if a.ID == "" {
		return portcullis.Admission{}, portcullis.Errorf(portcullis.CodeInvalidRequest, "create approval: missing id")
	}
	switch a.Status {
	case "":
		a.Status = portcullis.ApprovalPending
	case portcullis.ApprovalPending:
	default:
		return portcullis.Admission{}, portcullis.Errorf(portcullis.CodeInvalidRequest, "create approval %q: status %q (want pending)", a.ID, a.Status)
	}
	now := s.clock.Now()
	agent, session := a.Call.Agent, a.Call.Session
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.approvals[a.ID]; dup {
		return portcullis.Admission{}, portcullis.Errorf(portcullis.CodeConflict, "create approval: id %q exists", a.ID)
	}
	var byAgent, bySession int
	for _, p := range s.approvals {
		if p.Call.Agent != agent || expire(p, now).Status != portcullis.ApprovalPending {
			continue
		}
		byAgent++
		if p.Call.Session == session {
			bySession++
		}
	}
	refuse := func(scope portcullis.PendingScope, n int) (portcullis.Admission, error) {
		k := refusalKey{scope: scope, agent: agent}
		if scope == portcullis.PendingScopeSession {
			k.session = session
		}
		_, seen := s.refusals[k]
		s.refusals[k] = struct{}{}
		return portcullis.Admission{Scope: scope, Pending: n, Notify: !seen}, nil
	}
	switch {
	case lim.PerAgent > 0 && byAgent >= lim.PerAgent:
		return refuse(portcullis.PendingScopeAgent, byAgent)
	case lim.PerSession > 0 && bySession >= lim.PerSession:
		return refuse(portcullis.PendingScopeSession, bySession)
	}
	delete(s.refusals, refusalKey{scope: portcullis.PendingScopeAgent, agent: agent})
	delete(s.refusals, refusalKey{scope: portcullis.PendingScopeSession, agent: agent, session: session})
	s.approvals[a.ID] = a
	s.publishLocked(portcullis.Change{Kind: portcullis.ChangeApproval, ID: a.ID})
	return portcullis.Admission{Created: true}, nil
}

// PendingCounts counts the pending, unexpired requests of each agent,
// most first.
func (s *Store) PendingCounts(ctx context.Context) ([]portcullis.PendingCount, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	now := s.clock.Now()
	s.mu.Lock()
	n := map[string]int{}
	for _, a := range s.approvals {
		if expire(a, now).Status == portcullis.ApprovalPending {
			n[a.Call.Agent]++
		}
	}
	s.mu.Unlock()
	out := make([]portcullis.PendingCount, 0, len(n))
	for agent, c := range n {
		out = append(out, portcullis.PendingCount{Agent: agent, Pending: c})
	}
	portcullis.SortPendingCounts(out)
	return out, nil
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
	return expire(a, s.clock.Now()), nil
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
	s.publishLocked(portcullis.Change{Kind: portcullis.ChangeBlock, ID: b.Agent})
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
	s.publishLocked(portcullis.Change{Kind: portcullis.ChangeBlock, ID: agent})
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
	n := 0
	for _, t := range s.failures[agent] {
		if !t.Before(since) {
			n++
		}
	}
	return n, nil
}

// pruneBefore drops the times before since, reusing ts's array: the caller
// must store the result in place of ts.
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

// Grants lists live grants, oldest first.
func (s *Store) Grants(ctx context.Context, session string, now time.Time) ([]portcullis.Grant, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []portcullis.Grant
	for _, g := range s.grants {
		if (session == "" || g.Session == session) && (g.ExpiresAt.IsZero() || now.Before(g.ExpiresAt)) {
			out = append(out, g)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// Approvals lists approval requests, newest first.
func (s *Store) Approvals(ctx context.Context, f portcullis.ApprovalFilter) ([]portcullis.Approval, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []portcullis.Approval
	for _, a := range s.approvals {
		a = expire(a, now)
		if (f.Status == "" || a.Status == f.Status) && (f.Session == "" || a.Call.Session == f.Session) && (f.Agent == "" || a.Call.Agent == f.Agent) && (f.DecisionID == "" || a.DecisionID == f.DecisionID) {
			out = append(out, a)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.After(out[j].CreatedAt)
		}
		return out[i].ID > out[j].ID
	})
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func expire(a portcullis.Approval, now time.Time) portcullis.Approval {
	if a.Status == portcullis.ApprovalPending && !a.ExpiresAt.IsZero() && !now.Before(a.ExpiresAt) {
		a.Status = portcullis.ApprovalExpired
	}
	return a
}

// DecideApproval answers a pending request once, with its grant.
func (s *Store) DecideApproval(ctx context.Context, id string, d portcullis.ApprovalDecision) (portcullis.Approval, error) {
	if err := ctx.Err(); err != nil {
		return portcullis.Approval{}, err
	}
	if d.Status != portcullis.ApprovalApproved && d.Status != portcullis.ApprovalDenied {
		return portcullis.Approval{}, portcullis.Errorf(portcullis.CodeInvalidRequest, "decide approval: status %q (want approved or denied)", d.Status)
	}
	var grant portcullis.Grant
	if d.Grant != nil {
		g, err := s.prepareGrant(*d.Grant)
		if err != nil {
			return portcullis.Approval{}, err
		}
		grant = g
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.approvals[id]
	if !ok {
		return portcullis.Approval{}, portcullis.Errorf(portcullis.CodeNotFound, "no approval request %q", id)
	}
	a = expire(a, s.clock.Now())
	if a.Status != portcullis.ApprovalPending {
		return a, portcullis.Errorf(portcullis.CodeConflict, "approval request %q is already %s", id, a.Status)
	}
	a.Status, a.DecidedBy, a.DecidedAt = d.Status, d.By, d.At
	if d.Status == portcullis.ApprovalDenied {
		a.DenyReason = d.Reason
	}
	s.approvals[id] = a
	if d.Grant != nil {
		s.grants[grant.ID] = grant
	}
	s.publishLocked(portcullis.Change{Kind: portcullis.ChangeApproval, ID: id})
	return a, nil
}

// RecordDenial counts the run's denials of this action.
func (s *Store) RecordDenial(ctx context.Context, runID, signature string, at time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.denials[runID] == nil {
		s.denials[runID] = map[string]int{}
	}
	s.denials[runID][signature]++
	return s.denials[runID][signature], nil
}

// ClearDenials forgets the run's denials.
func (s *Store) ClearDenials(ctx context.Context, runID string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.denials, runID)
	return nil
}

// ToolPin returns a pin.
func (s *Store) ToolPin(ctx context.Context, upstream, tool string) (portcullis.ToolPin, bool, error) {
	if err := ctx.Err(); err != nil {
		return portcullis.ToolPin{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.pins[upstream+"/"+tool]
	return p, ok, nil
}

// PutToolPin creates or replaces a pin.
func (s *Store) PutToolPin(ctx context.Context, p portcullis.ToolPin) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if p.Tool == "" || p.Hash == "" {
		return fmt.Errorf("put tool pin: missing tool or hash")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pins[p.Upstream+"/"+p.Tool] = p
	s.publishLocked(portcullis.Change{Kind: portcullis.ChangePin, ID: p.Upstream + "/" + p.Tool})
	return nil
}

// ToolPins lists every pin by upstream and tool.
func (s *Store) ToolPins(ctx context.Context) ([]portcullis.ToolPin, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]portcullis.ToolPin, 0, len(s.pins))
	for _, p := range s.pins {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Upstream != out[j].Upstream {
			return out[i].Upstream < out[j].Upstream
		}
		return out[i].Tool < out[j].Tool
	})
	return out, nil
}

// AppendAudit chains the events to the log.
func (s *Store) AppendAudit(ctx context.Context, evs ...portcullis.AuditEvent) ([]portcullis.AuditRecord, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	bodies := make([][]byte, len(evs))
	for i := range evs {
		b, err := portcullis.EncodeAuditBody(&evs[i])
		if err != nil {
			return nil, err
		}
		bodies[i] = b
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]portcullis.AuditRecord, len(evs))
	for i, b := range bodies {
		prev, seq := s.auditHead()
		r := portcullis.AuditRecord{Seq: seq + 1, Body: b, PrevHash: prev}
		r.Hash = portcullis.ChainHash(prev, r.Seq, b)
		s.audit = append(s.audit, auditRow{rec: r, ev: evs[i]})
		out[i] = r
	}
	return out, nil
}

type auditRow struct {
	rec portcullis.AuditRecord
	ev  portcullis.AuditEvent
}

func (s *Store) auditHead() (hash string, seq int64) {
	if n := len(s.audit); n > 0 {
		r := s.audit[n-1].rec
		return r.Hash, r.Seq
	}
	if s.checkpoint != nil {
		return s.checkpoint.Hash, s.checkpoint.Seq
	}
	return portcullis.GenesisHash, 0
}

// QueryAudit filters the log.
func (s *Store) QueryAudit(ctx context.Context, q portcullis.AuditQuery) ([]portcullis.AuditRecord, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []portcullis.AuditRecord
	match := func(r auditRow) bool {
		ev := r.ev
		return r.rec.Seq > q.AfterSeq && (q.BeforeSeq == 0 || r.rec.Seq < q.BeforeSeq) &&
			(q.Session == "" || ev.Session == q.Session) && (q.Agent == "" || ev.Agent == q.Agent) &&
			(q.Tool == "" || ev.Tool == q.Tool) && (q.Outcome == "" || ev.Outcome == q.Outcome) &&
			(q.Kind == "" || ev.Kind == q.Kind) && (q.Since.IsZero() || !ev.Time.Before(q.Since)) &&
			(q.Until.IsZero() || ev.Time.Before(q.Until))
	}
	if q.Newest {
		for i := len(s.audit) - 1; i >= 0 && len(out) < limit; i-- {
			if match(s.audit[i]) {
				out = append(out, s.audit[i].rec)
			}
		}
		return out, nil
	}
	for i := 0; i < len(s.audit) && len(out) < limit; i++ {
		if match(s.audit[i]) {
			out = append(out, s.audit[i].rec)
		}
	}
	return out, nil
}

// ScanAudit walks the log in order.
func (s *Store) ScanAudit(ctx context.Context, afterSeq int64, fn func(portcullis.AuditRecord) (bool, error)) error {
	s.mu.Lock()
	rows := make([]portcullis.AuditRecord, 0, len(s.audit))
	for _, r := range s.audit {
		if r.rec.Seq > afterSeq {
			// The queries filter on the event as appended: those are
			// this store's copied columns.
			rec := r.rec
			c := portcullis.ColumnsOf(&r.ev)
			rec.Columns = &c
			rows = append(rows, rec)
		}
	}
	s.mu.Unlock()
	for _, r := range rows {
		if err := ctx.Err(); err != nil {
			return err
		}
		more, err := fn(r)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// PruneAudit drops the rows up to cp.Seq and keeps cp.
func (s *Store) PruneAudit(ctx context.Context, cp portcullis.AuditCheckpoint) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i := sort.Search(len(s.audit), func(i int) bool { return s.audit[i].rec.Seq >= cp.Seq })
	if i == len(s.audit) || s.audit[i].rec.Seq != cp.Seq || s.audit[i].rec.Hash != cp.Hash {
		return portcullis.Errorf(portcullis.CodeInvalidRequest, "prune audit: checkpoint does not name row %d and its hash", cp.Seq)
	}
	s.audit = append([]auditRow(nil), s.audit[i+1:]...)
	s.checkpoint = &cp
	return nil
}

// AuditCheckpoint returns the checkpoint of the pruned prefix.
func (s *Store) AuditCheckpoint(ctx context.Context) (portcullis.AuditCheckpoint, bool, error) {
	if err := ctx.Err(); err != nil {
		return portcullis.AuditCheckpoint{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.checkpoint == nil {
		return portcullis.AuditCheckpoint{}, false, nil
	}
	return *s.checkpoint, true, nil
}

// Watch delivers changes made through this store.
func (s *Store) Watch(ctx context.Context) (<-chan portcullis.Change, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	w := &watcher{ch: make(chan portcullis.Change, 64)}
	s.mu.Lock()
	s.watchers[w] = struct{}{}
	s.mu.Unlock()
	go func() {
		<-ctx.Done()
		s.mu.Lock()
		delete(s.watchers, w)
		close(w.ch)
		s.mu.Unlock()
	}()
	return w.ch, nil
}

type watcher struct {
	ch     chan portcullis.Change
	missed bool
}

// publishLocked sends c to every watcher without blocking; a watcher that
// falls behind is sent a resync as soon as it has room.
func (s *Store) publishLocked(c portcullis.Change) {
	for w := range s.watchers {
		if w.missed {
			select {
			case w.ch <- portcullis.Change{Kind: portcullis.ChangeResync}:
				w.missed = false
			default:
				continue
			}
		}
		select {
		case w.ch <- c:
		default:
			w.missed = true
		}
	}
}

// Close ends every watch.
func (s *Store) Close() error { return nil }

// budgetKey names one budget counter: budget, key and window start.
type budgetKey struct {
	budget, agent, session, tool string
	start                        int64
}

type budgetRow struct {
	end   time.Time
	used  portcullis.Amount
	limit portcullis.Amount
}

func keyOf(c *portcullis.BudgetCharge) budgetKey {
	return budgetKey{c.Budget, c.Agent, c.Session, c.Tool, c.Start.UnixNano()}
}

// TakeBudget checks and records the charges under the store's lock.
func (s *Store) TakeBudget(ctx context.Context, charges []portcullis.BudgetCharge, mode portcullis.BudgetMode, now time.Time) (portcullis.BudgetResult, error) {
	if err := ctx.Err(); err != nil {
		return portcullis.BudgetResult{}, err
	}
	if err := portcullis.CheckCharges(charges); err != nil {
		return portcullis.BudgetResult{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, r := range s.budgets {
		if !r.end.After(now) {
			delete(s.budgets, k)
		}
	}
	res := portcullis.BudgetResult{Over: -1, Used: make([]portcullis.Amount, len(charges))}
	pending := map[budgetKey]portcullis.Amount{} // charges of this call to the same counter add up
	for i := range charges {
		c := &charges[i]
		k := keyOf(c)
		used := s.budgets[k].used + pending[k]
		res.Used[i] = used
		if used+c.Cost > c.Limit && res.Over < 0 {
			res.Over = i
		}
		pending[k] += c.Cost
	}
	if mode == portcullis.BudgetPeek || (mode == portcullis.BudgetTakeIfFits && res.Over >= 0) {
		return res, nil
	}
	for i := range charges {
		c := &charges[i]
		k := keyOf(c)
		r := s.budgets[k]
		r.end, r.limit, r.used = c.End.UTC(), c.Limit, r.used+c.Cost
		s.budgets[k] = r
	}
	res.Taken = true
	return res, nil
}

// ReturnBudget gives back charges taken for a call not let through.
func (s *Store) ReturnBudget(ctx context.Context, charges []portcullis.BudgetCharge) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := portcullis.CheckCharges(charges); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range charges {
		k := keyOf(&charges[i])
		if r, ok := s.budgets[k]; ok {
			r.used = max(r.used-charges[i].Cost, 0)
			s.budgets[k] = r
		}
	}
	return nil
}

// BudgetUse lists the counters whose window holds now.
func (s *Store) BudgetUse(ctx context.Context, now time.Time) ([]portcullis.BudgetUsage, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []portcullis.BudgetUsage
	for k, r := range s.budgets {
		start := time.Unix(0, k.start).UTC()
		if now.Before(start) || !r.end.After(now) {
			continue
		}
		out = append(out, portcullis.BudgetUsage{Budget: k.budget, Agent: k.agent, Session: k.session, Tool: k.tool,
			Start: start, End: r.end, Used: r.used, Limit: r.limit})
	}
	portcullis.SortBudgetUsage(out)
	return out, nil
}
