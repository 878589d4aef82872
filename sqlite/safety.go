package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/portcullis/portcullis"
)

// PutBlock records a block for b.Agent, replacing any earlier one.
// INVALID_REQUEST without an agent.
func (s *Store) PutBlock(ctx context.Context, b portcullis.Block) error {
	if b.Agent == "" {
		return portcullis.Errorf(portcullis.CodeInvalidRequest, "sqlite: put block: missing agent")
	}
	return s.write(ctx, "put block", func(t *tx) error {
		if _, err := t.ExecContext(ctx, `INSERT INTO blocks (agent, reason, challenge_id, decision_id, created_at) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (agent) DO UPDATE SET reason = excluded.reason, challenge_id = excluded.challenge_id,
				decision_id = excluded.decision_id, created_at = excluded.created_at`,
			b.Agent, b.Reason, b.ChallengeID, b.DecisionID, nanos(b.CreatedAt)); err != nil {
			return err
		}
		return t.change(ctx, portcullis.ChangeBlock, b.Agent)
	})
}

const selectBlocks = `SELECT agent, reason, challenge_id, decision_id, created_at FROM blocks`

// selectBlock reads one agent's block; prepared once on each of
// Store.blocks' connections, since every decision reads it.
const selectBlock = selectBlocks + ` WHERE agent = ?`

func scanBlock(sc scanner) (portcullis.Block, error) {
	var b portcullis.Block
	var created int64
	if err := sc.Scan(&b.Agent, &b.Reason, &b.ChallengeID, &b.DecisionID, &created); err != nil {
		return portcullis.Block{}, err
	}
	b.CreatedAt = fromNanos(created)
	return b, nil
}

// Block returns the agent's block, if it has one.
func (s *Store) Block(ctx context.Context, agent string) (portcullis.Block, bool, error) {
	if err := s.read(ctx, "block"); err != nil {
		return portcullis.Block{}, false, err
	}
	b, ok, err := s.blocks.block(ctx, agent)
	if err != nil {
		return portcullis.Block{}, false, fmt.Errorf("sqlite: block: %w", err)
	}
	return b, ok, nil
}

// DeleteBlock clears the agent's block; NOT_FOUND when there is none.
func (s *Store) DeleteBlock(ctx context.Context, agent string) error {
	return s.write(ctx, "delete block", func(t *tx) error {
		res, err := t.ExecContext(ctx, `DELETE FROM blocks WHERE agent = ?`, agent)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return portcullis.Errorf(portcullis.CodeNotFound, "agent %q is not blocked", agent)
		}
		return t.change(ctx, portcullis.ChangeBlock, agent)
	})
}

