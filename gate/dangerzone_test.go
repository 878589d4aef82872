package gate_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/internal/noticetest"
	"github.com/portcullis/portcullis/memstore"
)

type dzFixture struct {
	g     *gate.Gate
	st    *memstore.Store
	clock *fakeClock
	human *noticetest.Recorder
}

func newDZ(t *testing.T) dzFixture {
	clock := newClock()
	st := memstore.New(clock)
	human := &noticetest.Recorder{}
	g := mustGate(t, grantsPolicy, gate.WithStore(st), gate.WithClock(clock), gate.WithNotifier(human))
	return dzFixture{g, st, clock, human}
}

func TestBlockedAgentIsStopped(t *testing.T) {
	ctx := context.Background()
	f := newDZ(t)
	id, err := f.g.BlockAgent(ctx, "deploy-bot", "risk 95 past the danger threshold", "d1")
	if err != nil {
		t.Fatal(err)
	}
	n := f.human.Last(t, "")
	if n.Kind != portcullis.NoticeBlock || n.ChallengeID != id || n.Agent != "deploy-bot" {
		t.Fatalf("notice = %+v; want a block notice for deploy-bot with challenge %s", n, id)
	}
	if len(n.Code) != 6 || strings.Trim(n.Code, "0123456789ABCDEFGHJKLMNPQRSTUVWXYZ") != "" {
		t.Fatalf("code %q is not 6 characters of 0-9A-Z without I and O", n.Code)
	}
	for _, tool := range []string{"list_elements", "verify_challenge", "unknown"} {
		d := decide(t, f.g, portcullis.Call{Tool: tool, Agent: "deploy-bot"})
		if d.Tool != tool {
			t.Errorf("stopped decision names tool %q; want %q", d.Tool, tool)
		}
		if d.Outcome != portcullis.OutcomeStop || d.Code != portcullis.CodeDangerZone || d.Source != portcullis.SourceDangerZone || d.ChallengeID != id {
			t.Fatalf("Decide(%s by blocked agent) = %s/%s/%s challenge %q; want stop/DANGER_ZONE/danger_zone with %s", tool, d.Outcome, d.Code, d.Source, d.ChallengeID, id)
		}
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), n.Code) {
			t.Fatalf("the verification code %s reached the decision: %s", n.Code, b)
		}
	}
	if d := decide(t, f.g, portcullis.Call{Tool: "list_elements", Agent: "other-bot"}); d.Outcome != portcullis.OutcomeAllow {
		t.Fatalf("Decide(other agent) = %s; want allow", d.Outcome)
	}
	// The block is in the store, so a new gate on the same store (a restart)
	// still stops the agent.
	g2 := mustGate(t, grantsPolicy, gate.WithStore(f.st))
	if d := decide(t, g2, portcullis.Call{Tool: "list_elements", Agent: "deploy-bot"}); d.Outcome != portcullis.OutcomeStop {
		t.Fatalf("Decide after restart = %s; want stop", d.Outcome)
	}
}

func TestUnblock(t *testing.T) {
	ctx := context.Background()
	f := newDZ(t)
	id, err := f.g.BlockAgent(ctx, "bot", "stop", "d1")
	if err != nil {
		t.Fatal(err)
	}
	code := f.human.Last(t, "").Code
	wrong := "ZZZZZZ"
	if code == wrong {
		wrong = "YYYYYY"
	}
	if err := f.g.Unblock(ctx, "bot", id, wrong); portcullis.ErrorCode(err) != portcullis.CodeVerificationFailed {
		t.Fatalf("Unblock(wrong code) = %v; want VERIFICATION_FAILED", err)
	}
	if err := f.g.Unblock(ctx, "bot", "chl_other", code); portcullis.ErrorCode(err) != portcullis.CodeVerificationFailed {
		t.Fatalf("Unblock(other challenge) = %v; want VERIFICATION_FAILED", err)
	}
	if d := decide(t, f.g, portcullis.Call{Tool: "list_elements", Agent: "bot"}); d.Outcome != portcullis.OutcomeStop {
		t.Fatalf("after failed unblocks: %s; want still stopped", d.Outcome)
	}
	// People mistype case and spaces; that is forgiven.
	if err := f.g.Unblock(ctx, "bot", id, " "+strings.ToLower(code[:3])+" "+code[3:]); err != nil {
		t.Fatalf("Unblock(right code) = %v", err)
	}
	if d := decide(t, f.g, portcullis.Call{Tool: "list_elements", Agent: "bot"}); d.Outcome != portcullis.OutcomeAllow {
		t.Fatalf("after unblock: %s; want allow", d.Outcome)
	}
	if err := f.g.Unblock(ctx, "bot", id, code); portcullis.ErrorCode(err) != portcullis.CodeNotFound {
		t.Fatalf("second Unblock = %v; want NOT_FOUND (not blocked)", err)
	}
	if _, err := f.st.Challenge(ctx, id); portcullis.ErrorCode(err) != portcullis.CodeNotFound {
		t.Fatalf("challenge after unblock: %v; want it deleted", err)
	}
}

