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

// maxLinger bounds how long the writer waits for more callers before a
// commit.
const maxLinger = 500 * time.Microsecond

// runWriter commits queued appends until the queue is closed and drained.
//
// When the last batch had several callers, appends are arriving
// concurrently, and the callers just answered are likely to append again
// at once: the writer then waits a little (until as many callers as last
// time are queued, for at most half the last commit's duration and
// maxLinger) so that they share the next commit instead of splitting into
// groups that take turns. A lone caller never waits.
func (s *Store) runWriter() {
	defer close(s.writer)
	var batch []*appendReq
	lastCallers, lastCommit := 0, time.Duration(0)
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	for first := range s.appends {
		batch = append(batch[:0], first)
		n := len(first.rows)
		wait := min(lastCommit/2, maxLinger)
		waiting := false
	gather:
		for n < maxBatchRows {
			select {
			case req, ok := <-s.appends:
				if !ok {
					break gather
				}
				batch = append(batch, req)
				n += len(req.rows)
				continue
			default:
			}
			if lastCallers <= 1 || len(batch) >= lastCallers || wait <= 0 {
				break
			}
			if !waiting {
				waiting = true
				linger.Reset(wait)
			}
			select {
			case req, ok := <-s.appends:
				if !ok {
					break gather
				}
				batch = append(batch, req)
				n += len(req.rows)
			case <-linger.C:
				waiting = false
				break gather
			}
		}
		if waiting {
			linger.Stop()
		}
		start := time.Now()
		err := s.commitBatch(batch, n)
		lastCallers, lastCommit = len(batch), time.Since(start)
		if err != nil {
			s.log.Error("audit commit failed", "rows", n, "callers", len(batch), "err", err)
		}
		for _, req := range batch {
			req.done <- err
		}
		clear(batch)
	}
}

// chainHead is the writer's knowledge of the chain's head after its last
// commit. Only the writer goroutine uses it.
type chainHead struct {
	seq   int64
	hash  string
	known bool
}

// auditColumnsArrays are the batch's rows as one array per column, for
// unnest.
type auditColumnsArrays struct {
	seqs                                       []int64
	times                                      []time.Time
	kinds, dids, sessions, agents, tools, outs []string
	bodies                                     [][]byte
	prevs, hashes                              []string
}

func (c *auditColumnsArrays) args() []any {
	return []any{c.seqs, c.times, c.kinds, c.dids, c.sessions, c.agents, c.tools, c.outs, c.bodies, c.prevs, c.hashes}
}

// chain numbers and hashes the batch's rows after head, fills in their
// records, and returns them as column arrays and the new head.
func chain(batch []*appendReq, n int, head chainHead) (*auditColumnsArrays, chainHead) {
	c := &auditColumnsArrays{
		seqs: make([]int64, 0, n), times: make([]time.Time, 0, n),
		kinds: make([]string, 0, n), dids: make([]string, 0, n), sessions: make([]string, 0, n),
		agents: make([]string, 0, n), tools: make([]string, 0, n), outs: make([]string, 0, n),
		bodies: make([][]byte, 0, n), prevs: make([]string, 0, n), hashes: make([]string, 0, n),
	}
	seq, prev := head.seq, head.hash
	for _, req := range batch {
		for i := range req.rows {
			r := &req.rows[i]
			seq++
			hash := portcullis.ChainHash(prev, seq, r.body)
			r.rec = portcullis.AuditRecord{Seq: seq, Body: r.body, PrevHash: prev, Hash: hash}
			c.seqs, c.times, c.bodies = append(c.seqs, seq), append(c.times, r.time), append(c.bodies, r.body)
			c.kinds, c.dids, c.sessions = append(c.kinds, r.kind), append(c.dids, r.decisionID), append(c.sessions, r.session)
			c.agents, c.tools, c.outs = append(c.agents, r.agent), append(c.tools, r.tool), append(c.outs, r.outc)
			c.prevs, c.hashes = append(c.prevs, prev), append(c.hashes, hash)
			prev = hash
		}
	}
	return c, chainHead{seq: seq, hash: prev, known: true}
}

