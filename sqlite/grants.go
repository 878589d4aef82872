package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/portcullis/portcullis"
)

const selectGrants = `SELECT id, kind, tool, element_type, session, args_digest, granted_by, created_at, expires_at FROM grants`

type scanner interface {
	Scan(dest ...any) error
}

func scanGrant(sc scanner) (portcullis.Grant, error) {
	var g portcullis.Grant
	var kind string
	var created, expires int64
	if err := sc.Scan(&g.ID, &kind, &g.Tool, &g.ElementType, &g.Session, &g.ArgsDigest, &g.GrantedBy, &created, &expires); err != nil {
		return portcullis.Grant{}, err
	}
	g.Kind = portcullis.GrantKind(kind)
	g.CreatedAt, g.ExpiresAt = fromNanos(created), fromNanos(expires)
	return g, nil
}

// prepareGrant checks a grant and fills in its ID, digest and creation time.
func (s *Store) prepareGrant(g portcullis.Grant) (portcullis.Grant, error) {
	return portcullis.PrepareGrant(g, s.clock.Now())
}

func insertGrant(ctx context.Context, t *tx, g portcullis.Grant) error {
	res, err := t.ExecContext(ctx, `INSERT INTO grants (id, kind, tool, element_type, session, args_digest, granted_by, created_at, expires_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
		g.ID, string(g.Kind), g.Tool, g.ElementType, g.Session, g.ArgsDigest, g.GrantedBy, nanos(g.CreatedAt), nanos(g.ExpiresAt))
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return portcullis.Errorf(portcullis.CodeConflict, "grant %q exists", g.ID)
	}
	return t.change(ctx, portcullis.ChangeGrant, g.ID)
}

// AddGrant records g, assigning an ID when it has none. INVALID_REQUEST for
// a grant without a tool or of an unknown kind; CONFLICT when the ID exists.
func (s *Store) AddGrant(ctx context.Context, g portcullis.Grant) (portcullis.Grant, error) {
	g, err := s.prepareGrant(g)
	if err != nil {
		return portcullis.Grant{}, fmt.Errorf("sqlite: add grant: %w", err)
	}
	err = s.write(ctx, "add grant", func(t *tx) error { return insertGrant(ctx, t, g) })
	if err != nil {
		return portcullis.Grant{}, err
	}
	return g, nil
}

// coveringGrant selects the grant that satisfies a query, a session grant
// first: the rules of portcullis.GrantQuery in SQL, so only the answer is
// read. The parameters are session, tool, now, whether session grants
// count, element type, whether single-use grants count, argument digest.
const coveringGrant = selectGrants + ` WHERE session = ? AND tool = ? AND (expires_at = 0 OR expires_at > ?)
	AND ((kind = 'session' AND ? AND (element_type = '' OR element_type = ?))
	  OR (kind = 'single' AND ? AND args_digest <> '' AND args_digest = ?))
	ORDER BY kind = 'single', created_at, id LIMIT 1`

func coveringArgs(q *portcullis.GrantQuery, singleOnly bool) []any {
	return []any{q.Session, q.Tool, nanos(q.Now), !singleOnly && q.Level == portcullis.ConfirmSession, q.ElementType, q.Level.IsConfirm(), q.ArgsDigest}
}

// UseGrant finds a live grant covering q. A session grant is preferred; a
// single-use grant is deleted when q.Consume is set, in a write transaction
// that chooses it again under the lock, so of several callers (in any
// process) exactly one gets it. Finding a grant without consuming one is a
// read and takes no lock.
func (s *Store) UseGrant(ctx context.Context, q portcullis.GrantQuery) (portcullis.Grant, bool, error) {
	if err := s.read(ctx, "use grant"); err != nil {
		return portcullis.Grant{}, false, err
	}
	g, ok, err := oneGrant(s.grantsStmt.QueryRowContext(ctx, coveringArgs(&q, false)...), &q)
	if err != nil {
		return portcullis.Grant{}, false, fmt.Errorf("sqlite: use grant: %w", err)
	}
	if !ok || g.Kind == portcullis.GrantSession || !q.Consume {
		return g, ok, nil
	}
	// Consume a single-use grant: choose again under the write lock, since
	// another caller may have taken the one seen.
	err = s.write(ctx, "use grant", func(t *tx) error {
		if g, ok, err = oneGrant(t.QueryRowContext(ctx, coveringGrant, coveringArgs(&q, true)...), &q); err != nil || !ok {
			return err
		}
		if _, err := t.ExecContext(ctx, `DELETE FROM grants WHERE id = ?`, g.ID); err != nil {
			return err
		}
		return t.change(ctx, portcullis.ChangeGrant, g.ID)
	})
	if err != nil {
		return portcullis.Grant{}, false, err
	}
	return g, ok, nil
}

// oneGrant reads the grant coveringGrant selected, if any, and checks it
// with q.Covers as well.
func oneGrant(row *sql.Row, q *portcullis.GrantQuery) (portcullis.Grant, bool, error) {
	g, err := scanGrant(row)
	if errors.Is(err, sql.ErrNoRows) {
		return portcullis.Grant{}, false, nil
	}
	if err != nil {
		return portcullis.Grant{}, false, err
	}
	if !q.Covers(&g) {
		return portcullis.Grant{}, false, fmt.Errorf("grant %s selected for %s in session %q does not cover the call", g.ID, q.Tool, q.Session)
	}
	return g, true, nil
}

// RevokeGrant deletes a grant; NOT_FOUND when there is none.
func (s *Store) RevokeGrant(ctx context.Context, id string) error {
	return s.write(ctx, "revoke grant", func(t *tx) error {
		res, err := t.ExecContext(ctx, `DELETE FROM grants WHERE id = ?`, id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return portcullis.Errorf(portcullis.CodeNotFound, "no grant %q", id)
		}
		return t.change(ctx, portcullis.ChangeGrant, id)
	})
}

// Grants lists the grants live at now (of one session, or of all when
// session is empty), oldest first.
func (s *Store) Grants(ctx context.Context, session string, now time.Time) ([]portcullis.Grant, error) {
	if err := s.read(ctx, "list grants"); err != nil {
		return nil, err
	}
	query := selectGrants + ` WHERE (expires_at = 0 OR expires_at > ?)`
	args := []any{nanos(now)}
	if session != "" {
		query += ` AND session = ?`
		args = append(args, session)
	}
	rows, err := s.rdb.QueryContext(ctx, query+` ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list grants: %w", err)
	}
	defer rows.Close()
	var out []portcullis.Grant
	for rows.Next() {
		g, err := scanGrant(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list grants: %w", err)
		}
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list grants: %w", err)
	}
	return out, nil
}

