package validator_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/validator"
)

// emailTo is a request for one agent, its arguments varied by to.
func emailTo(agent, to string) portcullis.ValidationRequest {
	return portcullis.ValidationRequest{Tool: "send_email", Summary: "send to " + to, Args: map[string]any{"to": to}, Agent: agent}
}

// TestBudgetRate: trivially varied retries are new model calls; past the
// agent's rate they are denied fail-closed without asking the model, with
// a reason the agent can act on. Other agents and cached verdicts are not
// affected, and the budget refills with time.
func TestBudgetRate(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	m := answering(denyJSON)
	v := newValidator(t, m, validator.Config{Clock: clock, CacheTTL: time.Hour, Budget: validator.Budget{PerMinute: 2, Burst: 2}})
	for _, to := range []string{"a@x.com", "a@x.com ", " a@x.com"} {
		vd := validate(t, v, emailTo("bot", to))
		if to == " a@x.com" {
			if vd.Allow || !vd.FailClosed || !vd.OverBudget || !strings.Contains(vd.Reasoning, `budget for agent "bot" is spent: at most 2 calls a minute; wait a minute`) {
				t.Fatalf("third call in a minute = %+v; want a fail-closed deny over budget telling the agent to wait", vd)
			}
			continue
		}
		if vd.FailClosed || vd.OverBudget {
			t.Fatalf("call %q within the budget = %+v; want the model's deny", to, vd)
		}
	}
	if n := m.calls.Load(); n != 2 {
		t.Fatalf("the model was asked %d times; want 2 (the third call was over budget)", n)
	}
	// A cached verdict costs nothing; another agent has its own budget.
	if vd := validate(t, v, emailTo("bot", "a@x.com")); !vd.Cached || vd.OverBudget {
		t.Errorf("cached call over budget = %+v; want the cached verdict", vd)
	}
	if vd := validate(t, v, emailTo("other", "b@x.com")); vd.OverBudget {
		t.Errorf("another agent's call = %+v; want it judged", vd)
	}
	// The rate refills: one call every 30 seconds.
	clock.Advance(30 * time.Second)
	if vd := validate(t, v, emailTo("bot", "c@x.com")); vd.OverBudget {
		t.Errorf("call after 30s = %+v; want it judged", vd)
	}
	if vd := validate(t, v, emailTo("bot", "d@x.com")); !vd.OverBudget {
		t.Errorf("second call after 30s = %+v; want it over budget", vd)
	}
}

// TestBudgetConcurrency: an agent cannot have more model calls in flight
// than its budget allows.
func TestBudgetConcurrency(t *testing.T) {
	release := make(chan struct{})
	asked := make(chan struct{}, 4)
	m := &fakeModel{ask: func(ctx context.Context, _ portcullis.ModelPrompt) (portcullis.ModelAnswer, error) {
		asked <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return portcullis.ModelAnswer{Text: denyJSON}, nil
	}}
	v := newValidator(t, m, validator.Config{Budget: validator.Budget{PerMinute: -1, Concurrent: 1}})
	done := make(chan portcullis.Verdict)
	go func() {
		vd, _ := v.Validate(context.Background(), emailTo("bot", "a@x.com"))
		done <- vd
	}()
	<-asked
	vd := validate(t, v, emailTo("bot", "b@x.com"))
	if !vd.OverBudget || !vd.FailClosed || !strings.Contains(vd.Reasoning, "at most 1 at once") {
		t.Fatalf("second call in flight = %+v; want over budget", vd)
	}
	close(release)
	if vd := <-done; vd.FailClosed {
		t.Fatalf("first call = %+v; want the model's deny", vd)
	}
	if vd := validate(t, v, emailTo("bot", "b@x.com")); vd.OverBudget {
		t.Fatalf("call after the first answered = %+v; want it judged", vd)
	}
}
