package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/portcullis/portcullis"
	sqlite3 "modernc.org/sqlite"
	sqlite3lib "modernc.org/sqlite/lib"
)

// auditRow is an event ready to be written: its canonical body and the
// columns copied from it for the indexes.
type auditRow struct {
	time                                            int64
	kind, decisionID, session, agent, tool, outcome string
	body                                            []byte
}

// auditReq is one AppendAudit call waiting for the writer.
type auditReq struct {
	ctx   context.Context // the caller's: a request canceled before its batch begins is not written
	rows  []auditRow
	reply chan auditResult // buffered: the writer never waits for the caller
}

type auditResult struct {
	recs []portcullis.AuditRecord
	err  error
}

// auditWriter commits audit appends in batches (group commit): one goroutine
// takes every request waiting, writes them in one transaction, one fsync,
// and answers each caller after the commit.
//
// Under load, the callers answered by one commit come back with their next
// rows a moment after it: were the writer to start the next batch at once,
// it would hold only the callers that waited during the commit, half of
// them. So when the last batch had company, the writer waits a little
// (at most half a commit's time, at most a millisecond) for as many callers
// as there were then, as PostgreSQL's commit_delay does.
type auditWriter struct {
	s *Store
	// indexed is the index's watermark as this writer last read or moved
	// it: never above the file's (the watermark only grows; lowered by
	// hand, it is indexed from again at a later pass), so a commit
	// that finds its tail shorter than auditIndexBatch from it need not
	// read the file's; one that does not reads it. Used under commitMu.
	indexed int64
	// args holds the arguments of one INSERT, their ordinals set once;
	// rows, a batch's rows in order; dest, a row read. Used under
	// commitMu, cleared after each batch.
	args [auditChunk * auditCols]driver.NamedValue
	arg1 [1]driver.NamedValue
	rows []*auditRow
	dest [2]driver.Value

	// commitMu is held by whoever commits: the writer's goroutine, or a
	// lone caller committing its own rows (commitAlone).
	commitMu sync.Mutex

	mu     sync.Mutex
	queue  []*auditReq
	closed bool
	// alone says the writer's last batch held one request and no other
	// was waiting: a caller that then finds the queue empty commits its
	// rows itself, without handing them to the writer and back.
	alone bool
	wake  chan struct{} // holds a token when the queue grew or the writer is closing
	done  chan struct{} // closed when the writer has drained and ended
}

// maxCommitDelay bounds how long the writer waits for a batch to fill.
const maxCommitDelay = time.Millisecond

func newAuditWriter(ctx context.Context, s *Store) (*auditWriter, error) {
	w := &auditWriter{s: s, wake: make(chan struct{}, 1), done: make(chan struct{}), alone: true}
	for i := range w.args {
		w.args[i].Ordinal = i + 1
	}
	w.arg1[0].Ordinal = 1
	// Prepare the statements now, so that a file whose log cannot be
	// written fails Open.
	conn, err := s.wdb.Conn(ctx)
	if err != nil {
		return nil, err
	}
	err = conn.Raw(func(dc any) error {
		_, err := auditStatements(ctx, dc)
		return err
	})
	if err := errors.Join(err, conn.Close()); err != nil {
		return nil, err
	}
	go w.run()
	return w, nil
}

func (w *auditWriter) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// submit queues a request; it fails once the writer is closing.
func (w *auditWriter) submit(req *auditReq) error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return errClosed
	}
	w.queue = append(w.queue, req)
	w.mu.Unlock()
	w.signal()
	return nil
}

// commitAlone commits req on the caller's goroutine when no other append
// is queued or committing and the load is light; it reports whether it
// did (and answered req). Under load the writer's batches are left whole.
func (w *auditWriter) commitAlone(req *auditReq) bool {
	w.mu.Lock()
	ok := w.alone && len(w.queue) == 0 && !w.closed
	w.mu.Unlock()
	if !ok || !w.commitMu.TryLock() {
		return false
	}
	defer w.commitMu.Unlock()
	w.mu.Lock()
	ok = len(w.queue) == 0 && !w.closed
	w.mu.Unlock()
	if !ok {
		return false
	}
	w.commit([]*auditReq{req})
	return true
}