func TestUnblockRateLimit(t *testing.T) {
	ctx := context.Background()
	f := newDZ(t)
	id, err := f.g.BlockAgent(ctx, "bot", "stop", "d1")
	if err != nil {
		t.Fatal(err)
	}
	code := f.human.Last(t, "").Code
	for i := range 10 {
		if err := f.g.Unblock(ctx, "bot", "chl_guess", "AAAAAA"); portcullis.ErrorCode(err) != portcullis.CodeVerificationFailed {
			t.Fatalf("attempt %d = %v; want VERIFICATION_FAILED", i+1, err)
		}
	}
	if err := f.g.Unblock(ctx, "bot", id, code); portcullis.ErrorCode(err) != portcullis.CodeRateLimited {
		t.Fatalf("11th attempt, right code = %v; want RATE_LIMITED", err)
	}
	f.clock.Advance(time.Minute + time.Second)
	if err := f.g.Unblock(ctx, "bot", id, code); err != nil {
		t.Fatalf("after a minute, right code = %v; want success", err)
	}
}

func TestChallengeExpiresAndIsReissued(t *testing.T) {
	ctx := context.Background()
	f := newDZ(t)
	id, err := f.g.BlockAgent(ctx, "bot", "stop", "d1")
	if err != nil {
		t.Fatal(err)
	}
	code := f.human.Last(t, "").Code
	f.clock.Advance(5 * time.Minute)
	if err := f.g.Unblock(ctx, "bot", id, code); portcullis.ErrorCode(err) != portcullis.CodeVerificationFailed || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("Unblock(expired) = %v; want VERIFICATION_FAILED saying expired", err)
	}
	id2, err := f.g.ReissueChallenge(ctx, "bot")
	if err != nil {
		t.Fatal(err)
	}
	code2 := f.human.Last(t, "").Code
	if id2 == id {
		t.Fatal("reissued challenge has the old id")
	}
	if d := decide(t, f.g, portcullis.Call{Tool: "list_elements", Agent: "bot"}); d.ChallengeID != id2 {
		t.Fatalf("stop names challenge %q; want the new %q", d.ChallengeID, id2)
	}
	if err := f.g.Unblock(ctx, "bot", id2, code2); err != nil {
		t.Fatalf("Unblock(new code) = %v", err)
	}
}

func TestClearBlock(t *testing.T) {
	ctx := context.Background()
	f := newDZ(t)
	if _, err := f.g.BlockAgent(ctx, "bot", "stop", "d1"); err != nil {
		t.Fatal(err)
	}
	if err := f.g.ClearBlock(ctx, "bot"); err != nil {
		t.Fatal(err)
	}
	if d := decide(t, f.g, portcullis.Call{Tool: "list_elements", Agent: "bot"}); d.Outcome != portcullis.OutcomeAllow {
		t.Fatalf("after ClearBlock: %s; want allow", d.Outcome)
	}
	if err := f.g.ClearBlock(ctx, "bot"); portcullis.ErrorCode(err) != portcullis.CodeNotFound {
		t.Fatalf("ClearBlock(not blocked) = %v; want NOT_FOUND", err)
	}
}

func TestUnreadableBlocksStopEveryAgent(t *testing.T) {
	g := mustGate(t, grantsPolicy, gate.WithStore(brokenStore{}))
	d := decide(t, g, portcullis.Call{Tool: "list_elements", Agent: "bot"})
	if d.Outcome != portcullis.OutcomeStop || d.Code != portcullis.CodeDangerZone || !d.FailClosed {
		t.Fatalf("Decide with unreadable blocks = %s/%s failClosed=%v; want stop/DANGER_ZONE fail-closed", d.Outcome, d.Code, d.FailClosed)
	}
}
