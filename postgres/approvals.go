package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/portcullis/portcullis"
)

const approvalColumns = `id, decision_id, status, call, tool, args_digest, level, reason,
	created_at, expires_at, decided_by, decided_at, deny_reason`

// scanApproval reads an approval; a pending one past its expiry at now is
// reported as expired.
func scanApproval(row pgx.Row, now time.Time) (portcullis.Approval, error) {
	var a portcullis.Approval
	var call string
	var level int16
	var expires, decided *time.Time
	if err := row.Scan(&a.ID, &a.DecisionID, &a.Status, &call, &a.Tool, &a.ArgsDigest, &level, &a.Reason,
		&a.CreatedAt, &expires, &a.DecidedBy, &decided, &a.DenyReason); err != nil {
		return portcullis.Approval{}, err
	}
	dec := json.NewDecoder(strings.NewReader(call))
	dec.UseNumber()
	if err := dec.Decode(&a.Call); err != nil {
		return portcullis.Approval{}, fmt.Errorf("approval %q: decode its call: %w", a.ID, err)
	}
	a.Level = portcullis.Level(level)
	a.CreatedAt = a.CreatedAt.UTC()
	a.ExpiresAt = fromNull(expires)
	a.DecidedAt = fromNull(decided)
	if a.Status == portcullis.ApprovalPending && !a.ExpiresAt.IsZero() && !now.Before(a.ExpiresAt) {
		a.Status = portcullis.ApprovalExpired
	}
	return a, nil
}

var insertApprovalSQL = notifying(`INSERT INTO approvals (id, decision_id, status, call, session, agent, tool, args_digest, level, reason,
		created_at, expires_at, decided_by, decided_at, deny_reason)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) RETURNING 1`, 15)

// CreateApproval records an approval request. Its ID must be set
// (INVALID_REQUEST) and new (CONFLICT).
func (s *Store) CreateApproval(ctx context.Context, a portcullis.Approval) error {
	args, err := s.approvalArgs(a)
	if err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, insertApprovalSQL, args...); err != nil {
		return s.insertApprovalError(a.ID, err)
	}
	return nil
}

// approvalArgs checks a request and returns insertApprovalSQL's arguments.
func (s *Store) approvalArgs(a portcullis.Approval) ([]any, error) {
	if a.ID == "" {
		return nil, portcullis.Errorf(portcullis.CodeInvalidRequest, "create approval: missing id")
	}
	if len(a.ID) > maxIDBytes {
		return nil, portcullis.Errorf(portcullis.CodeInvalidRequest, "create approval: id is %d bytes, more than %d", len(a.ID), maxIDBytes)
	}
	status := a.Status
	switch status {
	case "":
		status = portcullis.ApprovalPending
	case portcullis.ApprovalPending, portcullis.ApprovalApproved, portcullis.ApprovalDenied:
	default:
		return nil, portcullis.Errorf(portcullis.CodeInvalidRequest, "create approval %q: status %q (want pending, approved or denied)", a.ID, a.Status)
	}
	var call bytes.Buffer
	enc := json.NewEncoder(&call)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&a.Call); err != nil {
		return nil, fmt.Errorf("create approval %q: encode its call: %w", a.ID, err)
	}
	return []any{a.ID, a.DecisionID, string(status), call.String(), a.Call.Session, a.Call.Agent, a.Tool, a.ArgsDigest, int16(a.Level), a.Reason,
		ts(a.CreatedAt), nullTime(a.ExpiresAt), a.DecidedBy, nullTime(a.DecidedAt), a.DenyReason,
		s.channel, payload(portcullis.ChangeApproval, a.ID)}, nil
}

func (s *Store) insertApprovalError(id string, err error) error {
	if isUniqueViolation(err) {
		return portcullis.Errorf(portcullis.CodeConflict, "create approval: id %q exists", id)
	}
	return s.fail("create approval", err)
}

// countPendingSQL counts the agent's pending, unexpired requests, and
// those of the agent's session.
const countPendingSQL = `SELECT count(*), count(*) FILTER (WHERE session = $2) FROM approvals
	WHERE agent = $1 AND status = 'pending' AND (expires_at IS NULL OR expires_at > $3)`