// close stops taking requests, commits those queued and waits for the
// writer, and any caller committing alone, to end.
func (w *auditWriter) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.signal()
	<-w.done
	// The statements are the write connection's: closing the store's
	// pool finalizes them.
	w.commitMu.Lock()
	defer w.commitMu.Unlock()
}

func (w *auditWriter) run() {
	defer close(w.done)
	expect, delay := 1, time.Duration(0)
	for {
		batch := w.take(expect, delay)
		if batch == nil {
			return // closed and drained
		}
		start := time.Now()
		w.commitMu.Lock()
		w.commit(batch)
		w.commitMu.Unlock()
		took := time.Since(start)
		w.mu.Lock()
		waiting := len(w.queue)
		w.alone = len(batch) == 1 && waiting == 0
		w.mu.Unlock()
		// The callers active now: those just answered and those that
		// queued during the commit.
		expect = len(batch) + waiting
		delay = min(took/2, maxCommitDelay)
	}
}

// take returns the queued requests once there are expect of them, or delay
// after the first arrived, or at once when closing; nil when closed and
// drained.
func (w *auditWriter) take(expect int, delay time.Duration) []*auditReq {
	var timer *time.Timer
	var timeout <-chan time.Time
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	expired := false
	for {
		w.mu.Lock()
		n, closed := len(w.queue), w.closed
		if n > 0 && (n >= expect || closed || expired || delay == 0) {
			batch := w.queue
			w.queue = nil
			w.mu.Unlock()
			return batch
		}
		w.mu.Unlock()
		if n == 0 && closed {
			return nil
		}
		if n > 0 && timer == nil {
			timer = time.NewTimer(delay)
			timeout = timer.C
		}
		select {
		case <-w.wake:
		case <-timeout:
			expired = true
		}
	}
}

// commit writes a batch in one transaction and answers every request in
// it: all with their records, or all with the error.
func (w *auditWriter) commit(batch []*auditReq) {
	live := batch[:0]
	for _, req := range batch {
		if err := req.ctx.Err(); err != nil {
			req.reply <- auditResult{err: err}
			continue
		}
		live = append(live, req)
	}
	if len(live) == 0 {
		return
	}
	results, err := w.write(live)
	for i, req := range live {
		if err != nil {
			req.reply <- auditResult{err: err}
		} else {
			req.reply <- auditResult{recs: results[i]}
		}
	}
}

// write appends the requests' rows in one transaction, chained to the head
// of the log as it is in the file (another process may have appended).
//
// The transaction runs on the driver's connection, through statements
// prepared on it once (auditStmts), with arguments the writer keeps: through
// database/sql, a transaction prepared its BEGIN and COMMIT anew, took each
// statement into the transaction and converted every argument
// (docs/BENCHMARKS.md, "Storage: SQLite"). The connection is held for this
// transaction only: the store's other writes share it.
//
// A transaction that fails is rolled back. When the rollback fails too,
// the connection's state is unknown: database/sql is told to discard it
// (driver.ErrBadConn), and the next commit runs on a new one.
func (w *auditWriter) write(reqs []*auditReq) ([][]portcullis.AuditRecord, error) {
	// The batch is not the caller's alone: one caller's canceled context
	// must not fail the others'. busy_timeout bounds the wait for the lock.
	// A context that cannot end also keeps the driver from starting a
	// goroutine to watch it.
	ctx := context.Background()
	conn, err := w.s.wdb.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	var out [][]portcullis.AuditRecord
	var indexed int64
	var txErr error
	err = conn.Raw(func(dc any) error {
		st, err := auditStatements(ctx, dc)
		if err != nil {
			txErr = fmt.Errorf("prepare: %w", err)
			return nil
		}
		var keep bool
		out, indexed, keep, txErr = w.transact(st, reqs)
		if !keep {
			return driver.ErrBadConn
		}
		return nil
	})
	// After driver.ErrBadConn, Raw has closed conn, and Close reports it.
	cerr := conn.Close()
	if txErr != nil {
		return nil, txErr
	}
	if err := errors.Join(err, cerr); err != nil {
		return nil, err
	}
	w.indexed = indexed
	w.s.wrote()
	return out, nil
}

