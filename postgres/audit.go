package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/portcullis/portcullis"
)

// Group commit: AppendAudit queues its events for the store's one writer
// goroutine, which takes whatever is waiting and commits it in one
// transaction, so concurrent appends share one WAL flush. A caller returns
// when its batch has committed (or failed: every caller of a failed batch
// gets the error).

// maxBatchRows bounds the rows of one commit.
const maxBatchRows = 4096

// commitTimeout bounds one batch's transaction.
const commitTimeout = 30 * time.Second

type appendReq struct {
	rows []auditRow
	done chan error // buffered: the writer never waits for the caller
}

// auditRow is one event to append: its canonical body and the columns
// copied from it for queries. The writer fills in seq and the hashes.
type auditRow struct {
	time                                         time.Time
	kind, decisionID, session, agent, tool, outc string
	body                                         []byte
	rec                                          portcullis.AuditRecord
}

// AppendAudit writes events durably, in order, chained to the log, and
// returns their records. When it returns nil the rows are committed; the
// events of one call are contiguous in the chain. Appends from every
// replica form one chain.
func (s *Store) AppendAudit(ctx context.Context, evs ...portcullis.AuditEvent) ([]portcullis.AuditRecord, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("append audit: %w", err)
	}
	if len(evs) == 0 {
		return nil, nil
	}
	req := &appendReq{rows: make([]auditRow, len(evs)), done: make(chan error, 1)}
	for i := range evs {
		ev := &evs[i]
		body, err := portcullis.EncodeAuditBody(ev)
		if err != nil {
			return nil, fmt.Errorf("append audit: %w", err)
		}
		req.rows[i] = auditRow{
			time: ts(ev.Time), kind: string(ev.Kind), decisionID: ev.DecisionID, session: ev.Session,
			agent: ev.Agent, tool: ev.Tool, outc: string(ev.Outcome), body: body,
		}
	}
	if err := s.enqueue(ctx, req); err != nil {
		return nil, fmt.Errorf("append audit: %w", err)
	}
	select {
	case err := <-req.done:
		if err != nil {
			return nil, fmt.Errorf("append audit: %w", err)
		}
	case <-ctx.Done():
		// The rows may still commit; the caller must treat them as not
		// durable, which is the safe side.
		return nil, fmt.Errorf("append audit: %w", ctx.Err())
	}
	out := make([]portcullis.AuditRecord, len(req.rows))
	for i := range req.rows {
		out[i] = req.rows[i].rec
	}
	return out, nil
}

func (s *Store) enqueue(ctx context.Context, req *appendReq) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return errClosed
	}
	select {
	case s.appends <- req:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// runWriter commits queued appends until the queue is closed and drained.
func (s *Store) runWriter() {
	defer close(s.writer)
	var batch []*appendReq
	for first := range s.appends {
		batch = append(batch[:0], first)
		n := len(first.rows)
	gather:
		for n < maxBatchRows {
			select {
			case req, ok := <-s.appends:
				if !ok {
					break gather
				}
				batch = append(batch, req)
				n += len(req.rows)
			default:
				break gather
			}
		}
		err := s.commitBatch(batch, n)
		if err != nil {
			s.log.Error("audit commit failed", "rows", n, "callers", len(batch), "err", err)
		}
		for _, req := range batch {
			req.done <- err
		}
		clear(batch)
	}
}

const insertAuditSQL = `INSERT INTO audit (seq, time, kind, decision_id, session, agent, tool, outcome, body, prev_hash, hash)
	SELECT * FROM unnest($1::bigint[], $2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::text[],
		$7::text[], $8::text[], $9::bytea[], $10::text[], $11::text[])`

// commitBatch appends the batch's n rows in one transaction: lock the
// chain's head, chain the rows to it, insert them, move the head, commit.
func (s *Store) commitBatch(batch []*appendReq, n int) error {
	ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
	defer cancel()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return s.fail("begin", err)
	}
	defer s.rollback(tx)
	var seq int64
	var prev string
	if err := tx.QueryRow(ctx, `SELECT seq, hash FROM audit_head FOR UPDATE`).Scan(&seq, &prev); err != nil {
		return s.fail("lock the chain head", err)
	}
	var (
		seqs                                       = make([]int64, 0, n)
		times                                      = make([]time.Time, 0, n)
		kinds, dids, sessions, agents, tools, outs = make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]string, 0, n)
		bodies                                     = make([][]byte, 0, n)
		prevs, hashes                              = make([]string, 0, n), make([]string, 0, n)
	)
	for _, req := range batch {
		for i := range req.rows {
			r := &req.rows[i]
			seq++
			hash := portcullis.ChainHash(prev, seq, r.body)
			r.rec = portcullis.AuditRecord{Seq: seq, Body: r.body, PrevHash: prev, Hash: hash}
			seqs, times, bodies = append(seqs, seq), append(times, r.time), append(bodies, r.body)
			kinds, dids, sessions = append(kinds, r.kind), append(dids, r.decisionID), append(sessions, r.session)
			agents, tools, outs = append(agents, r.agent), append(tools, r.tool), append(outs, r.outc)
			prevs, hashes = append(prevs, prev), append(hashes, hash)
			prev = hash
		}
	}
	b := &pgx.Batch{}
	b.Queue(insertAuditSQL, seqs, times, kinds, dids, sessions, agents, tools, outs, bodies, prevs, hashes)
	b.Queue(`UPDATE audit_head SET seq = $1, hash = $2`, seq, prev)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return s.fail("insert rows", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return s.fail("commit", err)
	}
	return nil
}

