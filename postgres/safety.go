package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/portcullis/portcullis"
)

var putBlockSQL = notifying(`INSERT INTO blocks (agent, reason, challenge_id, decision_id, created_at)
	VALUES ($1, $2, $3, $4, $5)
	ON CONFLICT (agent) DO UPDATE SET reason = EXCLUDED.reason, challenge_id = EXCLUDED.challenge_id,
		decision_id = EXCLUDED.decision_id, created_at = EXCLUDED.created_at
	RETURNING 1`, 5)

// PutBlock records a block for b.Agent, replacing any earlier one.
func (s *Store) PutBlock(ctx context.Context, b portcullis.Block) error {
	if b.Agent == "" {
		return portcullis.Errorf(portcullis.CodeInvalidRequest, "put block: missing agent")
	}
	if _, err := s.pool.Exec(ctx, putBlockSQL, b.Agent, b.Reason, b.ChallengeID, b.DecisionID, ts(b.CreatedAt),
		s.channel, payload(portcullis.ChangeBlock, b.Agent)); err != nil {
		return s.fail("put block", err)
	}
	return nil
}

const blockColumns = `agent, reason, challenge_id, decision_id, created_at`

func scanBlock(row pgx.Row) (portcullis.Block, error) {
	var b portcullis.Block
	err := row.Scan(&b.Agent, &b.Reason, &b.ChallengeID, &b.DecisionID, &b.CreatedAt)
	b.CreatedAt = b.CreatedAt.UTC()
	return b, err
}

// Block returns the agent's block, if it has one.
func (s *Store) Block(ctx context.Context, agent string) (portcullis.Block, bool, error) {
	b, err := scanBlock(s.pool.QueryRow(ctx, `SELECT `+blockColumns+` FROM blocks WHERE agent = $1`, agent))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return portcullis.Block{}, false, nil
	case err != nil:
		return portcullis.Block{}, false, s.fail("read block", err)
	}
	return b, true, nil
}

var deleteBlockSQL = notifying(`DELETE FROM blocks WHERE agent = $1 RETURNING 1`, 1)

// DeleteBlock clears the agent's block; NOT_FOUND when there is none.
func (s *Store) DeleteBlock(ctx context.Context, agent string) error {
	tag, err := s.pool.Exec(ctx, deleteBlockSQL, agent, s.channel, payload(portcullis.ChangeBlock, agent))
	if err != nil {
		return s.fail("delete block", err)
	}
	if tag.RowsAffected() == 0 {
		return portcullis.Errorf(portcullis.CodeNotFound, "agent %q is not blocked", agent)
	}
	return nil
}

// Blocks lists every block, oldest first.
func (s *Store) Blocks(ctx context.Context) ([]portcullis.Block, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+blockColumns+` FROM blocks ORDER BY created_at, agent`)
	if err != nil {
		return nil, s.fail("list blocks", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (portcullis.Block, error) { return scanBlock(row) })
	if err != nil {
		return nil, s.fail("list blocks", err)
	}
	return out, nil
}

// CreateChallenge records a challenge. Its ID must be set (INVALID_REQUEST)
// and new (CONFLICT).
func (s *Store) CreateChallenge(ctx context.Context, c portcullis.Challenge) error {
	if c.ID == "" {
		return portcullis.Errorf(portcullis.CodeInvalidRequest, "create challenge: missing id")
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO challenges (id, agent, salt, code_hash, reason, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		c.ID, c.Agent, c.Salt, c.CodeHash, c.Reason, ts(c.CreatedAt), nullTime(c.ExpiresAt))
	if err != nil {
		if isUniqueViolation(err) {
			return portcullis.Errorf(portcullis.CodeConflict, "create challenge: id %q exists", c.ID)
		}
		return s.fail("create challenge", err)
	}
	return nil
}

// Challenge returns a challenge; NOT_FOUND when there is none.
func (s *Store) Challenge(ctx context.Context, id string) (portcullis.Challenge, error) {
	var c portcullis.Challenge
	var expires *time.Time
	err := s.pool.QueryRow(ctx, `SELECT id, agent, salt, code_hash, reason, created_at, expires_at FROM challenges WHERE id = $1`, id).
		Scan(&c.ID, &c.Agent, &c.Salt, &c.CodeHash, &c.Reason, &c.CreatedAt, &expires)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return portcullis.Challenge{}, portcullis.Errorf(portcullis.CodeNotFound, "no challenge %q", id)
	case err != nil:
		return portcullis.Challenge{}, s.fail("read challenge", err)
	}
	c.CreatedAt = c.CreatedAt.UTC()
	c.ExpiresAt = fromNull(expires)
	return c, nil
}