// transact runs the batch's transaction with st. keep is false when a
// failure left the connection in a state not known: it must not be used
// again.
func (w *auditWriter) transact(st *auditStmts, reqs []*auditReq) (out [][]portcullis.AuditRecord, indexed int64, keep bool, err error) {
	if err := execStmt(st.begin, nil); err != nil {
		// A BEGIN IMMEDIATE that waited out busy_timeout opens no
		// transaction: SQLite takes the write lock before it leaves
		// autocommit mode. It fails with SQLITE_BUSY itself: SQLite
		// reports a stale snapshot (SQLITE_BUSY_SNAPSHOT) only when the
		// connection already had a read transaction open, one no wait
		// ends. Any failure but SQLITE_BUSY says the connection is not as
		// it should be (one left inside a transaction fails every BEGIN):
		// it is discarded.
		var se *sqlite3.Error
		keep := errors.As(err, &se) && se.Code() == sqlite3lib.SQLITE_BUSY
		return nil, 0, keep, fmt.Errorf("begin: %w", err)
	}
	out, indexed, err = w.appendRows(st, reqs)
	if err == nil {
		if err = execStmt(st.commit, nil); err == nil {
			return out, indexed, true, nil
		}
		err = fmt.Errorf("commit: %w", err)
	}
	// A failure SQLite answered by rolling the transaction back itself (a
	// full disk, an I/O error, a trigger's RAISE(ROLLBACK)) leaves this
	// ROLLBACK no transaction, and it fails: the connection is discarded
	// then, as it is when it fails for any other reason.
	if rerr := execStmt(st.rollback, nil); rerr != nil {
		w.s.log.Warn("audit rollback failed; the write connection is discarded", "err", rerr)
		return nil, 0, false, err
	}
	return nil, 0, true, err
}

// auditStmt is a statement of the driver's, run with the driver's
// arguments.
type auditStmt interface {
	driver.Stmt
	driver.StmtExecContext
	driver.StmtQueryContext
}

// auditStmts are the writer's statements, prepared once on a write
// connection (writeConn.audit) and finalized when it closes: the
// transaction's BEGIN IMMEDIATE, COMMIT and ROLLBACK, the head of the
// chain (and the checkpoint's, once every row was pruned), inserts of one
// row and of auditChunk rows, the watermark's read and check, and the index
// pass (indexAudit).
type auditStmts struct {
	begin, commit, rollback auditStmt
	head, checkpoint        auditStmt
	insert1, insertN        auditStmt
	watermark, check        auditStmt
	index                   []auditStmt
}

// auditStatements returns the statements prepared on dc, the driver's
// write connection, preparing them on its first use.
func auditStatements(ctx context.Context, dc any) (*auditStmts, error) {
	wc, ok := dc.(*writeConn)
	if !ok {
		return nil, fmt.Errorf("the write connection is a %T, not the store's", dc)
	}
	if wc.audit != nil {
		return wc.audit, nil
	}
	st := &auditStmts{}
	prepare := func(query string) (auditStmt, error) {
		ds, err := wc.PrepareContext(ctx, query)
		if err != nil {
			return nil, err
		}
		stmt, ok := ds.(auditStmt)
		if !ok {
			return nil, errors.Join(fmt.Errorf("the driver's statement %T cannot run with a context", ds), ds.Close())
		}
		return stmt, nil
	}
	for _, p := range []struct {
		stmt  *auditStmt
		query string
	}{
		{&st.begin, `BEGIN IMMEDIATE`},
		{&st.commit, `COMMIT`},
		{&st.rollback, `ROLLBACK`},
		{&st.head, selectHead},
		{&st.checkpoint, selectCheckpoint},
		{&st.insert1, insertAudit(1)},
		{&st.insertN, insertAudit(auditChunk)},
		{&st.watermark, selectWatermark},
		{&st.check, checkWatermark},
	} {
		stmt, err := prepare(p.query)
		if err != nil {
			return nil, errors.Join(err, st.close())
		}
		*p.stmt = stmt
	}
	for _, q := range indexAudit {
		stmt, err := prepare(q)
		if err != nil {
			return nil, errors.Join(err, st.close())
		}
		st.index = append(st.index, stmt)
	}
	wc.audit = st
	return st, nil
}

