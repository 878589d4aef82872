package gate

import (
	"context"
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/portcullis/portcullis"
)

// Challenge codes: 6 characters of 0-9A-Z without I and O, from the gate's
// random source, stored only as PBKDF2-SHA256 under a random salt.
const (
	codeAlphabet    = "0123456789ABCDEFGHJKLMNPQRSTUVWXYZ"
	codeLength      = 6
	codeIterations  = 100_000
	maxFailures     = 10 // failed verifications per agent per failureWindow
	failureWindow   = time.Minute
	defaultCodeLife = 5 * time.Minute
)

// dangerZone stops every call of an agent that has a persisted block. A
// block store that cannot be read counts as a block.
func (e *eval) dangerZone(ctx context.Context) bool {
	st := e.g.store
	switch {
	case e.c.Agent == "":
		e.trace("danger_zone", "no agent named: no block applies")
		return false
	case st == nil:
		e.trace("danger_zone", "no store: blocks are not kept")
		return false
	}
	b, blocked, err := st.Block(ctx, e.c.Agent)
	if err != nil {
		e.source = portcullis.SourceDangerZone
		e.end(&portcullis.TraceEntry{Stage: "danger_zone", Result: "cannot read blocks (" + err.Error() + "): the agent is treated as blocked"}, ending{
			outcome: portcullis.OutcomeStop, level: portcullis.Deny, code: portcullis.CodeDangerZone,
			reason:     "The gate cannot tell whether agent " + quote(e.c.Agent) + " is blocked, so it is stopped",
			authorize:  "the gateway's store answering again",
			failClosed: true,
		})
		return true
	}
	if !blocked {
		e.trace("danger_zone", "agent "+quote(e.c.Agent)+" is not blocked")
		return false
	}
	e.source = portcullis.SourceDangerZone
	e.end(&portcullis.TraceEntry{Stage: "danger_zone", Result: "agent " + quote(e.c.Agent) + " is blocked: " + b.Reason}, ending{
		outcome: portcullis.OutcomeStop, level: portcullis.Deny, code: portcullis.CodeDangerZone,
		reason:    "Agent " + quote(e.c.Agent) + " was stopped in the danger zone (" + b.Reason + ") and must wait for a person to clear the block",
		authorize: "a person clearing the block with the challenge's code: portcullis unblock " + e.c.Agent + " --challenge " + b.ChallengeID + " --code CODE",
		challenge: b.ChallengeID,
	})
	return true
}

// BlockAgent stops every later call of the agent until a person clears the
// block with the code of the challenge it creates. The code goes to the
// notifier (a human channel) and nowhere else; the returned challenge ID is
// safe to show the agent.
func (g *Gate) BlockAgent(ctx context.Context, agent, reason, decisionID string) (challengeID string, err error) {
	if g.store == nil {
		return "", fmt.Errorf("block agent %q: the gate has no store to keep the block in", agent)
	}
	if agent == "" {
		return "", fmt.Errorf("block agent: missing agent")
	}
	ch, code, err := g.newChallenge(agent, reason)
	if err != nil {
		return "", fmt.Errorf("block agent %q: %w", agent, err)
	}
	if err := g.store.CreateChallenge(ctx, ch); err != nil {
		return "", fmt.Errorf("block agent %q: store challenge: %w", agent, err)
	}
	b := portcullis.Block{Agent: agent, Reason: reason, ChallengeID: ch.ID, DecisionID: decisionID, CreatedAt: ch.CreatedAt}
	if err := g.store.PutBlock(ctx, b); err != nil {
		return "", fmt.Errorf("block agent %q: store block: %w", agent, err)
	}
	g.log.Warn("agent blocked", "severity", "HIGH", "type", "DANGER_ZONE", "agent", agent, "challenge", ch.ID, "decision", decisionID, "reason", reason)
	g.notify(ctx, portcullis.Notice{
		Kind: portcullis.NoticeBlock, Agent: agent, DecisionID: decisionID, ChallengeID: ch.ID,
		Reason: reason, Code: code, ExpiresAt: ch.ExpiresAt,
	})
	return ch.ID, nil
}