// Blocks lists every block, oldest first.
func (s *Store) Blocks(ctx context.Context) ([]portcullis.Block, error) {
	if err := s.read(ctx, "list blocks"); err != nil {
		return nil, err
	}
	rows, err := s.rdb.QueryContext(ctx, selectBlocks+` ORDER BY created_at, agent`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list blocks: %w", err)
	}
	defer rows.Close()
	var out []portcullis.Block
	for rows.Next() {
		b, err := scanBlock(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list blocks: %w", err)
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list blocks: %w", err)
	}
	return out, nil
}

// CreateChallenge records a challenge. INVALID_REQUEST without an ID;
// CONFLICT when the ID exists.
func (s *Store) CreateChallenge(ctx context.Context, c portcullis.Challenge) error {
	if c.ID == "" {
		return portcullis.Errorf(portcullis.CodeInvalidRequest, "sqlite: create challenge: missing id")
	}
	return s.write(ctx, "create challenge", func(t *tx) error {
		res, err := t.ExecContext(ctx, `INSERT INTO challenges (id, agent, salt, code_hash, reason, created_at, expires_at)
			VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
			c.ID, c.Agent, c.Salt, c.CodeHash, c.Reason, nanos(c.CreatedAt), nanos(c.ExpiresAt))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return portcullis.Errorf(portcullis.CodeConflict, "challenge %q exists", c.ID)
		}
		return nil
	})
}

// Challenge returns a challenge; NOT_FOUND when there is none.
func (s *Store) Challenge(ctx context.Context, id string) (portcullis.Challenge, error) {
	if err := s.read(ctx, "challenge"); err != nil {
		return portcullis.Challenge{}, err
	}
	var c portcullis.Challenge
	var created, expires int64
	err := s.rdb.QueryRowContext(ctx, `SELECT id, agent, salt, code_hash, reason, created_at, expires_at FROM challenges WHERE id = ?`, id).
		Scan(&c.ID, &c.Agent, &c.Salt, &c.CodeHash, &c.Reason, &created, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return portcullis.Challenge{}, fmt.Errorf("sqlite: challenge: %w", portcullis.Errorf(portcullis.CodeNotFound, "no challenge %q", id))
	}
	if err != nil {
		return portcullis.Challenge{}, fmt.Errorf("sqlite: challenge: %w", err)
	}
	c.CreatedAt, c.ExpiresAt = fromNanos(created), fromNanos(expires)
	return c, nil
}

// DeleteChallenge removes a challenge; removing one that is not there is
// not an error.
func (s *Store) DeleteChallenge(ctx context.Context, id string) error {
	return s.write(ctx, "delete challenge", func(t *tx) error {
		_, err := t.ExecContext(ctx, `DELETE FROM challenges WHERE id = ?`, id)
		return err
	})
}

// AddFailedAttempt records a wrong code for the agent and returns how many
// failures it has since `since`, this one included. Older failures of the
// agent are forgotten.
func (s *Store) AddFailedAttempt(ctx context.Context, agent string, at, since time.Time) (int, error) {
	var n int
	err := s.write(ctx, "add failed attempt", func(t *tx) error {
		if _, err := t.ExecContext(ctx, `DELETE FROM failed_attempts WHERE agent = ? AND at < ?`, agent, nanos(since)); err != nil {
			return err
		}
		if _, err := t.ExecContext(ctx, `INSERT INTO failed_attempts (agent, at) VALUES (?, ?)`, agent, nanos(at)); err != nil {
			return err
		}
		return t.QueryRowContext(ctx, `SELECT count(*) FROM failed_attempts WHERE agent = ?`, agent).Scan(&n)
	})
	return n, err
}

// FailedAttempts counts the agent's failures since the given time.
func (s *Store) FailedAttempts(ctx context.Context, agent string, since time.Time) (int, error) {
	if err := s.read(ctx, "failed attempts"); err != nil {
		return 0, err
	}
	var n int
	if err := s.rdb.QueryRowContext(ctx, `SELECT count(*) FROM failed_attempts WHERE agent = ? AND at >= ?`, agent, nanos(since)).Scan(&n); err != nil {
		return 0, fmt.Errorf("sqlite: failed attempts: %w", err)
	}
	return n, nil
}

func scanRun(sc scanner) (portcullis.RunState, error) {
	var r portcullis.RunState
	var outcome string
	var updated int64
	if err := sc.Scan(&r.RunID, &r.Agent, &r.Steps, &outcome, &updated); err != nil {
		return portcullis.RunState{}, err
	}
	r.LastOutcome = portcullis.StepOutcome(outcome)
	r.UpdatedAt = fromNanos(updated)
	return r, nil
}

const selectRun = `SELECT run_id, agent, steps, last_outcome, updated_at FROM runs WHERE run_id = ?`

// RecordStep counts one more step of the run and returns the state as it
// was before this step (the zero state, with the run's ID and agent, for a
// new run).
func (s *Store) RecordStep(ctx context.Context, runID, agent string, at time.Time) (portcullis.RunState, error) {
	var before portcullis.RunState
	err := s.write(ctx, "record step", func(t *tx) error {
		var err error
		before, err = scanRun(t.QueryRowContext(ctx, selectRun, runID))
		if errors.Is(err, sql.ErrNoRows) {
			before, err = portcullis.RunState{RunID: runID, Agent: agent}, nil
		}
		if err != nil {
			return err
		}
		_, err = t.ExecContext(ctx, `INSERT INTO runs (run_id, agent, steps, last_outcome, updated_at) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (run_id) DO UPDATE SET steps = excluded.steps, updated_at = excluded.updated_at`,
			runID, before.Agent, before.Steps+1, string(before.LastOutcome), nanos(at))
		return err
	})
	if err != nil {
		return portcullis.RunState{}, err
	}
	return before, nil
}

// RecordOutcome records the outcome of the run's latest step; NOT_FOUND for
// a run never seen.
func (s *Store) RecordOutcome(ctx context.Context, runID string, outcome portcullis.StepOutcome, at time.Time) error {
	return s.write(ctx, "record outcome", func(t *tx) error {
		res, err := t.ExecContext(ctx, `UPDATE runs SET last_outcome = ?, updated_at = ? WHERE run_id = ?`, string(outcome), nanos(at), runID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return portcullis.Errorf(portcullis.CodeNotFound, "no run %q", runID)
		}
		return nil
	})
}

// RunState returns a run's state; ok is false for a run never seen.
func (s *Store) RunState(ctx context.Context, runID string) (portcullis.RunState, bool, error) {
	if err := s.read(ctx, "run state"); err != nil {
		return portcullis.RunState{}, false, err
	}
	r, err := scanRun(s.rdb.QueryRowContext(ctx, selectRun, runID))
	if errors.Is(err, sql.ErrNoRows) {
		return portcullis.RunState{}, false, nil
	}
	if err != nil {
		return portcullis.RunState{}, false, fmt.Errorf("sqlite: run state: %w", err)
	}
	return r, true, nil
}

// RecordDenial counts the run's denials of the action with this signature
// since the run's last new user input, this one included.
func (s *Store) RecordDenial(ctx context.Context, runID, signature string, at time.Time) (int, error) {
	var n int
	err := s.write(ctx, "record denial", func(t *tx) error {
		return t.QueryRowContext(ctx, `INSERT INTO denials (run_id, signature, count, updated_at) VALUES (?, ?, 1, ?)
			ON CONFLICT (run_id, signature) DO UPDATE SET count = count + 1, updated_at = excluded.updated_at
			RETURNING count`, runID, signature, nanos(at)).Scan(&n)
	})
	return n, err
}

// ClearDenials forgets the run's denials.
func (s *Store) ClearDenials(ctx context.Context, runID string) error {
	return s.write(ctx, "clear denials", func(t *tx) error {
		_, err := t.ExecContext(ctx, `DELETE FROM denials WHERE run_id = ?`, runID)
		return err
	})
}

const selectPins = `SELECT upstream, tool, hash, definition, pending_hash, pending_definition, first_seen, updated_at, accepted_by FROM tool_pins`

func scanPin(sc scanner) (portcullis.ToolPin, error) {
	var p portcullis.ToolPin
	var def, pending []byte
	var first, updated int64
	if err := sc.Scan(&p.Upstream, &p.Tool, &p.Hash, &def, &p.PendingHash, &pending, &first, &updated, &p.AcceptedBy); err != nil {
		return portcullis.ToolPin{}, err
	}
	if len(def) > 0 {
		p.Definition = json.RawMessage(def)
	}
	if len(pending) > 0 {
		p.PendingDefinition = json.RawMessage(pending)
	}
	p.FirstSeen, p.UpdatedAt = fromNanos(first), fromNanos(updated)
	return p, nil
}

// ToolPin returns the pinned definition of an upstream's tool.
func (s *Store) ToolPin(ctx context.Context, upstream, tool string) (portcullis.ToolPin, bool, error) {
	if err := s.read(ctx, "tool pin"); err != nil {
		return portcullis.ToolPin{}, false, err
	}
	p, err := scanPin(s.rdb.QueryRowContext(ctx, selectPins+` WHERE upstream = ? AND tool = ?`, upstream, tool))
	if errors.Is(err, sql.ErrNoRows) {
		return portcullis.ToolPin{}, false, nil
	}
	if err != nil {
		return portcullis.ToolPin{}, false, fmt.Errorf("sqlite: tool pin: %w", err)
	}
	return p, true, nil
}

// PutToolPin creates or replaces a pin. INVALID_REQUEST without a tool or
// hash.
func (s *Store) PutToolPin(ctx context.Context, p portcullis.ToolPin) error {
	if p.Tool == "" || p.Hash == "" {
		return portcullis.Errorf(portcullis.CodeInvalidRequest, "sqlite: put tool pin: missing tool or hash")
	}
	def := []byte(p.Definition)
	if def == nil {
		def = []byte{}
	}
	var pending []byte
	if len(p.PendingDefinition) > 0 {
		pending = p.PendingDefinition
	}
	return s.write(ctx, "put tool pin", func(t *tx) error {
		if _, err := t.ExecContext(ctx, `INSERT INTO tool_pins (upstream, tool, hash, definition, pending_hash, pending_definition, first_seen, updated_at, accepted_by)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (upstream, tool) DO UPDATE SET hash = excluded.hash, definition = excluded.definition,
				pending_hash = excluded.pending_hash, pending_definition = excluded.pending_definition,
				first_seen = excluded.first_seen, updated_at = excluded.updated_at, accepted_by = excluded.accepted_by`,
			p.Upstream, p.Tool, p.Hash, def, p.PendingHash, pending, nanos(p.FirstSeen), nanos(p.UpdatedAt), p.AcceptedBy); err != nil {
			return err
		}
		return t.change(ctx, portcullis.ChangePin, p.Upstream+"/"+p.Tool)
	})
}

// ToolPins lists every pin by upstream and tool.
func (s *Store) ToolPins(ctx context.Context) ([]portcullis.ToolPin, error) {
	if err := s.read(ctx, "tool pins"); err != nil {
		return nil, err
	}
	rows, err := s.rdb.QueryContext(ctx, selectPins+` ORDER BY upstream, tool`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: tool pins: %w", err)
	}
	defer rows.Close()
	var out []portcullis.ToolPin
	for rows.Next() {
		p, err := scanPin(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: tool pins: %w", err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: tool pins: %w", err)
	}
	return out, nil
}