// close finalizes the statements.
func (st *auditStmts) close() error {
	var errs []error
	for _, stmt := range append([]auditStmt{st.begin, st.commit, st.rollback, st.head, st.checkpoint, st.insert1, st.insertN, st.watermark, st.check}, st.index...) {
		if stmt != nil {
			errs = append(errs, stmt.Close())
		}
	}
	return errors.Join(errs...)
}

// execStmt runs a statement that returns no rows. The background context
// keeps the driver from starting a goroutine to watch it.
func execStmt(stmt auditStmt, args []driver.NamedValue) error {
	_, err := stmt.ExecContext(context.Background(), args)
	return err
}

// queryRow runs a query and reads its first row into dest; found reports
// whether there was one. Closing the rows resets the statement.
func queryRow(stmt auditStmt, args []driver.NamedValue, dest []driver.Value) (found bool, err error) {
	rows, err := stmt.QueryContext(context.Background(), args)
	if err != nil {
		return false, err
	}
	switch err = rows.Next(dest); {
	case err == nil:
		found = true
	case errors.Is(err, io.EOF):
		err = nil
	}
	if cerr := rows.Close(); cerr != nil && err == nil {
		err = cerr
	}
	return found && err == nil, err
}

// insertAudit returns an INSERT of n audit rows.
func insertAudit(n int) string {
	const row = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
	return `INSERT INTO audit (seq, time, kind, decision_id, session, agent, tool, outcome, body, prev_hash, hash) VALUES ` +
		strings.Repeat(row+", ", n-1) + row
}

// auditCols is how many columns an audit row has, arguments to its INSERT.
const auditCols = 11

// auditChunk is how many rows one prepared INSERT writes: fewer calls into
// SQLite per row, and a statement small enough to keep in memory.
const auditChunk = 16

// selectHead reads the last row of the chain.
const selectHead = `SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1`

// selectCheckpoint reads the checkpoint of the pruned rows.
const selectCheckpoint = `SELECT seq, hash FROM audit_checkpoint WHERE id = 1`

// selectWatermark reads the index's watermark: the index tables hold
// exactly the rows up to it. A missing row (the table was edited) reads
// as 0: the next pass indexes every row again, and queries scan them all.
const selectWatermark = `SELECT coalesce((SELECT seq FROM audit_indexed WHERE id = 1), 0)`

// checkWatermark reports whether the watermark's row (the argument)
// exists without its audit_by_time entry. A pass moves the watermark to a
// row it has just indexed, so the watermark names such a row only when
// the tables were edited.
const checkWatermark = `SELECT EXISTS (SELECT 1 FROM audit a WHERE a.seq = ?
	AND NOT EXISTS (SELECT 1 FROM audit_by_time x WHERE x.time = a.time AND x.seq = a.seq))`

// auditIndexBatch is how many rows may wait after the index's watermark:
// the commit that makes the unindexed tail this long indexes it. A query
// scans at most this many rows besides those its index finds.
const auditIndexBatch = 1024

// indexAudit brings the index tables up to date with the rows after the
// watermark (the first argument of each) and moves the watermark to the
// last row (the last statement's argument). A pass rewrites one index page per
// session among auditIndexBatch rows, where indexes on the table rewrote
// one per session among each commit's rows. The rows are read in sequence
// order, unsorted: sorting them by key in SQLite costs more than the seeks
// it would save (about 1 µs a row).
//
// A pass is idempotent: an entry already there is left (OR IGNORE), and a
// missing watermark row is written anew, so a watermark lowered or deleted
// by hand costs a longer pass, not every later append.
var indexAudit = []string{
	`INSERT OR IGNORE INTO audit_by_session (session, seq) SELECT session, seq FROM audit WHERE seq > ?`,
	`INSERT OR IGNORE INTO audit_by_agent (agent, seq) SELECT agent, seq FROM audit WHERE seq > ?`,
	`INSERT OR IGNORE INTO audit_by_tool (tool, seq) SELECT tool, seq FROM audit WHERE seq > ?`,
	`INSERT OR IGNORE INTO audit_by_time (time, seq) SELECT time, seq FROM audit WHERE seq > ?`,
	`INSERT INTO audit_indexed (id, seq) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET seq = excluded.seq`,
}

