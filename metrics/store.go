package metrics

import (
	"context"
	"time"

	"github.com/portcullis/portcullis"
)

// Store returns st with every operation timed
// (portcullis_store_operation_duration_seconds) and its failures counted
// (portcullis_store_errors_total). It changes nothing else: errors and
// results pass through unchanged.
func (m *Metrics) Store(st portcullis.Store) portcullis.Store {
	return &store{st: st, m: m}
}

type store struct {
	st portcullis.Store
	m  *Metrics
}

var _ portcullis.Store = (*store)(nil)

func (s *store) done(op string, start time.Time, err error) {
	s.m.storeOps.WithLabelValues(op).Observe(time.Since(start).Seconds())
	if isStoreError(err) {
		s.m.storeErrors.WithLabelValues(op).Inc()
	}
}

func timed[T any](s *store, op string, f func() (T, error)) (T, error) {
	start := time.Now()
	v, err := f()
	s.done(op, start, err)
	return v, err
}

func timed0(s *store, op string, f func() error) error {
	start := time.Now()
	err := f()
	s.done(op, start, err)
	return err
}

func timed2[T any](s *store, op string, f func() (T, bool, error)) (T, bool, error) {
	start := time.Now()
	v, ok, err := f()
	s.done(op, start, err)
	return v, ok, err
}

func (s *store) AddGrant(ctx context.Context, g portcullis.Grant) (portcullis.Grant, error) {
	return timed(s, "add_grant", func() (portcullis.Grant, error) { return s.st.AddGrant(ctx, g) })
}

func (s *store) UseGrant(ctx context.Context, q portcullis.GrantQuery) (portcullis.Grant, bool, error) {
	return timed2(s, "use_grant", func() (portcullis.Grant, bool, error) { return s.st.UseGrant(ctx, q) })
}

func (s *store) RevokeGrant(ctx context.Context, id string) error {
	return timed0(s, "revoke_grant", func() error { return s.st.RevokeGrant(ctx, id) })
}

func (s *store) Grants(ctx context.Context, session string, now time.Time) ([]portcullis.Grant, error) {
	return timed(s, "grants", func() ([]portcullis.Grant, error) { return s.st.Grants(ctx, session, now) })
}

func (s *store) CreateApproval(ctx context.Context, a portcullis.Approval) error {
	return timed0(s, "create_approval", func() error { return s.st.CreateApproval(ctx, a) })
}

func (s *store) CreateApprovalWithin(ctx context.Context, a portcullis.Approval, lim portcullis.PendingLimit) (portcullis.Admission, error) {
	return timed(s, "create_approval", func() (portcullis.Admission, error) { return s.st.CreateApprovalWithin(ctx, a, lim) })
}

func (s *store) TakeBudget(ctx context.Context, charges []portcullis.BudgetCharge, mode portcullis.BudgetMode, now time.Time) (portcullis.BudgetResult, error) {
	res, err := timed(s, "take_budget", func() (portcullis.BudgetResult, error) { return s.st.TakeBudget(ctx, charges, mode, now) })
	if err != nil || mode == portcullis.BudgetPeek {
		return res, err
	}
	if res.Taken {
		for _, c := range charges {
			s.m.budgetTaken.WithLabelValues(c.Budget).Add(units(c.Cost))
		}
	}
	if !res.Taken && res.Over >= 0 && res.Over < len(charges) {
		s.m.budgetRefused.WithLabelValues(charges[res.Over].Budget).Inc()
	}
	return res, nil
}

func (s *store) ReturnBudget(ctx context.Context, charges []portcullis.BudgetCharge) error {
	return timed0(s, "return_budget", func() error { return s.st.ReturnBudget(ctx, charges) })
}

func (s *store) BudgetUse(ctx context.Context, now time.Time) ([]portcullis.BudgetUsage, error) {
	return timed(s, "budget_use", func() ([]portcullis.BudgetUsage, error) { return s.st.BudgetUse(ctx, now) })
}

func (s *store) PendingCounts(ctx context.Context) ([]portcullis.PendingCount, error) {
	return timed(s, "pending_counts", func() ([]portcullis.PendingCount, error) { return s.st.PendingCounts(ctx) })
}

func (s *store) Approval(ctx context.Context, id string) (portcullis.Approval, error) {
	return timed(s, "approval", func() (portcullis.Approval, error) { return s.st.Approval(ctx, id) })
}

func (s *store) Approvals(ctx context.Context, f portcullis.ApprovalFilter) ([]portcullis.Approval, error) {
	return timed(s, "approvals", func() ([]portcullis.Approval, error) { return s.st.Approvals(ctx, f) })
}

func (s *store) DecideApproval(ctx context.Context, id string, d portcullis.ApprovalDecision) (portcullis.Approval, error) {
	return timed(s, "decide_approval", func() (portcullis.Approval, error) { return s.st.DecideApproval(ctx, id, d) })
}

func (s *store) PutBlock(ctx context.Context, b portcullis.Block) error {
	return timed0(s, "put_block", func() error { return s.st.PutBlock(ctx, b) })
}