const selectApprovals = `SELECT id, decision_id, status, tool, args_digest, level, reason, call, created_at, expires_at, decided_by, decided_at, deny_reason FROM approvals`

func scanApproval(sc scanner) (portcullis.Approval, error) {
	var a portcullis.Approval
	var status, level string
	var call []byte
	var created, expires, decided int64
	if err := sc.Scan(&a.ID, &a.DecisionID, &status, &a.Tool, &a.ArgsDigest, &level, &a.Reason, &call, &created, &expires, &a.DecidedBy, &decided, &a.DenyReason); err != nil {
		return portcullis.Approval{}, err
	}
	a.Status = portcullis.ApprovalStatus(status)
	if level != "" {
		l, err := portcullis.ParseLevel(level)
		if err != nil {
			return portcullis.Approval{}, fmt.Errorf("approval %q: %w", a.ID, err)
		}
		a.Level = l
	}
	dec := json.NewDecoder(bytes.NewReader(call))
	dec.UseNumber()
	if err := dec.Decode(&a.Call); err != nil {
		return portcullis.Approval{}, fmt.Errorf("approval %q: decode call: %w", a.ID, err)
	}
	a.CreatedAt, a.ExpiresAt, a.DecidedAt = fromNanos(created), fromNanos(expires), fromNanos(decided)
	return a, nil
}

// expire reports a pending request past its expiry as expired.
func expire(a portcullis.Approval, now time.Time) portcullis.Approval {
	if a.Status == portcullis.ApprovalPending && !a.ExpiresAt.IsZero() && !now.Before(a.ExpiresAt) {
		a.Status = portcullis.ApprovalExpired
	}
	return a
}

// CreateApproval records a pending approval request. INVALID_REQUEST
// without an ID; CONFLICT when the ID exists.
func (s *Store) CreateApproval(ctx context.Context, a portcullis.Approval) error {
	ins, err := newApprovalInsert(a)
	if err != nil {
		return err
	}
	return s.write(ctx, "create approval", func(t *tx) error { return ins.exec(ctx, t) })
}

// approvalInsert is an approval request ready to be inserted.
type approvalInsert struct {
	a     portcullis.Approval
	call  []byte
	level string
}

func newApprovalInsert(a portcullis.Approval) (*approvalInsert, error) {
	if a.ID == "" {
		return nil, portcullis.Errorf(portcullis.CodeInvalidRequest, "sqlite: create approval: missing id")
	}
	if a.Status == "" {
		a.Status = portcullis.ApprovalPending
	}
	call, err := json.Marshal(a.Call)
	if err != nil {
		return nil, fmt.Errorf("sqlite: create approval: encode call: %w", err)
	}
	level := ""
	if a.Level != portcullis.LevelUnset {
		level = a.Level.String()
	}
	return &approvalInsert{a: a, call: call, level: level}, nil
}