// appendRows inserts the requests' rows, and indexes the tail when it has
// grown to auditIndexBatch rows. It returns the records and the watermark
// as it will be if the transaction commits.
func (w *auditWriter) appendRows(st *auditStmts, reqs []*auditReq) ([][]portcullis.AuditRecord, int64, error) {
	seq, prev, err := w.head(st)
	if err != nil {
		return nil, 0, err
	}
	total := 0
	for _, req := range reqs {
		total += len(req.rows)
	}
	// The writer's own slices, kept between batches, emptied of the rows
	// written.
	rows := w.rows[:0]
	defer func() {
		clear(rows)
		for i := range w.args {
			w.args[i].Value = nil
		}
		if cap(rows) <= 64*auditChunk {
			w.rows = rows[:0]
		} else {
			w.rows = nil
		}
	}()
	recs := make([]portcullis.AuditRecord, total)
	out := make([][]portcullis.AuditRecord, len(reqs))
	k := 0
	for i, req := range reqs {
		out[i] = recs[k : k+len(req.rows) : k+len(req.rows)]
		for j := range req.rows {
			r := &req.rows[j]
			seq++
			h := portcullis.ChainHash(prev, seq, r.body)
			recs[k] = portcullis.AuditRecord{Seq: seq, Body: r.body, PrevHash: prev, Hash: h}
			rows = append(rows, r)
			k++
			prev = h
		}
	}
	// Whole chunks while they last, then row by row. The arguments'
	// ordinals were set once: a statement of n rows takes the first
	// n*auditCols of them.
	for off := 0; off < total; {
		n, stmt := 1, st.insert1
		if total-off >= auditChunk {
			n, stmt = auditChunk, st.insertN
		}
		args := w.args[:n*auditCols]
		for i := range n {
			r, rec, a := rows[off+i], &recs[off+i], args[i*auditCols:(i+1)*auditCols]
			a[0].Value, a[1].Value, a[2].Value, a[3].Value = rec.Seq, r.time, r.kind, r.decisionID
			a[4].Value, a[5].Value, a[6].Value, a[7].Value = r.session, r.agent, r.tool, r.outcome
			a[8].Value, a[9].Value, a[10].Value = r.body, rec.PrevHash, rec.Hash
		}
		if err := execStmt(stmt, args); err != nil {
			first := seq - int64(total-off) + 1
			return nil, 0, fmt.Errorf("insert rows %d to %d: %w", first, first+int64(n)-1, err)
		}
		off += n
	}
	indexed := w.indexed
	if seq-indexed < auditIndexBatch {
		return out, indexed, nil
	}
	// Another process may have indexed since: the file's watermark counts.
	if err := w.queryInt(st.watermark, nil, &indexed); err != nil {
		return nil, 0, fmt.Errorf("read the audit index's watermark: %w", err)
	}
	// A watermark this writer did not index up to must name an indexed
	// row: one raised by hand would leave the rows below it unindexed,
	// found by no filtered query. Refuse to append until it is repaired.
	first := seq - int64(total) + 1
	if indexed >= first {
		return nil, 0, fmt.Errorf("the audit index's watermark is row %d, beyond the log's last row %d: audit_indexed was edited, and rows %d to %d would be found by no filtered query (run portcullis audit verify; docs/STORAGE.md says how to repair it)", indexed, first-1, first, min(indexed, seq))
	}
	var unindexed int64
	w.arg1[0].Value = indexed
	if err := w.queryInt(st.check, w.arg1[:], &unindexed); err != nil {
		return nil, 0, fmt.Errorf("check the audit index's watermark: %w", err)
	}
	if unindexed != 0 {
		return nil, 0, fmt.Errorf("the audit index's watermark is row %d, which has no index entry: audit_indexed or audit_by_time was edited, and rows up to it may be found by no filtered query (run portcullis audit verify; docs/STORAGE.md says how to repair it)", indexed)
	}
	if seq-indexed < auditIndexBatch {
		return out, indexed, nil
	}
	for i, stmt := range st.index {
		w.arg1[0].Value = indexed
		if i == len(st.index)-1 {
			w.arg1[0].Value = seq
		}
		if err := execStmt(stmt, w.arg1[:]); err != nil {
			return nil, 0, fmt.Errorf("index rows %d to %d: %w", indexed+1, seq, err)
		}
	}
	return out, seq, nil
}