// CreateApprovalWithin records a pending approval request unless the
// agent, or its session, has as many pending, unexpired requests as lim
// allows. The count and the insert run in one transaction under an
// advisory lock of the agent, so the caps hold across every replica.
// INVALID_REQUEST without an ID or for a status other than pending;
// CONFLICT when the ID exists.
func (s *Store) CreateApprovalWithin(ctx context.Context, a portcullis.Approval, lim portcullis.PendingLimit) (portcullis.Admission, error) {
	if a.Status != "" && a.Status != portcullis.ApprovalPending {
		return portcullis.Admission{}, portcullis.Errorf(portcullis.CodeInvalidRequest, "create approval %q: status %q (want pending)", a.ID, a.Status)
	}
	args, err := s.approvalArgs(a)
	if err != nil {
		return portcullis.Admission{}, err
	}
	agent, session := a.Call.Agent, a.Call.Session
	now := s.now()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return portcullis.Admission{}, s.fail("create approval", err)
	}
	defer s.rollback(tx)
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", s.lockKey("pending approvals of "+agent)); err != nil {
		return portcullis.Admission{}, s.fail("create approval: lock the agent's requests", err)
	}
	var byAgent, bySession int
	if err := tx.QueryRow(ctx, countPendingSQL, agent, session, now).Scan(&byAgent, &bySession); err != nil {
		return portcullis.Admission{}, s.fail("create approval: count pending requests", err)
	}
	var adm portcullis.Admission
	switch {
	case lim.PerAgent > 0 && byAgent >= lim.PerAgent:
		adm.Scope, adm.Pending = portcullis.PendingScopeAgent, byAgent
	case lim.PerSession > 0 && bySession >= lim.PerSession:
		adm.Scope, adm.Pending = portcullis.PendingScopeSession, bySession
	}
	if adm.Scope != "" {
		key := ""
		if adm.Scope == portcullis.PendingScopeSession {
			key = session
		}
		tag, err := tx.Exec(ctx, `INSERT INTO approval_refusals (scope, agent, session, refused_at) VALUES ($1, $2, $3, $4)
			ON CONFLICT (scope, agent, session) DO NOTHING`, string(adm.Scope), agent, key, now)
		if err != nil {
			return portcullis.Admission{}, s.fail("create approval: record the refusal", err)
		}
		adm.Notify = tag.RowsAffected() == 1
	} else {
		if _, err := tx.Exec(ctx, `DELETE FROM approval_refusals WHERE agent = $1 AND (scope = 'agent' OR (scope = 'session' AND session = $2))`, agent, session); err != nil {
			return portcullis.Admission{}, s.fail("create approval: re-arm the refusal notice", err)
		}
		if _, err := tx.Exec(ctx, insertApprovalSQL, args...); err != nil {
			return portcullis.Admission{}, s.insertApprovalError(a.ID, err)
		}
		adm.Created = true
	}
	if err := tx.Commit(ctx); err != nil {
		return portcullis.Admission{}, s.fail("create approval: commit", err)
	}
	return adm, nil
}

// PendingCounts counts the pending, unexpired requests of each agent, most
// first.
func (s *Store) PendingCounts(ctx context.Context) ([]portcullis.PendingCount, error) {
	rows, err := s.pool.Query(ctx, `SELECT agent, count(*) FROM approvals
		WHERE status = 'pending' AND (expires_at IS NULL OR expires_at > $1) GROUP BY agent`, s.now())
	if err != nil {
		return nil, s.fail("count pending approvals", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (portcullis.PendingCount, error) {
		var c portcullis.PendingCount
		err := row.Scan(&c.Agent, &c.Pending)
		return c, err
	})
	if err != nil {
		return nil, s.fail("count pending approvals", err)
	}
	if out == nil {
		out = []portcullis.PendingCount{}
	}
	portcullis.SortPendingCounts(out)
	return out, nil
}

// Approval returns an approval request, or NOT_FOUND.
func (s *Store) Approval(ctx context.Context, id string) (portcullis.Approval, error) {
	a, err := scanApproval(s.pool.QueryRow(ctx, `SELECT `+approvalColumns+` FROM approvals WHERE id = $1`, id), s.now())
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return portcullis.Approval{}, portcullis.Errorf(portcullis.CodeNotFound, "no approval request %q", id)
	case err != nil:
		return portcullis.Approval{}, s.fail("read approval", err)
	}
	return a, nil
}

