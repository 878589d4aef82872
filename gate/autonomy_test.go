package gate_test

import (
	"context"
	"testing"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/internal/noticetest"
	"github.com/portcullis/portcullis/memstore"
)

const autonomyPolicy = `
version: 1
tools:
  list_elements: {endpoint: READ}
  Bash: {endpoint: EXECUTE, shellArg: command}
elements:
  - name: bot
    type: agent
    autonomy: {riskTolerance: aggressive, maxAutonomousSteps: 3}
`

func TestRunStateIsKeptInTheStore(t *testing.T) {
	ctx := context.Background()
	st := memstore.New(nil)
	g := mustGate(t, autonomyPolicy, gate.WithStore(st))
	call := portcullis.Call{Tool: "list_elements", Agent: "bot", Run: &portcullis.Run{ID: "r1"}}
	for i := range 3 {
		if d := decide(t, g, call); d.Outcome != portcullis.OutcomeAllow {
			t.Fatalf("step %d = %s (%s); want allow within the budget of 3", i, d.Outcome, d.Reason)
		}
	}
	if d := decide(t, g, call); d.Outcome != portcullis.OutcomeConfirm || d.Code != portcullis.CodeAutonomyPause {
		t.Fatalf("step 3 = %s/%s; want the step budget to pause the run", d.Outcome, d.Code)
	}
	// Another run has its own budget; a failed step pauses it.
	call.Run = &portcullis.Run{ID: "r2"}
	if d := decide(t, g, call); d.Outcome != portcullis.OutcomeAllow {
		t.Fatalf("r2 step 0 = %s; want allow", d.Outcome)
	}
	if err := g.RecordOutcome(ctx, "r2", portcullis.StepFailure); err != nil {
		t.Fatal(err)
	}
	if d := decide(t, g, call); d.Code != portcullis.CodeAutonomyPause {
		t.Fatalf("after a failed step = %s/%s; want AUTONOMY_PAUSE", d.Outcome, d.Code)
	}
	// Explain does not count a step.
	st2 := memstore.New(nil)
	g2 := mustGate(t, autonomyPolicy, gate.WithStore(st2))
	for range 5 {
		if _, err := g2.Explain(ctx, portcullis.Call{Tool: "list_elements", Agent: "bot", Run: &portcullis.Run{ID: "r"}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok, _ := st2.RunState(ctx, "r"); ok {
		t.Fatal("Explain recorded a step")
	}
}

func TestDangerZoneStopBlocksTheAgent(t *testing.T) {
	ctx := context.Background()
	st := memstore.New(nil)
	human := &noticetest.Recorder{}
	g := mustGate(t, autonomyPolicy, gate.WithStore(st), gate.WithNotifier(human))
	// Explain shows the stop but writes no block.
	stop := portcullis.Call{Tool: "Bash", Agent: "bot", Args: map[string]any{"command": "rm -rf /"}, Run: &portcullis.Run{ID: "r1"}}
	if d, err := g.Explain(ctx, stop); err != nil || d.Outcome != portcullis.OutcomeStop {
		t.Fatalf("Explain = %s, %v; want stop", d.Outcome, err)
	}
	if bs, _ := st.Blocks(ctx); len(bs) != 0 {
		t.Fatalf("Explain wrote blocks: %+v", bs)
	}
	d := decide(t, g, stop)
	if d.Outcome != portcullis.OutcomeStop || d.Code != portcullis.CodeDangerZone || d.Source != portcullis.SourceAutonomy || d.ChallengeID == "" {
		t.Fatalf("Decide = %s/%s/%s challenge %q; want a stop with a challenge", d.Outcome, d.Code, d.Source, d.ChallengeID)
	}
	n := human.Last(t, "")
	if n.ChallengeID != d.ChallengeID || n.Code == "" {
		t.Fatalf("notice = %+v; want the code for challenge %s", n, d.ChallengeID)
	}
	// Every later call of the agent is stopped, run or not.
	later := decide(t, g, portcullis.Call{Tool: "list_elements", Agent: "bot"})
	if later.Outcome != portcullis.OutcomeStop || later.Source != portcullis.SourceDangerZone || later.ChallengeID != d.ChallengeID {
		t.Fatalf("later call = %s/%s challenge %q; want stopped by the danger zone", later.Outcome, later.Source, later.ChallengeID)
	}
	if err := g.Unblock(ctx, "bot", d.ChallengeID, n.Code); err != nil {
		t.Fatal(err)
	}
	if d := decide(t, g, portcullis.Call{Tool: "list_elements", Agent: "bot"}); d.Outcome != portcullis.OutcomeAllow {
		t.Fatalf("after unblock = %s; want allow", d.Outcome)
	}
}