// head returns the sequence number and hash of the last row, of the
// checkpoint when every row was pruned, or of the genesis.
func (w *auditWriter) head(st *auditStmts) (int64, string, error) {
	dest := w.dest[:2]
	defer clear(dest)
	found, err := queryRow(st.head, nil, dest)
	if err != nil {
		return 0, "", fmt.Errorf("read the head of the log: %w", err)
	}
	what := "the head of the log"
	if !found {
		what = "the audit checkpoint"
		found, err = queryRow(st.checkpoint, nil, dest)
		if err != nil {
			return 0, "", fmt.Errorf("read %s: %w", what, err)
		}
		if !found {
			return 0, portcullis.GenesisHash, nil
		}
	}
	seq, ok := dest[0].(int64)
	if !ok {
		return 0, "", fmt.Errorf("read %s: its seq is %T, not an integer", what, dest[0])
	}
	switch hash := dest[1].(type) {
	case string:
		return seq, hash, nil
	case []byte:
		return seq, string(hash), nil
	default:
		return 0, "", fmt.Errorf("read %s: its hash is %T, not text", what, dest[1])
	}
}

// queryInt runs a query of one integer.
func (w *auditWriter) queryInt(stmt auditStmt, args []driver.NamedValue, n *int64) error {
	dest := w.dest[:1]
	defer clear(dest)
	found, err := queryRow(stmt, args, dest)
	if err != nil {
		return err
	}
	if !found {
		return errors.New("no row")
	}
	v, ok := dest[0].(int64)
	if !ok {
		return fmt.Errorf("%T, not an integer", dest[0])
	}
	*n = v
	return nil
}

// AppendAudit writes the events durably, in order, chained to the log, and
// returns their records. Concurrent calls are committed together; a call
// returns after its batch is on disk, or with an error, and then none of
// its rows was written.
func (s *Store) AppendAudit(ctx context.Context, evs ...portcullis.AuditEvent) ([]portcullis.AuditRecord, error) {
	if err := s.read(ctx, "append audit"); err != nil {
		return nil, err
	}
	if len(evs) == 0 {
		return []portcullis.AuditRecord{}, nil
	}
	req := &auditReq{ctx: ctx, rows: make([]auditRow, len(evs)), reply: make(chan auditResult, 1)}
	for i := range evs {
		ev := &evs[i]
		body, err := portcullis.EncodeAuditBody(ev)
		if err != nil {
			return nil, fmt.Errorf("sqlite: append audit: %w", err)
		}
		req.rows[i] = auditRow{
			time: nanos(ev.Time), kind: string(ev.Kind), decisionID: ev.DecisionID, session: ev.Session,
			agent: ev.Agent, tool: ev.Tool, outcome: string(ev.Outcome), body: body,
		}
	}
	if !s.audit.commitAlone(req) {
		if err := s.audit.submit(req); err != nil {
			return nil, fmt.Errorf("sqlite: append audit: %w", err)
		}
	}
	// Wait for the commit even if ctx ends meanwhile: the answer must say
	// whether the rows were written.
	res := <-req.reply
	if res.err != nil {
		return nil, fmt.Errorf("sqlite: append audit: %w", res.err)
	}
	return res.recs, nil
}

// QueryAudit returns the matching records in sequence order, or newest
// first.
//
// A query by session, agent, tool or a time range bounded on both sides
// reads two parts of the log in one statement (one snapshot): the rows up to the watermark through their
// index table, and the unindexed tail after it (fewer than auditIndexBatch
// rows) by a scan of the table's end, each part ordered and limited, then
// merged.
func (s *Store) QueryAudit(ctx context.Context, q portcullis.AuditQuery) ([]portcullis.AuditRecord, error) {
	if err := s.read(ctx, "query audit"); err != nil {
		return nil, err
	}
	query, args := auditQuery(q)
	rows, err := s.rdb.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: query audit: %w", err)
	}
	out, err := scanRecords(rows)
	if err != nil {
		return nil, fmt.Errorf("sqlite: query audit: %w", err)
	}
	return out, nil
}