const (
	insertAuditColumns = `INSERT INTO audit (seq, time, kind, decision_id, session, agent, tool, outcome, body, prev_hash, hash)`
	unnestAudit        = `unnest($1::bigint[], $2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::text[],
		$7::text[], $8::text[], $9::bytea[], $10::text[], $11::text[])`

	// appendIfHeadSQL appends the rows only if the chain's head is still
	// ($12, $13), moving it to ($14, $15): one statement, one round trip,
	// committed on its own. The UPDATE locks the head row as the locking
	// path does, so replicas still append one after the other; a replica
	// that finds the head moved inserts nothing and takes the locking path.
	appendIfHeadSQL = `WITH head AS (
			UPDATE audit_head SET seq = $14, hash = $15 WHERE seq = $12 AND hash = $13 RETURNING 1)
		` + insertAuditColumns + ` SELECT * FROM ` + unnestAudit + ` WHERE EXISTS (SELECT 1 FROM head)`

	insertAuditSQL = insertAuditColumns + ` SELECT * FROM ` + unnestAudit
)

// commitBatch appends the batch's n rows in one transaction. When the
// writer knows the chain's head (it committed the last rows itself), it
// chains the rows to it and commits them in one statement that checks the
// head has not moved. Otherwise, or when another replica appended since, it
// locks the head, reads it, chains the rows to it and commits.
func (s *Store) commitBatch(batch []*appendReq, n int) error {
	ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
	defer cancel()
	if s.head.known {
		cols, next := chain(batch, n, s.head)
		args := append(cols.args(), s.head.seq, s.head.hash, next.seq, next.hash)
		s.head.known = false // until the commit is known to have succeeded
		tag, err := s.pool.Exec(ctx, appendIfHeadSQL, args...)
		if err != nil {
			return s.fail("append rows", err)
		}
		if tag.RowsAffected() == int64(n) {
			s.head = next
			return nil
		}
		// Another replica appended since: nothing was written.
	}
	return s.commitLocked(ctx, batch, n)
}

// commitLocked appends under the head's row lock: lock and read the head,
// chain the rows to it, insert them, move the head, commit.
func (s *Store) commitLocked(ctx context.Context, batch []*appendReq, n int) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return s.fail("begin", err)
	}
	defer s.rollback(tx)
	var head chainHead
	if err := tx.QueryRow(ctx, `SELECT seq, hash FROM audit_head FOR UPDATE`).Scan(&head.seq, &head.hash); err != nil {
		return s.fail("lock the chain head", err)
	}
	cols, next := chain(batch, n, head)
	b := &pgx.Batch{}
	b.Queue(insertAuditSQL, cols.args()...)
	b.Queue(`UPDATE audit_head SET seq = $1, hash = $2`, next.seq, next.hash)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return s.fail("append rows", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return s.fail("commit", err)
	}
	s.head = next
	return nil
}

// auditColumns are the columns of a record: the chained row and the
// fields copied out of its body, which VerifyAudit checks.
const auditColumns = `seq, body, prev_hash, hash, time, kind, decision_id, session, agent, tool, outcome`

func scanRecord(row pgx.Row) (portcullis.AuditRecord, error) {
	var r portcullis.AuditRecord
	var body []byte
	// timestamptz keeps microseconds (ts truncates what is written).
	c := portcullis.AuditColumns{TimeUnit: time.Microsecond}
	var kind, outcome string
	err := row.Scan(&r.Seq, &body, &r.PrevHash, &r.Hash, &c.Time, &kind, &c.DecisionID, &c.Session, &c.Agent, &c.Tool, &outcome)
	c.Kind, c.Outcome = portcullis.AuditKind(kind), portcullis.Outcome(outcome)
	r.Body, r.Columns = body, &c
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