// DeleteChallenge removes a challenge; removing one that is not there is
// not an error.
func (s *Store) DeleteChallenge(ctx context.Context, id string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM challenges WHERE id = $1`, id); err != nil {
		return s.fail("delete challenge", err)
	}
	return nil
}

// AddFailedAttempt records a wrong code for the agent at `at`, forgets the
// agent's failures before `since`, and counts those since then, this one
// included. Concurrent failures of one agent, on any replica, are counted
// one after the other (the agent's row in failure_agents is locked), so a
// burst cannot slip past a rate limit.
func (s *Store) AddFailedAttempt(ctx context.Context, agent string, at, since time.Time) (int, error) {
	// A batch runs as one implicit transaction: the lock taken by the first
	// statement is held until the count is read.
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO failure_agents (agent) VALUES ($1) ON CONFLICT (agent) DO UPDATE SET agent = EXCLUDED.agent`, agent)
	b.Queue(`DELETE FROM failed_attempts WHERE agent = $1 AND at < $2`, agent, ts(since))
	b.Queue(`INSERT INTO failed_attempts (agent, at) VALUES ($1, $2)`, agent, ts(at))
	var n int
	b.Queue(`SELECT count(*) FROM failed_attempts WHERE agent = $1 AND at >= $2`, agent, ts(since)).QueryRow(func(row pgx.Row) error {
		return row.Scan(&n)
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return 0, s.fail("add failed attempt", err)
	}
	return n, nil
}

// FailedAttempts counts the agent's failures since the given time.
func (s *Store) FailedAttempts(ctx context.Context, agent string, since time.Time) (int, error) {
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM failed_attempts WHERE agent = $1 AND at >= $2`, agent, ts(since)).Scan(&n); err != nil {
		return 0, s.fail("count failed attempts", err)
	}
	return n, nil
}

// RecordStep counts one more step of the run, atomically on any replica,
// and returns the state as it was before.
func (s *Store) RecordStep(ctx context.Context, runID, agent string, at time.Time) (portcullis.RunState, error) {
	st := portcullis.RunState{RunID: runID}
	var prev *time.Time
	err := s.pool.QueryRow(ctx, `INSERT INTO runs AS r (run_id, agent, steps, last_outcome, updated_at)
		VALUES ($1, $2, 1, '', $3)
		ON CONFLICT (run_id) DO UPDATE SET steps = r.steps + 1, prev_updated_at = r.updated_at, updated_at = EXCLUDED.updated_at
		RETURNING agent, steps - 1, last_outcome, prev_updated_at`, runID, agent, ts(at)).
		Scan(&st.Agent, &st.Steps, &st.LastOutcome, &prev)
	if err != nil {
		return portcullis.RunState{}, s.fail("record step", err)
	}
	st.UpdatedAt = fromNull(prev)
	return st, nil
}

// RecordOutcome records the outcome of the run's latest step; NOT_FOUND for
// a run never stepped.
func (s *Store) RecordOutcome(ctx context.Context, runID string, outcome portcullis.StepOutcome, at time.Time) error {
	tag, err := s.pool.Exec(ctx, `UPDATE runs SET last_outcome = $2, updated_at = $3 WHERE run_id = $1`, runID, string(outcome), ts(at))
	if err != nil {
		return s.fail("record outcome", err)
	}
	if tag.RowsAffected() == 0 {
		return portcullis.Errorf(portcullis.CodeNotFound, "no run %q", runID)
	}
	return nil
}

// RunState returns a run's state; ok is false for a run never seen.
func (s *Store) RunState(ctx context.Context, runID string) (portcullis.RunState, bool, error) {
	st := portcullis.RunState{RunID: runID}
	err := s.pool.QueryRow(ctx, `SELECT agent, steps, last_outcome, updated_at FROM runs WHERE run_id = $1`, runID).
		Scan(&st.Agent, &st.Steps, &st.LastOutcome, &st.UpdatedAt)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return portcullis.RunState{}, false, nil
	case err != nil:
		return portcullis.RunState{}, false, s.fail("read run state", err)
	}
	st.UpdatedAt = st.UpdatedAt.UTC()
	return st, true, nil
}

// RecordDenial counts the run's denials of the action with this signature
// since its last new user input, this one included.
func (s *Store) RecordDenial(ctx context.Context, runID, signature string, at time.Time) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `INSERT INTO denials AS d (run_id, signature, count, last_at) VALUES ($1, $2, 1, $3)
		ON CONFLICT (run_id, signature) DO UPDATE SET count = d.count + 1, last_at = EXCLUDED.last_at
		RETURNING count`, runID, signature, ts(at)).Scan(&n)
	if err != nil {
		return 0, s.fail("record denial", err)
	}
	return n, nil
}

// ClearDenials forgets the run's denials.
func (s *Store) ClearDenials(ctx context.Context, runID string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM denials WHERE run_id = $1`, runID); err != nil {
		return s.fail("clear denials", err)
	}
	return nil
}

