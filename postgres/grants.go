package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/portcullis/portcullis"
)

// maxIDBytes bounds caller-chosen identifiers (grant, approval and
// challenge IDs), so every change notification fits in a NOTIFY payload.
const maxIDBytes = 256

const grantColumns = `id, kind, tool, element_type, session, args_digest, granted_by, created_at, expires_at`

func scanGrant(row pgx.Row) (portcullis.Grant, error) {
	var g portcullis.Grant
	var expires *time.Time
	err := row.Scan(&g.ID, &g.Kind, &g.Tool, &g.ElementType, &g.Session, &g.ArgsDigest, &g.GrantedBy, &g.CreatedAt, &expires)
	g.CreatedAt = g.CreatedAt.UTC()
	g.ExpiresAt = fromNull(expires)
	return g, err
}

// prepareGrant checks a grant and fills in its ID, digest and creation
// time, as the Store interface says; times are truncated to what
// PostgreSQL keeps.
func (s *Store) prepareGrant(g portcullis.Grant) (portcullis.Grant, error) {
	if len(g.ID) > maxIDBytes {
		return portcullis.Grant{}, portcullis.Errorf(portcullis.CodeInvalidRequest, "grant id is %d bytes, more than %d", len(g.ID), maxIDBytes)
	}
	g, err := portcullis.PrepareGrant(g, s.clock.Now())
	if err != nil {
		return portcullis.Grant{}, err
	}
	g.CreatedAt = ts(g.CreatedAt)
	if !g.ExpiresAt.IsZero() {
		g.ExpiresAt = ts(g.ExpiresAt)
	}
	return g, nil
}

var insertGrantSQL = notifying(`INSERT INTO grants (`+grantColumns+`)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING 1`, 9)

func grantArgs(g *portcullis.Grant) []any {
	return []any{g.ID, string(g.Kind), g.Tool, g.ElementType, g.Session, g.ArgsDigest, g.GrantedBy, g.CreatedAt, nullTime(g.ExpiresAt)}
}

// AddGrant records g, assigning an ID when it has none. A duplicate ID is
// CONFLICT; a grant without a tool or of an unknown kind INVALID_REQUEST.
func (s *Store) AddGrant(ctx context.Context, g portcullis.Grant) (portcullis.Grant, error) {
	g, err := s.prepareGrant(g)
	if err != nil {
		return portcullis.Grant{}, fmt.Errorf("add grant: %w", err)
	}
	args := append(grantArgs(&g), s.channel, payload(portcullis.ChangeGrant, g.ID))
	if _, err := s.pool.Exec(ctx, insertGrantSQL, args...); err != nil {
		if isUniqueViolation(err) {
			return portcullis.Grant{}, portcullis.Errorf(portcullis.CodeConflict, "add grant: id %q exists", g.ID)
		}
		return portcullis.Grant{}, s.fail("add grant", err)
	}
	return g, nil
}

const (
	liveGrant = `(expires_at IS NULL OR expires_at > $4)`

	sessionGrantSQL = `SELECT ` + grantColumns + ` FROM grants
		WHERE session = $1 AND tool = $2 AND kind = 'session' AND (element_type = '' OR element_type = $3) AND ` + liveGrant + `
		ORDER BY created_at, id LIMIT 1`

	singleGrantWhere = `session = $1 AND tool = $2 AND kind = 'single' AND args_digest = $3 AND ` + liveGrant

	peekSingleSQL = `SELECT ` + grantColumns + ` FROM grants WHERE ` + singleGrantWhere + ` ORDER BY created_at, id LIMIT 1`

	// SKIP LOCKED: of several consumers racing for one grant, one locks and
	// deletes it, the others pass it by (and take another one, or none).
	consumeSingleSQL = `WITH used AS (
		DELETE FROM grants WHERE id = (
			SELECT id FROM grants WHERE ` + singleGrantWhere + `
			ORDER BY created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)
		RETURNING ` + grantColumns + `)
		SELECT ` + grantColumns + `, pg_notify($5, 'grant:' || id)::text FROM used`
)

// UseGrant finds a live grant that covers q: a session grant first, else a
// single-use grant for the same arguments, which is deleted when q.Consume
// is set. Of several callers racing for a single-use grant, on any replica,
// exactly one gets it.
func (s *Store) UseGrant(ctx context.Context, q portcullis.GrantQuery) (portcullis.Grant, bool, error) {
	if err := ctx.Err(); err != nil {
		return portcullis.Grant{}, false, fmt.Errorf("use grant: %w", err)
	}
	if !q.Level.IsConfirm() {
		return portcullis.Grant{}, false, nil
	}
	now := ts(q.Now)
	if q.Level == portcullis.ConfirmSession {
		g, err := scanGrant(s.pool.QueryRow(ctx, sessionGrantSQL, q.Session, q.Tool, q.ElementType, now))
		switch {
		case err == nil:
			return g, true, nil
		case !errors.Is(err, pgx.ErrNoRows):
			return portcullis.Grant{}, false, s.fail("use grant", err)
		}
	}
	if q.ArgsDigest == "" {
		return portcullis.Grant{}, false, nil
	}
	var row pgx.Row
	if q.Consume {
		row = consumeRow{s.pool.QueryRow(ctx, consumeSingleSQL, q.Session, q.Tool, q.ArgsDigest, now, s.channel)}
	} else {
		row = s.pool.QueryRow(ctx, peekSingleSQL, q.Session, q.Tool, q.ArgsDigest, now)
	}
	g, err := scanGrant(row)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return portcullis.Grant{}, false, nil
	case err != nil:
		return portcullis.Grant{}, false, s.fail("use grant", err)
	}
	return g, true, nil
}

// consumeRow scans a grant followed by the notification's empty column.
type consumeRow struct{ pgx.Row }

func (r consumeRow) Scan(dest ...any) error {
	var notified string
	return r.Row.Scan(append(dest, &notified)...)
}

var revokeGrantSQL = notifying(`DELETE FROM grants WHERE id = $1 RETURNING 1`, 1)

// RevokeGrant deletes a grant; NOT_FOUND when there is none.
func (s *Store) RevokeGrant(ctx context.Context, id string) error {
	tag, err := s.pool.Exec(ctx, revokeGrantSQL, id, s.channel, payload(portcullis.ChangeGrant, id))
	if err != nil {
		return s.fail("revoke grant", err)
	}
	if tag.RowsAffected() == 0 {
		return portcullis.Errorf(portcullis.CodeNotFound, "no grant %q", id)
	}
	return nil
}

// Grants lists the grants live at now, of one session or of all, oldest
// first.
func (s *Store) Grants(ctx context.Context, session string, now time.Time) ([]portcullis.Grant, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+grantColumns+` FROM grants
		WHERE ($1 = '' OR session = $1) AND (expires_at IS NULL OR expires_at > $2)
		ORDER BY created_at, id`, session, ts(now))
	if err != nil {
		return nil, s.fail("list grants", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (portcullis.Grant, error) { return scanGrant(row) })
	if err != nil {
		return nil, s.fail("list grants", err)
	}
	return out, nil
}