// auditQuery returns the statement of q and its arguments.
func auditQuery(q portcullis.AuditQuery) (string, []any) {
	var where []string
	var args []any
	add := func(cond string, v any) {
		where = append(where, cond)
		args = append(args, v)
	}
	// The index table that narrows the search, and its condition.
	var index, key string
	var keyArgs []any
	if q.Session != "" {
		add("a.session = ?", q.Session)
		index, key, keyArgs = "audit_by_session", "x.session = ?", []any{q.Session}
	}
	if q.Agent != "" {
		add("a.agent = ?", q.Agent)
		if index == "" {
			index, key, keyArgs = "audit_by_agent", "x.agent = ?", []any{q.Agent}
		}
	}
	if q.Tool != "" {
		add("a.tool = ?", q.Tool)
		if index == "" {
			index, key, keyArgs = "audit_by_tool", "x.tool = ?", []any{q.Tool}
		}
	}
	if q.Outcome != "" {
		add("a.outcome = ?", string(q.Outcome))
	}
	if q.Kind != "" {
		add("a.kind = ?", string(q.Kind))
	}
	if !q.Since.IsZero() {
		add("a.time >= ?", nanos(q.Since))
	}
	if !q.Until.IsZero() {
		add("a.time < ?", nanos(q.Until))
	}
	// A time range bounded on both sides is looked up by time; one bounded
	// on one side only is read in sequence order, which stops at the limit
	// rather than gathering and sorting every row since (or until) the
	// bound (as SQLite chose when the table had an index on time).
	if index == "" && !q.Since.IsZero() && !q.Until.IsZero() {
		index, key, keyArgs = "audit_by_time", "x.time >= ? AND x.time < ?", []any{nanos(q.Since), nanos(q.Until)}
	}
	var seqs []string
	var seqArgs []any
	if q.AfterSeq > 0 {
		seqs = append(seqs, "seq > ?")
		seqArgs = append(seqArgs, q.AfterSeq)
	}
	if q.BeforeSeq > 0 {
		seqs = append(seqs, "seq < ?")
		seqArgs = append(seqArgs, q.BeforeSeq)
	}
	order := ` ORDER BY seq`
	if q.Newest {
		order = ` ORDER BY seq DESC`
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	// conds joins the filters on the audit row (alias a) with the
	// sequence bounds on alias t.
	conds := func(t string, extra ...string) string {
		all := append([]string(nil), extra...)
		all = append(all, where...)
		for _, c := range seqs {
			all = append(all, t+"."+c)
		}
		if len(all) == 0 {
			return ""
		}
		return ` WHERE ` + strings.Join(all, ` AND `)
	}
	cols := `a.` + strings.ReplaceAll(recordColumns, `, `, `, a.`)
	if index == "" {
		// No index helps: the rows in sequence order, filtered.
		out := append(append(args, seqArgs...), limit)
		return `SELECT ` + cols + ` FROM audit a` + conds("a") + strings.ReplaceAll(order, "seq", "a.seq") + ` LIMIT ?`, out
	}
	const watermark = `(` + selectWatermark + `)`
	indexed := `SELECT ` + cols + ` FROM ` + index + ` x JOIN audit a ON a.seq = x.seq` +
		conds("x", key, `x.seq <= `+watermark) + strings.ReplaceAll(order, "seq", "x.seq") + ` LIMIT ?`
	tail := `SELECT ` + cols + ` FROM audit a` + conds("a", `a.seq > `+watermark) + strings.ReplaceAll(order, "seq", "a.seq") + ` LIMIT ?`
	var out []any
	out = append(append(append(append(out, keyArgs...), args...), seqArgs...), limit)
	out = append(append(append(out, args...), seqArgs...), limit)
	out = append(out, limit)
	return `SELECT * FROM (` + indexed + `) UNION ALL SELECT * FROM (` + tail + `)` + order + ` LIMIT ?`, out
}

// recordColumns are the columns of a record: the chained row and the
// fields copied out of its body, which VerifyAudit checks.
const recordColumns = `seq, body, prev_hash, hash, time, kind, decision_id, session, agent, tool, outcome`

func scanRecords(rows *sql.Rows) ([]portcullis.AuditRecord, error) {
	defer rows.Close()
	var out []portcullis.AuditRecord
	for rows.Next() {
		var r portcullis.AuditRecord
		var body []byte
		var at int64
		var c portcullis.AuditColumns
		var kind, outcome string
		if err := rows.Scan(&r.Seq, &body, &r.PrevHash, &r.Hash, &at, &kind, &c.DecisionID, &c.Session, &c.Agent, &c.Tool, &outcome); err != nil {
			return nil, err
		}
		c.Time, c.Kind, c.Outcome = fromNanos(at), portcullis.AuditKind(kind), portcullis.Outcome(outcome)
		r.Body, r.Columns = body, &c
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// scanPage is how many rows ScanAudit reads at a time.
const scanPage = 1000

// ScanAudit calls fn for every record with seq > afterSeq, in order, until
// fn returns false or an error (which it returns). It reads a page at a
// time and calls fn with no query open, so fn may use the store.
func (s *Store) ScanAudit(ctx context.Context, afterSeq int64, fn func(portcullis.AuditRecord) (bool, error)) error {
	for {
		if err := s.read(ctx, "scan audit"); err != nil {
			return err
		}
		rows, err := s.rdb.QueryContext(ctx, `SELECT `+recordColumns+` FROM audit WHERE seq > ? ORDER BY seq LIMIT ?`, afterSeq, scanPage)
		if err != nil {
			return fmt.Errorf("sqlite: scan audit: %w", err)
		}
		page, err := scanRecords(rows)
		if err != nil {
			return fmt.Errorf("sqlite: scan audit: %w", err)
		}
		for _, r := range page {
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
// one transaction. INVALID_REQUEST when cp.Hash is not the hash of row
// cp.Seq.
func (s *Store) PruneAudit(ctx context.Context, cp portcullis.AuditCheckpoint) error {
	return s.write(ctx, "prune audit", func(t *tx) error {
		var hash string
		err := t.QueryRowContext(ctx, `SELECT hash FROM audit WHERE seq = ?`, cp.Seq).Scan(&hash)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && hash != cp.Hash) {
			return portcullis.Errorf(portcullis.CodeInvalidRequest, "checkpoint does not name row %d and its hash", cp.Seq)
		}
		if err != nil {
			return err
		}
		// The index entries of the pruned rows first, found by their keys.
		for _, del := range pruneIndex {
			if _, err := t.ExecContext(ctx, del, cp.Seq); err != nil {
				return err
			}
		}
		if _, err := t.ExecContext(ctx, `DELETE FROM audit WHERE seq <= ?`, cp.Seq); err != nil {
			return err
		}
		_, err = t.ExecContext(ctx, `INSERT INTO audit_checkpoint (id, seq, hash, time, signature) VALUES (1, ?, ?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash, time = excluded.time, signature = excluded.signature`,
			cp.Seq, cp.Hash, nanos(cp.Time), cp.Signature)
		return err
	})
}

// pruneIndex deletes the index entries of the rows up to a seq.
var pruneIndex = []string{
	`DELETE FROM audit_by_session WHERE (session, seq) IN (SELECT session, seq FROM audit WHERE seq <= ?)`,
	`DELETE FROM audit_by_agent WHERE (agent, seq) IN (SELECT agent, seq FROM audit WHERE seq <= ?)`,
	`DELETE FROM audit_by_tool WHERE (tool, seq) IN (SELECT tool, seq FROM audit WHERE seq <= ?)`,
	`DELETE FROM audit_by_time WHERE (time, seq) IN (SELECT time, seq FROM audit WHERE seq <= ?)`,
}

// AuditCheckpoint returns the checkpoint of the pruned prefix, if any.
func (s *Store) AuditCheckpoint(ctx context.Context) (portcullis.AuditCheckpoint, bool, error) {
	if err := s.read(ctx, "audit checkpoint"); err != nil {
		return portcullis.AuditCheckpoint{}, false, err
	}
	var cp portcullis.AuditCheckpoint
	var at int64
	err := s.rdb.QueryRowContext(ctx, `SELECT seq, hash, time, signature FROM audit_checkpoint WHERE id = 1`).Scan(&cp.Seq, &cp.Hash, &at, &cp.Signature)
	if errors.Is(err, sql.ErrNoRows) {
		return portcullis.AuditCheckpoint{}, false, nil
	}
	if err != nil {
		return portcullis.AuditCheckpoint{}, false, fmt.Errorf("sqlite: audit checkpoint: %w", err)
	}
	cp.Time = fromNanos(at)
	return cp, true, nil
}