func (ins *approvalInsert) exec(ctx context.Context, t *tx) error {
	a := &ins.a
	res, err := t.ExecContext(ctx, `INSERT INTO approvals (id, decision_id, status, session, agent, tool, args_digest, level, reason, call, created_at, expires_at, decided_by, decided_at, deny_reason)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
		a.ID, a.DecisionID, string(a.Status), a.Call.Session, a.Call.Agent, a.Tool, a.ArgsDigest, ins.level, a.Reason, ins.call,
		nanos(a.CreatedAt), nanos(a.ExpiresAt), a.DecidedBy, nanos(a.DecidedAt), a.DenyReason)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return portcullis.Errorf(portcullis.CodeConflict, "approval request %q exists", a.ID)
	}
	return t.change(ctx, portcullis.ChangeApproval, a.ID)
}

// countPending counts the agent's pending, unexpired requests, and those
// of the agent's session.
const countPending = `SELECT count(*), coalesce(sum(session = ?), 0) FROM approvals
	WHERE agent = ? AND status = 'pending' AND (expires_at = 0 OR expires_at > ?)`

// CreateApprovalWithin records a pending approval request unless the
// agent, or its session, has as many pending, unexpired requests as lim
// allows. It counts and inserts in one BEGIN IMMEDIATE transaction, so the
// caps hold across goroutines and processes. INVALID_REQUEST without an ID
// or for a status other than pending; CONFLICT when the ID exists.
func (s *Store) CreateApprovalWithin(ctx context.Context, a portcullis.Approval, lim portcullis.PendingLimit) (portcullis.Admission, error) {
	if a.Status != "" && a.Status != portcullis.ApprovalPending {
		return portcullis.Admission{}, portcullis.Errorf(portcullis.CodeInvalidRequest, "sqlite: create approval %q: status %q (want pending)", a.ID, a.Status)
	}
	ins, err := newApprovalInsert(a)
	if err != nil {
		return portcullis.Admission{}, err
	}
	agent, session := a.Call.Agent, a.Call.Session
	var adm portcullis.Admission
	err = s.write(ctx, "create approval", func(t *tx) error {
		adm = portcullis.Admission{}
		var byAgent, bySession int
		if err := t.QueryRowContext(ctx, countPending, session, agent, t.now).Scan(&byAgent, &bySession); err != nil {
			return fmt.Errorf("count pending requests: %w", err)
		}
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
			res, err := t.ExecContext(ctx, `INSERT INTO approval_refusals (scope, agent, session, refused_at) VALUES (?, ?, ?, ?)
				ON CONFLICT (scope, agent, session) DO NOTHING`, string(adm.Scope), agent, key, t.now)
			if err != nil {
				return fmt.Errorf("record the refusal: %w", err)
			}
			n, err := res.RowsAffected()
			if err != nil {
				return fmt.Errorf("record the refusal: %w", err)
			}
			adm.Notify = n == 1
			return nil
		}
		if _, err := t.ExecContext(ctx, `DELETE FROM approval_refusals WHERE agent = ? AND (scope = 'agent' OR (scope = 'session' AND session = ?))`, agent, session); err != nil {
			return fmt.Errorf("re-arm the refusal notice: %w", err)
		}
		if err := ins.exec(ctx, t); err != nil {
			return err
		}
		adm.Created = true
		return nil
	})
	if err != nil {
		return portcullis.Admission{}, err
	}
	return adm, nil
}

// PendingCounts counts the pending, unexpired requests of each agent, most
// first.
func (s *Store) PendingCounts(ctx context.Context) ([]portcullis.PendingCount, error) {
	if err := s.read(ctx, "count pending approvals"); err != nil {
		return nil, err
	}
	rows, err := s.rdb.QueryContext(ctx, `SELECT agent, count(*) FROM approvals
		WHERE status = 'pending' AND (expires_at = 0 OR expires_at > ?)
		GROUP BY agent`, nanos(s.clock.Now()))
	if err != nil {
		return nil, fmt.Errorf("sqlite: count pending approvals: %w", err)
	}
	defer rows.Close()
	out := []portcullis.PendingCount{}
	for rows.Next() {
		var c portcullis.PendingCount
		if err := rows.Scan(&c.Agent, &c.Pending); err != nil {
			return nil, fmt.Errorf("sqlite: count pending approvals: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: count pending approvals: %w", err)
	}
	portcullis.SortPendingCounts(out)
	return out, nil
}

// Approval returns an approval request; NOT_FOUND when there is none. A
// pending request past its expiry (by the store's clock) is expired.
func (s *Store) Approval(ctx context.Context, id string) (portcullis.Approval, error) {
	if err := s.read(ctx, "approval"); err != nil {
		return portcullis.Approval{}, err
	}
	a, err := scanApproval(s.rdb.QueryRowContext(ctx, selectApprovals+` WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return portcullis.Approval{}, fmt.Errorf("sqlite: approval: %w", portcullis.Errorf(portcullis.CodeNotFound, "no approval request %q", id))
	}
	if err != nil {
		return portcullis.Approval{}, fmt.Errorf("sqlite: approval: %w", err)
	}
	return expire(a, s.clock.Now()), nil
}