var putToolPinSQL = notifying(`INSERT INTO tool_pins (upstream, tool, hash, definition, pending_hash, pending_definition, first_seen, updated_at, accepted_by)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
	ON CONFLICT (upstream, tool) DO UPDATE SET hash = EXCLUDED.hash, definition = EXCLUDED.definition,
		pending_hash = EXCLUDED.pending_hash, pending_definition = EXCLUDED.pending_definition,
		first_seen = EXCLUDED.first_seen, updated_at = EXCLUDED.updated_at, accepted_by = EXCLUDED.accepted_by
	RETURNING 1`, 9)

// PutToolPin creates or replaces a pin. A pin without a tool or hash is
// INVALID_REQUEST.
func (s *Store) PutToolPin(ctx context.Context, p portcullis.ToolPin) error {
	if p.Tool == "" || p.Hash == "" {
		return portcullis.Errorf(portcullis.CodeInvalidRequest, "put tool pin: missing tool or hash")
	}
	def := string(p.Definition)
	if def == "" {
		def = "null"
	}
	var pending any
	if len(p.PendingDefinition) > 0 {
		pending = string(p.PendingDefinition)
	}
	if _, err := s.pool.Exec(ctx, putToolPinSQL, p.Upstream, p.Tool, p.Hash, def, p.PendingHash, pending,
		ts(p.FirstSeen), ts(p.UpdatedAt), p.AcceptedBy,
		s.channel, payload(portcullis.ChangePin, p.Upstream+"/"+p.Tool)); err != nil {
		return s.fail(fmt.Sprintf("put tool pin %s/%s", p.Upstream, p.Tool), err)
	}
	return nil
}

const pinColumns = `upstream, tool, hash, definition, pending_hash, pending_definition, first_seen, updated_at, accepted_by`

func scanPin(row pgx.Row) (portcullis.ToolPin, error) {
	var p portcullis.ToolPin
	var def string
	var pending *string
	err := row.Scan(&p.Upstream, &p.Tool, &p.Hash, &def, &p.PendingHash, &pending, &p.FirstSeen, &p.UpdatedAt, &p.AcceptedBy)
	p.Definition = []byte(def)
	if pending != nil {
		p.PendingDefinition = []byte(*pending)
	}
	p.FirstSeen, p.UpdatedAt = p.FirstSeen.UTC(), p.UpdatedAt.UTC()
	return p, err
}

// ToolPin returns the pinned definition of an upstream's tool.
func (s *Store) ToolPin(ctx context.Context, upstream, tool string) (portcullis.ToolPin, bool, error) {
	p, err := scanPin(s.pool.QueryRow(ctx, `SELECT `+pinColumns+` FROM tool_pins WHERE upstream = $1 AND tool = $2`, upstream, tool))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return portcullis.ToolPin{}, false, nil
	case err != nil:
		return portcullis.ToolPin{}, false, s.fail("read tool pin", err)
	}
	return p, true, nil
}

// ToolPins lists every pin by upstream and tool.
func (s *Store) ToolPins(ctx context.Context) ([]portcullis.ToolPin, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+pinColumns+` FROM tool_pins ORDER BY upstream, tool`)
	if err != nil {
		return nil, s.fail("list tool pins", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (portcullis.ToolPin, error) { return scanPin(row) })
	if err != nil {
		return nil, s.fail("list tool pins", err)
	}
	return out, nil
}