// ReissueChallenge replaces the challenge of a blocked agent (the old code
// expired or was lost) and sends the new code to the notifier.
func (g *Gate) ReissueChallenge(ctx context.Context, agent string) (challengeID string, err error) {
	if g.store == nil {
		return "", fmt.Errorf("reissue challenge: the gate has no store")
	}
	b, ok, err := g.store.Block(ctx, agent)
	if err != nil {
		return "", fmt.Errorf("reissue challenge for %q: %w", agent, err)
	}
	if !ok {
		return "", portcullis.Errorf(portcullis.CodeNotFound, "agent %q is not blocked", agent)
	}
	id, err := g.BlockAgent(ctx, agent, b.Reason, b.DecisionID)
	if err != nil {
		return "", err
	}
	if err := g.store.DeleteChallenge(ctx, b.ChallengeID); err != nil {
		return "", fmt.Errorf("reissue challenge for %q: drop old challenge: %w", agent, err)
	}
	return id, nil
}

// Unblock clears the agent's block when code is the code of the block's
// challenge. A wrong code, a challenge of another block, or an expired
// challenge is a failed attempt, logged as a HIGH security event; after 10
// failures in a minute every attempt is refused until the minute passes.
//
// Unblock belongs to human channels only (the CLI, the console); nothing an
// agent can reach may call it.
func (g *Gate) Unblock(ctx context.Context, agent, challengeID, code string) error {
	if g.store == nil {
		return fmt.Errorf("unblock: the gate has no store")
	}
	now := g.clock.Now()
	since := now.Add(-failureWindow)
	n, err := g.store.FailedAttempts(ctx, agent, since)
	if err != nil {
		return fmt.Errorf("unblock %q: %w", agent, err)
	}
	if n >= maxFailures {
		g.log.Warn("unblock refused", "severity", "HIGH", "type", "VERIFICATION_RATE_LIMITED", "agent", agent, "failures", n)
		return portcullis.Errorf(portcullis.CodeRateLimited, "too many failed attempts to unblock %q: wait a minute and try again", agent)
	}
	b, blocked, err := g.store.Block(ctx, agent)
	if err != nil {
		return fmt.Errorf("unblock %q: %w", agent, err)
	}
	if !blocked {
		return portcullis.Errorf(portcullis.CodeNotFound, "agent %q is not blocked", agent)
	}
	fail := func(why string) error {
		if _, err := g.store.AddFailedAttempt(ctx, agent, now, since); err != nil {
			return fmt.Errorf("unblock %q: record failed attempt: %w", agent, err)
		}
		g.log.Warn("verification failed", "severity", "HIGH", "type", "VERIFICATION_FAILED", "agent", agent, "challenge", challengeID, "why", why)
		return portcullis.Errorf(portcullis.CodeVerificationFailed, "unblock %q: %s", agent, why)
	}
	if challengeID != b.ChallengeID {
		return fail("the challenge is not the one of this block")
	}
	ch, err := g.store.Challenge(ctx, challengeID)
	if portcullis.ErrorCode(err) == portcullis.CodeNotFound {
		return fail("no such challenge")
	}
	if err != nil {
		return fmt.Errorf("unblock %q: %w", agent, err)
	}
	if !now.Before(ch.ExpiresAt) {
		return fail("the challenge expired; ask for a new code (portcullis unblock --reissue)")
	}
	ok, err := verifyCode(ch, code)
	if err != nil {
		return fmt.Errorf("unblock %q: %w", agent, err)
	}
	if !ok {
		return fail("wrong code")
	}
	if err := g.store.DeleteBlock(ctx, agent); err != nil {
		return fmt.Errorf("unblock %q: %w", agent, err)
	}
	if err := g.store.DeleteChallenge(ctx, challengeID); err != nil {
		return fmt.Errorf("unblock %q: drop challenge: %w", agent, err)
	}
	g.log.Info("agent unblocked", "agent", agent, "challenge", challengeID)
	return nil
}