// Approvals lists approval requests, newest first.
func (s *Store) Approvals(ctx context.Context, f portcullis.ApprovalFilter) ([]portcullis.Approval, error) {
	now := s.now()
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	switch f.Status {
	case "":
	case portcullis.ApprovalPending:
		where = append(where, "status = 'pending' AND (expires_at IS NULL OR expires_at > "+arg(now)+")")
	case portcullis.ApprovalExpired:
		where = append(where, "status = 'pending' AND expires_at <= "+arg(now))
	default:
		where = append(where, "status = "+arg(string(f.Status)))
	}
	if f.Session != "" {
		where = append(where, "session = "+arg(f.Session))
	}
	if f.Agent != "" {
		where = append(where, "agent = "+arg(f.Agent))
	}
	if f.DecisionID != "" {
		where = append(where, "decision_id = "+arg(f.DecisionID))
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	sql := `SELECT ` + approvalColumns + ` FROM approvals`
	if len(where) > 0 {
		sql += " WHERE " + strings.Join(where, " AND ")
	}
	sql += " ORDER BY created_at DESC, id DESC LIMIT " + arg(limit)
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, s.fail("list approvals", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (portcullis.Approval, error) { return scanApproval(row, now) })
	if err != nil {
		return nil, s.fail("list approvals", err)
	}
	return out, nil
}

var decideApprovalSQL = `UPDATE approvals SET status = $2, decided_by = $3, decided_at = $4, deny_reason = $5
	WHERE id = $1 AND status = 'pending' AND (expires_at IS NULL OR expires_at > $6)
	RETURNING ` + approvalColumns

// DecideApproval moves a pending, unexpired request to approved or denied
// and records d.Grant in the same transaction. Of several deciders on any
// replica exactly one succeeds; the others, and a decision on an expired
// request, get CONFLICT. A missing request is NOT_FOUND, a status other
// than approved or denied INVALID_REQUEST.
func (s *Store) DecideApproval(ctx context.Context, id string, d portcullis.ApprovalDecision) (portcullis.Approval, error) {
	if d.Status != portcullis.ApprovalApproved && d.Status != portcullis.ApprovalDenied {
		return portcullis.Approval{}, portcullis.Errorf(portcullis.CodeInvalidRequest, "decide approval: status %q (want approved or denied)", d.Status)
	}
	var grant portcullis.Grant
	if d.Grant != nil {
		g, err := s.prepareGrant(*d.Grant)
		if err != nil {
			return portcullis.Approval{}, fmt.Errorf("decide approval %q: %w", id, err)
		}
		grant = g
	}
	reason := ""
	if d.Status == portcullis.ApprovalDenied {
		reason = d.Reason
	}
	now := s.now()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return portcullis.Approval{}, s.fail("decide approval", err)
	}
	defer s.rollback(tx)
	a, err := scanApproval(tx.QueryRow(ctx, decideApprovalSQL, id, string(d.Status), d.By, nullTime(d.At), reason, now), now)
	if errors.Is(err, pgx.ErrNoRows) {
		// Not pending any more, expired, or missing: say which.
		a, err := scanApproval(tx.QueryRow(ctx, `SELECT `+approvalColumns+` FROM approvals WHERE id = $1`, id), now)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return portcullis.Approval{}, portcullis.Errorf(portcullis.CodeNotFound, "no approval request %q", id)
		case err != nil:
			return portcullis.Approval{}, s.fail("decide approval", err)
		}
		return a, portcullis.Errorf(portcullis.CodeConflict, "approval request %q is already %s", id, a.Status)
	}
	if err != nil {
		return portcullis.Approval{}, s.fail("decide approval", err)
	}
	if d.Grant != nil {
		if _, err := tx.Exec(ctx, insertGrantSQL, append(grantArgs(&grant), s.channel, payload(portcullis.ChangeGrant, grant.ID))...); err != nil {
			if isUniqueViolation(err) {
				return portcullis.Approval{}, portcullis.Errorf(portcullis.CodeConflict, "decide approval %q: grant id %q exists", id, grant.ID)
			}
			return portcullis.Approval{}, s.fail("decide approval: record its grant", err)
		}
	}
	if _, err := tx.Exec(ctx, "SELECT pg_notify($1, $2)", s.channel, payload(portcullis.ChangeApproval, id)); err != nil {
		return portcullis.Approval{}, s.fail("decide approval", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return portcullis.Approval{}, s.fail("decide approval: commit", err)
	}
	return a, nil
}
