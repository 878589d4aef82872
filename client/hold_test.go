package client_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
)

// TestHold: a call held through the gateway stands as the gateway decides
// it again once a person answers; while nobody answers it stays the
// confirm it was.
func TestHold(t *testing.T) {
	ctx := context.Background()
	agent, person, _, _ := gateway(t)
	call := portcullis.Call{Tool: "delete_element", Session: "s1", Args: map[string]any{"name": "notes"}}
	d, err := agent.Decide(ctx, call)
	if err != nil || d.Outcome != portcullis.OutcomeConfirm {
		t.Fatalf("Decide(delete_element) = %s, %v; want confirm", d.Outcome, err)
	}

	// Nobody answers before the context's deadline.
	short, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	got, err := agent.Hold(short, call, d)
	cancel()
	if err != nil || got.DecisionID != d.DecisionID || got.Outcome != portcullis.OutcomeConfirm {
		t.Fatalf("Hold with nobody answering = %s %s, %v; want the same confirm", got.DecisionID, got.Outcome, err)
	}

	// Denied while held: the person's reason stands.
	held := make(chan portcullis.Decision, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		d2, err := agent.Hold(wctx, call, d)
		if err != nil {
			t.Error(err)
		}
		held <- d2
	}()
	if _, err := person.Deny(ctx, d.ChallengeID, "not today"); err != nil {
		t.Fatal(err)
	}
	if d2 := <-held; d2.Outcome != portcullis.OutcomeDeny || !strings.Contains(d2.Reason, "not today") {
		t.Errorf("Hold after a denial = %s %q; want deny with the reason", d2.Outcome, d2.Reason)
	}
}
