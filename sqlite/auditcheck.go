package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// auditIndexes are the lookup tables of the audit log and the column of
// the audit table each holds (schema 5).
var auditIndexes = []struct{ table, key string }{
	{"audit_by_session", "session"},
	{"audit_by_agent", "agent"},
	{"audit_by_tool", "tool"},
	{"audit_by_time", "time"},
}

// CheckAuditIndex checks the audit log's lookup tables against the log,
// in one read transaction: the watermark row exists and is not beyond the
// log's last row (or, every row pruned, the checkpoint's); every row up to
// the watermark has its entry, under its own key, in each of the four
// tables; and no table holds an entry that is not such a row's. Plain SQL
// can edit these tables, and a query that finds its rows through them
// would then miss rows the chain still holds, so audit verify runs this
// after the chain. It returns what is wrong ("" when nothing is), naming
// the table, the row and the key, or the store's error.
func (s *Store) CheckAuditIndex(ctx context.Context) (string, error) {
	if err := s.read(ctx, "check audit index"); err != nil {
		return "", err
	}
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return "", fmt.Errorf("sqlite: check audit index: %w", err)
	}
	defer func() {
		// Read only: ending it undoes nothing.
		if err := tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
			s.log.Warn("end the audit index check", "err", err)
		}
	}()
	problem, err := checkAuditIndex(ctx, tx)
	if err != nil {
		return "", fmt.Errorf("sqlite: check audit index: %w", err)
	}
	return problem, nil
}

func checkAuditIndex(ctx context.Context, tx *sql.Tx) (string, error) {
	var wm int64
	err := tx.QueryRowContext(ctx, `SELECT seq FROM audit_indexed WHERE id = 1`).Scan(&wm)
	if errors.Is(err, sql.ErrNoRows) {
		return "audit_indexed holds no watermark row (the table was edited): queries would take every row for unindexed", nil
	}
	if err != nil {
		return "", err
	}
	var last sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT max(seq) FROM audit`).Scan(&last); err != nil {
		return "", err
	}
	head := last.Int64
	if !last.Valid {
		var cp sql.NullInt64
		if err := tx.QueryRowContext(ctx, `SELECT max(seq) FROM audit_checkpoint`).Scan(&cp); err != nil {
			return "", err
		}
		head = cp.Int64
	}
	if wm > head {
		return fmt.Sprintf("audit_indexed: the watermark is row %d, beyond the log's last row %d (the table was edited): rows appended up to it would be found by no filtered query", wm, head), nil
	}
	if wm < 0 {
		return fmt.Sprintf("audit_indexed: the watermark is %d (the table was edited)", wm), nil
	}
	// Every row up to the watermark has its entry in each table: one walk
	// of the rows, a primary-key lookup in each table per row, which also
	// counts them.
	var n int64
	missing := make([]sql.NullInt64, len(auditIndexes))
	dest := []any{&n}
	cols := make([]string, len(auditIndexes))
	for i, ix := range auditIndexes {
		cols[i] = `min(CASE WHEN NOT EXISTS (SELECT 1 FROM ` + ix.table + ` x WHERE x.` + ix.key + ` = a.` + ix.key + ` AND x.seq = a.seq) THEN a.seq END)`
		dest = append(dest, &missing[i])
	}
	if err := tx.QueryRowContext(ctx, `SELECT count(*), `+strings.Join(cols, `, `)+` FROM audit a WHERE a.seq <= ?`, wm).Scan(dest...); err != nil {
		return "", err
	}
	for i, ix := range auditIndexes {
		if !missing[i].Valid {
			continue
		}
		seq := missing[i].Int64
		var key any
		if err := tx.QueryRowContext(ctx, `SELECT `+ix.key+` FROM audit WHERE seq = ?`, seq).Scan(&key); err != nil {
			return "", err
		}
		return fmt.Sprintf("%s: row %d (%s %s) has no entry, so queries by %s miss it (the table was edited)", ix.table, seq, ix.key, keyString(key), ix.key), nil
	}
	for _, ix := range auditIndexes {
		// Each of those rows has its own entry (the table's key holds
		// seq), so a table that holds no more entries than rows holds no
		// other entry. Counting it reads only the table.
		var entries int64
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM `+ix.table).Scan(&entries); err != nil {
			return "", err
		}
		if entries == n {
			continue
		}
		var seq int64
		var key any
		// Find the first other entry: a lookup of its row by seq per entry.
		err := tx.QueryRowContext(ctx, `SELECT x.seq, x.`+ix.key+` FROM `+ix.table+` x
			WHERE x.seq > ? OR NOT EXISTS (SELECT 1 FROM audit a WHERE a.seq = x.seq AND a.`+ix.key+` = x.`+ix.key+`)
			ORDER BY x.seq LIMIT 1`, wm).Scan(&seq, &key)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Sprintf("%s holds %d entries for %d rows up to the watermark (the table was edited)", ix.table, entries, n), nil
		}
		if err != nil {
			return "", err
		}
		var own any
		err = tx.QueryRowContext(ctx, `SELECT `+ix.key+` FROM audit WHERE seq = ?`, seq).Scan(&own)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Sprintf("%s: an entry (%s %s) names row %d, which the log does not hold (the table was edited)", ix.table, ix.key, keyString(key), seq), nil
		case err != nil:
			return "", err
		case seq > wm:
			return fmt.Sprintf("%s: row %d (%s %s) has an entry, but the watermark is row %d (the table was edited)", ix.table, seq, ix.key, keyString(key), wm), nil
		default:
			return fmt.Sprintf("%s: an entry names row %d under %s %s, but the row's %s is %s (the table was edited)", ix.table, seq, ix.key, keyString(key), ix.key, keyString(own)), nil
		}
	}
	return "", nil
}

// keyString quotes a text key; a time is its Unix nanoseconds.
func keyString(v any) string {
	switch v := v.(type) {
	case string:
		return fmt.Sprintf("%q", v)
	case []byte:
		return fmt.Sprintf("%q", v)
	default:
		return fmt.Sprint(v)
	}
}