// Approvals lists approval requests, newest first.
func (s *Store) Approvals(ctx context.Context, f portcullis.ApprovalFilter) ([]portcullis.Approval, error) {
	if err := s.read(ctx, "list approvals"); err != nil {
		return nil, err
	}
	now := s.clock.Now()
	var where []string
	var args []any
	switch f.Status {
	case "":
	case portcullis.ApprovalPending:
		where = append(where, `status = 'pending' AND (expires_at = 0 OR expires_at > ?)`)
		args = append(args, nanos(now))
	case portcullis.ApprovalExpired:
		where = append(where, `status = 'pending' AND expires_at <> 0 AND expires_at <= ?`)
		args = append(args, nanos(now))
	default:
		where = append(where, `status = ?`)
		args = append(args, string(f.Status))
	}
	if f.Session != "" {
		where = append(where, `session = ?`)
		args = append(args, f.Session)
	}
	if f.Agent != "" {
		where = append(where, `agent = ?`)
		args = append(args, f.Agent)
	}
	if f.DecisionID != "" {
		where = append(where, `decision_id = ?`)
		args = append(args, f.DecisionID)
	}
	query := selectApprovals
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, ` AND `)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.rdb.QueryContext(ctx, query+` ORDER BY created_at DESC, id DESC LIMIT ?`, append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list approvals: %w", err)
	}
	defer rows.Close()
	var out []portcullis.Approval
	for rows.Next() {
		a, err := scanApproval(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list approvals: %w", err)
		}
		out = append(out, expire(a, now))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list approvals: %w", err)
	}
	return out, nil
}

// DecideApproval moves a pending, unexpired request to approved or denied,
// with d.Grant in the same transaction. Of several deciders (in any process)
// exactly one succeeds; the others get CONFLICT, as does an expired
// request. NOT_FOUND for a missing request; INVALID_REQUEST for a status
// other than approved or denied.
func (s *Store) DecideApproval(ctx context.Context, id string, d portcullis.ApprovalDecision) (portcullis.Approval, error) {
	if d.Status != portcullis.ApprovalApproved && d.Status != portcullis.ApprovalDenied {
		return portcullis.Approval{}, fmt.Errorf("sqlite: decide approval: %w",
			portcullis.Errorf(portcullis.CodeInvalidRequest, "status %q (want approved or denied)", d.Status))
	}
	var grant portcullis.Grant
	if d.Grant != nil {
		g, err := s.prepareGrant(*d.Grant)
		if err != nil {
			return portcullis.Approval{}, fmt.Errorf("sqlite: decide approval: %w", err)
		}
		grant = g
	}
	var a portcullis.Approval
	err := s.write(ctx, "decide approval", func(t *tx) error {
		var err error
		a, err = scanApproval(t.QueryRowContext(ctx, selectApprovals+` WHERE id = ?`, id))
		if errors.Is(err, sql.ErrNoRows) {
			return portcullis.Errorf(portcullis.CodeNotFound, "no approval request %q", id)
		}
		if err != nil {
			return err
		}
		a = expire(a, s.clock.Now())
		if a.Status != portcullis.ApprovalPending {
			return portcullis.Errorf(portcullis.CodeConflict, "approval request %q is already %s", id, a.Status)
		}
		a.Status, a.DecidedBy, a.DecidedAt = d.Status, d.By, d.At
		if !a.DecidedAt.IsZero() {
			a.DecidedAt = a.DecidedAt.UTC()
		}
		if d.Status == portcullis.ApprovalDenied {
			a.DenyReason = d.Reason
		}
		if _, err := t.ExecContext(ctx, `UPDATE approvals SET status = ?, decided_by = ?, decided_at = ?, deny_reason = ? WHERE id = ?`,
			string(a.Status), a.DecidedBy, nanos(a.DecidedAt), a.DenyReason, id); err != nil {
			return err
		}
		if d.Grant != nil {
			if err := insertGrant(ctx, t, grant); err != nil {
				return err
			}
		}
		return t.change(ctx, portcullis.ChangeApproval, id)
	})
	if err != nil {
		if portcullis.ErrorCode(err) == portcullis.CodeConflict {
			return a, err
		}
		return portcullis.Approval{}, err
	}
	return a, nil
}