const auditColumns = `seq, body, prev_hash, hash`

func scanRecord(row pgx.Row) (portcullis.AuditRecord, error) {
	var r portcullis.AuditRecord
	var body []byte
	err := row.Scan(&r.Seq, &body, &r.PrevHash, &r.Hash)
	r.Body = body
	return r, err
}

// QueryAudit returns the records that match q, in sequence order or newest
// first, at most q.Limit (default 100).
func (s *Store) QueryAudit(ctx context.Context, q portcullis.AuditQuery) ([]portcullis.AuditRecord, error) {
	var where []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, fmt.Sprintf("$%d", len(args))))
	}
	if q.Session != "" {
		add("session = %s", q.Session)
	}
	if q.Agent != "" {
		add("agent = %s", q.Agent)
	}
	if q.Tool != "" {
		add("tool = %s", q.Tool)
	}
	if q.Outcome != "" {
		add("outcome = %s", string(q.Outcome))
	}
	if q.Kind != "" {
		add("kind = %s", string(q.Kind))
	}
	if !q.Since.IsZero() {
		add("time >= %s", ts(q.Since))
	}
	if !q.Until.IsZero() {
		add("time < %s", ts(q.Until))
	}
	if q.AfterSeq > 0 {
		add("seq > %s", q.AfterSeq)
	}
	if q.BeforeSeq > 0 {
		add("seq < %s", q.BeforeSeq)
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	var sql strings.Builder
	sql.WriteString("SELECT " + auditColumns + " FROM audit")
	if len(where) > 0 {
		sql.WriteString(" WHERE " + strings.Join(where, " AND "))
	}
	if q.Newest {
		sql.WriteString(" ORDER BY seq DESC")
	} else {
		sql.WriteString(" ORDER BY seq")
	}
	args = append(args, limit)
	fmt.Fprintf(&sql, " LIMIT $%d", len(args))
	rows, err := s.pool.Query(ctx, sql.String(), args...)
	if err != nil {
		return nil, s.fail("query audit", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (portcullis.AuditRecord, error) { return scanRecord(row) })
	if err != nil {
		return nil, s.fail("query audit", err)
	}
	return out, nil
}

// scanPage is how many rows ScanAudit reads per query.
const scanPage = 1000

// ScanAudit calls fn for every record with seq > afterSeq, in order, until
// fn returns false or an error (returned as is). It reads a page at a time
// and holds no connection while fn runs.
func (s *Store) ScanAudit(ctx context.Context, afterSeq int64, fn func(portcullis.AuditRecord) (bool, error)) error {
	for {
		rows, err := s.pool.Query(ctx, `SELECT `+auditColumns+` FROM audit WHERE seq > $1 ORDER BY seq LIMIT $2`, afterSeq, scanPage)
		if err != nil {
			return s.fail("scan audit", err)
		}
		page, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (portcullis.AuditRecord, error) { return scanRecord(row) })
		if err != nil {
			return s.fail("scan audit", err)
		}
		for _, r := range page {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("scan audit: %w", err)
			}
			more, err := fn(r)
			if err != nil || !more {
				return err
			}
			afterSeq = r.Seq
		}
		if len(page) < scanPage {
			return nil
		}
	}
}

// PruneAudit deletes the rows up to cp.Seq and keeps cp in their place, in
// one transaction. cp must name row cp.Seq and its hash (else
// INVALID_REQUEST).
func (s *Store) PruneAudit(ctx context.Context, cp portcullis.AuditCheckpoint) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return s.fail("prune audit", err)
	}
	defer s.rollback(tx)
	var hash string
	err = tx.QueryRow(ctx, `SELECT hash FROM audit WHERE seq = $1 FOR UPDATE`, cp.Seq).Scan(&hash)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return portcullis.Errorf(portcullis.CodeInvalidRequest, "prune audit: there is no row %d to checkpoint", cp.Seq)
	case err != nil:
		return s.fail("prune audit", err)
	case hash != cp.Hash:
		return portcullis.Errorf(portcullis.CodeInvalidRequest, "prune audit: checkpoint hash is not the hash of row %d", cp.Seq)
	}
	b := &pgx.Batch{}
	b.Queue(`DELETE FROM audit WHERE seq <= $1`, cp.Seq)
	b.Queue(`INSERT INTO audit_checkpoint (seq, hash, time, signature) VALUES ($1, $2, $3, $4)
		ON CONFLICT (only_row) DO UPDATE SET seq = EXCLUDED.seq, hash = EXCLUDED.hash, time = EXCLUDED.time, signature = EXCLUDED.signature`,
		cp.Seq, cp.Hash, ts(cp.Time), cp.Signature)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return s.fail("prune audit", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return s.fail("prune audit: commit", err)
	}
	return nil
}

// AuditCheckpoint returns the checkpoint of the pruned prefix, if any.
func (s *Store) AuditCheckpoint(ctx context.Context) (portcullis.AuditCheckpoint, bool, error) {
	var cp portcullis.AuditCheckpoint
	err := s.pool.QueryRow(ctx, `SELECT seq, hash, time, signature FROM audit_checkpoint`).Scan(&cp.Seq, &cp.Hash, &cp.Time, &cp.Signature)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return portcullis.AuditCheckpoint{}, false, nil
	case err != nil:
		return portcullis.AuditCheckpoint{}, false, s.fail("read audit checkpoint", err)
	}
	cp.Time = cp.Time.UTC()
	return cp, true, nil
}