// ClearBlock clears a block without a code. It is the administrator's
// override and belongs behind the admin token.
func (g *Gate) ClearBlock(ctx context.Context, agent string) error {
	if g.store == nil {
		return fmt.Errorf("clear block: the gate has no store")
	}
	b, ok, err := g.store.Block(ctx, agent)
	if err != nil {
		return fmt.Errorf("clear block %q: %w", agent, err)
	}
	if !ok {
		return portcullis.Errorf(portcullis.CodeNotFound, "agent %q is not blocked", agent)
	}
	if err := g.store.DeleteBlock(ctx, agent); err != nil {
		return fmt.Errorf("clear block %q: %w", agent, err)
	}
	if err := g.store.DeleteChallenge(ctx, b.ChallengeID); err != nil {
		return fmt.Errorf("clear block %q: drop challenge: %w", agent, err)
	}
	g.log.Warn("agent block cleared by administrator", "severity", "HIGH", "type", "ADMIN_UNBLOCK", "agent", agent)
	return nil
}

func (g *Gate) newChallenge(agent, reason string) (portcullis.Challenge, string, error) {
	code, err := randomCode(g.rand)
	if err != nil {
		return portcullis.Challenge{}, "", err
	}
	salt := make([]byte, 16)
	if _, err := io.ReadFull(g.rand, salt); err != nil {
		return portcullis.Challenge{}, "", fmt.Errorf("challenge salt: %w", err)
	}
	hash, err := hashCode(code, salt)
	if err != nil {
		return portcullis.Challenge{}, "", err
	}
	var idb [15]byte
	if _, err := io.ReadFull(g.rand, idb[:]); err != nil {
		return portcullis.Challenge{}, "", fmt.Errorf("challenge id: %w", err)
	}
	now := g.clock.Now()
	ch := portcullis.Challenge{
		ID:        "chl_" + strings.ToLower(idEncoding.EncodeToString(idb[:])),
		Agent:     agent,
		Salt:      hex.EncodeToString(salt),
		CodeHash:  hash,
		Reason:    reason,
		CreatedAt: now,
		ExpiresAt: now.Add(g.codeLife),
	}
	return ch, code, nil
}

// randomCode draws a code uniformly from the alphabet by rejection sampling.
func randomCode(r io.Reader) (string, error) {
	const limit = 256 - 256%len(codeAlphabet)
	out := make([]byte, 0, codeLength)
	var buf [16]byte
	for len(out) < codeLength {
		if _, err := io.ReadFull(r, buf[:]); err != nil {
			return "", fmt.Errorf("challenge code: %w", err)
		}
		for _, b := range buf {
			if int(b) < limit && len(out) < codeLength {
				out = append(out, codeAlphabet[int(b)%len(codeAlphabet)])
			}
		}
	}
	return string(out), nil
}

func hashCode(code string, salt []byte) (string, error) {
	k, err := pbkdf2.Key(sha256.New, code, salt, codeIterations, 32)
	if err != nil {
		return "", fmt.Errorf("hash code: %w", err)
	}
	return hex.EncodeToString(k), nil
}

// normalizeCode forgives what people mistype: case, spaces, and the letters
// the alphabet leaves out for looking like digits.
func normalizeCode(code string) string {
	code = strings.ToUpper(strings.Join(strings.Fields(code), ""))
	return strings.NewReplacer("O", "0", "I", "1").Replace(code)
}

func verifyCode(ch portcullis.Challenge, code string) (bool, error) {
	salt, err := hex.DecodeString(ch.Salt)
	if err != nil {
		return false, fmt.Errorf("challenge %s: corrupt salt: %w", ch.ID, err)
	}
	want, err := hex.DecodeString(ch.CodeHash)
	if err != nil {
		return false, fmt.Errorf("challenge %s: corrupt hash: %w", ch.ID, err)
	}
	got, err := hashCode(normalizeCode(code), salt)
	if err != nil {
		return false, err
	}
	gotb, err := hex.DecodeString(got)
	if err != nil {
		return false, err
	}
	return subtle.ConstantTimeCompare(gotb, want) == 1, nil
}

func (g *Gate) notify(ctx context.Context, n portcullis.Notice) {
	if g.notifier == nil {
		g.log.Warn("no notifier configured: nobody was told", "kind", n.Kind, "agent", n.Agent, "decision", n.DecisionID)
		return
	}
	if err := g.notifier.Notify(ctx, n); err != nil {
		g.log.Error("notification failed", "kind", n.Kind, "agent", n.Agent, "decision", n.DecisionID, "err", err)
	}
}