func (s *store) Block(ctx context.Context, agent string) (portcullis.Block, bool, error) {
	return timed2(s, "block", func() (portcullis.Block, bool, error) { return s.st.Block(ctx, agent) })
}

func (s *store) DeleteBlock(ctx context.Context, agent string) error {
	return timed0(s, "delete_block", func() error { return s.st.DeleteBlock(ctx, agent) })
}

func (s *store) Blocks(ctx context.Context) ([]portcullis.Block, error) {
	return timed(s, "blocks", func() ([]portcullis.Block, error) { return s.st.Blocks(ctx) })
}

func (s *store) CreateChallenge(ctx context.Context, c portcullis.Challenge) error {
	return timed0(s, "create_challenge", func() error { return s.st.CreateChallenge(ctx, c) })
}

func (s *store) Challenge(ctx context.Context, id string) (portcullis.Challenge, error) {
	return timed(s, "challenge", func() (portcullis.Challenge, error) { return s.st.Challenge(ctx, id) })
}

func (s *store) DeleteChallenge(ctx context.Context, id string) error {
	return timed0(s, "delete_challenge", func() error { return s.st.DeleteChallenge(ctx, id) })
}

func (s *store) AddFailedAttempt(ctx context.Context, agent string, at, since time.Time) (int, error) {
	return timed(s, "add_failed_attempt", func() (int, error) { return s.st.AddFailedAttempt(ctx, agent, at, since) })
}

func (s *store) FailedAttempts(ctx context.Context, agent string, since time.Time) (int, error) {
	return timed(s, "failed_attempts", func() (int, error) { return s.st.FailedAttempts(ctx, agent, since) })
}

func (s *store) RecordStep(ctx context.Context, runID, agent string, at time.Time) (portcullis.RunState, error) {
	return timed(s, "record_step", func() (portcullis.RunState, error) { return s.st.RecordStep(ctx, runID, agent, at) })
}

func (s *store) RecordOutcome(ctx context.Context, runID string, outcome portcullis.StepOutcome, at time.Time) error {
	return timed0(s, "record_outcome", func() error { return s.st.RecordOutcome(ctx, runID, outcome, at) })
}

func (s *store) RunState(ctx context.Context, runID string) (portcullis.RunState, bool, error) {
	return timed2(s, "run_state", func() (portcullis.RunState, bool, error) { return s.st.RunState(ctx, runID) })
}

func (s *store) RecordDenial(ctx context.Context, runID, signature string, at time.Time) (int, error) {
	return timed(s, "record_denial", func() (int, error) { return s.st.RecordDenial(ctx, runID, signature, at) })
}

func (s *store) ClearDenials(ctx context.Context, runID string) error {
	return timed0(s, "clear_denials", func() error { return s.st.ClearDenials(ctx, runID) })
}

func (s *store) ToolPin(ctx context.Context, upstream, tool string) (portcullis.ToolPin, bool, error) {
	return timed2(s, "tool_pin", func() (portcullis.ToolPin, bool, error) { return s.st.ToolPin(ctx, upstream, tool) })
}

func (s *store) PutToolPin(ctx context.Context, p portcullis.ToolPin) error {
	return timed0(s, "put_tool_pin", func() error { return s.st.PutToolPin(ctx, p) })
}

func (s *store) ToolPins(ctx context.Context) ([]portcullis.ToolPin, error) {
	return timed(s, "tool_pins", func() ([]portcullis.ToolPin, error) { return s.st.ToolPins(ctx) })
}

func (s *store) AppendAudit(ctx context.Context, evs ...portcullis.AuditEvent) ([]portcullis.AuditRecord, error) {
	return timed(s, "append_audit", func() ([]portcullis.AuditRecord, error) { return s.st.AppendAudit(ctx, evs...) })
}

func (s *store) QueryAudit(ctx context.Context, q portcullis.AuditQuery) ([]portcullis.AuditRecord, error) {
	return timed(s, "query_audit", func() ([]portcullis.AuditRecord, error) { return s.st.QueryAudit(ctx, q) })
}

func (s *store) ScanAudit(ctx context.Context, afterSeq int64, fn func(portcullis.AuditRecord) (bool, error)) error {
	return timed0(s, "scan_audit", func() error { return s.st.ScanAudit(ctx, afterSeq, fn) })
}

func (s *store) PruneAudit(ctx context.Context, cp portcullis.AuditCheckpoint) error {
	return timed0(s, "prune_audit", func() error { return s.st.PruneAudit(ctx, cp) })
}

func (s *store) AuditCheckpoint(ctx context.Context) (portcullis.AuditCheckpoint, bool, error) {
	return timed2(s, "audit_checkpoint", func() (portcullis.AuditCheckpoint, bool, error) { return s.st.AuditCheckpoint(ctx) })
}

// Watch is not timed: it lasts as long as its context.
func (s *store) Watch(ctx context.Context) (<-chan portcullis.Change, error) {
	ch, err := s.st.Watch(ctx)
	if isStoreError(err) {
		s.m.storeErrors.WithLabelValues("watch").Inc()
	}
	return ch, err
}

func (s *store) Close() error { return s.st.Close() }
