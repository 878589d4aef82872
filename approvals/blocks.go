package approvals

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/portcullis/portcullis"
)

// BlockGate is what Blocks needs of the gate: clearing a danger-zone
// block with the code its challenge sent a person, or without one (the
// administrator's override), and sending a new code for a block.
// *gate.Gate is one.
type BlockGate interface {
	Unblock(ctx context.Context, agent, challengeID, code string) error
	ClearBlock(ctx context.Context, agent string) error
	ReissueChallenge(ctx context.Context, agent string) (challengeID string, err error)
}

// Blocks clears the danger-zone blocks of agents on the store itself,
// through a gate built on the same store, and records each clearing in
// the audit log as done by the person By. Whoever holds a Blocks is a
// human channel: nothing an agent can reach may call it, and Clear
// belongs behind the administrator's token.
type Blocks struct {
	Store portcullis.Store
	Gate  BlockGate
	// By names who acts, for the audit log.
	By string
	// Clock stamps the audit rows (nil: the system clock).
	Clock portcullis.Clock
}

// Unblock clears agent's block with its challenge's code. Errors carry the
// gate's codes: VERIFICATION_FAILED for a wrong or expired code,
// RATE_LIMITED after too many wrong ones, NOT_FOUND when the agent is not
// blocked or the challenge is not its own.
func (b *Blocks) Unblock(ctx context.Context, agent, challengeID, code string) error {
	if err := b.Gate.Unblock(ctx, agent, challengeID, code); err != nil {
		return err
	}
	return b.audit(ctx, agent, "cleared with challenge "+challengeID)
}

// Clear clears agent's block without a code, as the administrator.
func (b *Blocks) Clear(ctx context.Context, agent string) error {
	if err := b.Gate.ClearBlock(ctx, agent); err != nil {
		return err
	}
	return b.audit(ctx, agent, "cleared by the administrator")
}

func (b *Blocks) audit(ctx context.Context, agent, detail string) error {
	var clock portcullis.Clock = portcullis.SystemClock{}
	if b.Clock != nil {
		clock = b.Clock
	}
	ev := portcullis.AuditEvent{Kind: portcullis.AuditUnblock, Time: clock.Now().UTC(), Agent: agent, Actor: b.By, Detail: detail}
	if _, err := b.Store.AppendAudit(ctx, ev); err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	return nil
}

// UnblockRequest is what `portcullis unblock` asks of Blocks: the blocked
// agents (List), clearing Agents as the administrator (Admin, whose token
// the caller checked; All for every blocked agent), a new code for an
// agent's block (Reissue, sent to the gate's human channels), or clearing
// an agent's block with its challenge's code.
type UnblockRequest struct {
	Agents           []string
	List, Admin, All bool
	Reissue          bool
	Challenge, Code  string
}

// RefusedError is a code the gate refused: wrong or expired
// (VERIFICATION_FAILED), too many tries (RATE_LIMITED), or not the
// challenge of a block of the agent (NOT_FOUND).
type RefusedError struct{ Err error }

func (e *RefusedError) Error() string { return e.Err.Error() }

func (e *RefusedError) Unwrap() error { return e.Err }

// Do does what r asks, writing to w what was done. A request that does
// not fit together is an error that says what to give; a code the gate
// refuses is a *RefusedError.
func (b *Blocks) Do(ctx context.Context, r UnblockRequest, w io.Writer) error {
	switch {
	case r.List && len(r.Agents) > 0:
		return errors.New("unblock --list takes no agent")
	case r.List:
		return b.List(ctx, w)
	case r.Admin && r.All && len(r.Agents) > 0:
		return errors.New("unblock --all takes no agent")
	case r.Admin && !r.All && len(r.Agents) != 1:
		return errors.New("unblock --admin-token takes one agent, or --all")
	case r.Admin:
		return b.ClearEach(ctx, r.Agents, r.All, w)
	case len(r.Agents) != 1:
		return errors.New("unblock takes one agent")
	case r.Reissue:
		_, err := b.Gate.ReissueChallenge(ctx, r.Agents[0])
		return err
	case r.Challenge == "" || r.Code == "":
		return fmt.Errorf("unblock %s needs --challenge ID and --code CODE (or --reissue for a new code)", r.Agents[0])
	}
	if err := b.Unblock(ctx, r.Agents[0], r.Challenge, r.Code); err != nil {
		switch portcullis.ErrorCode(err) {
		case portcullis.CodeVerificationFailed, portcullis.CodeRateLimited, portcullis.CodeNotFound:
			return &RefusedError{Err: err}
		}
		return err
	}
	_, err := fmt.Fprintf(w, "unblocked %s\n", r.Agents[0])
	return err
}

// List writes to w the blocked agents as WriteBlocks does, or that no
// agent is blocked.
func (b *Blocks) List(ctx context.Context, w io.Writer) error {
	list, err := b.Store.Blocks(ctx)
	if err != nil {
		return err
	}
	if len(list) == 0 {
		_, err := fmt.Fprintln(w, "no agent is blocked")
		return err
	}
	return WriteBlocks(w, list)
}

// ClearEach clears the blocks of agents as the administrator (every
// blocked agent when all is set), writing a line to w for each one
// cleared, or that no agent is blocked. It stops at the first failure.
func (b *Blocks) ClearEach(ctx context.Context, agents []string, all bool, w io.Writer) error {
	if all {
		list, err := b.Store.Blocks(ctx)
		if err != nil {
			return err
		}
		for _, bl := range list {
			agents = append(agents, bl.Agent)
		}
	}
	for _, a := range agents {
		if err := b.Clear(ctx, a); err != nil {
			return err
		}
		fmt.Fprintf(w, "unblocked %s (administrator)\n", a)
	}
	if len(agents) == 0 {
		_, err := fmt.Fprintln(w, "no agent is blocked")
		return err
	}
	return nil
}

// WriteBlocks writes the blocked agents as a table: since when (UTC),
// their challenge and why they were blocked.
func WriteBlocks(w io.Writer, blocks []portcullis.Block) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tSINCE\tCHALLENGE\tREASON")
	for _, b := range blocks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", b.Agent, b.CreatedAt.UTC().Format(time.RFC3339), b.ChallengeID, oneLine(b.Reason, 80))
	}
	return tw.Flush()
}
