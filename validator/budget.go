package validator

import (
	"fmt"
	"strconv"
	"time"

	"golang.org/x/time/rate"
)

// Budget bounds the model calls the validator makes for one agent (the
// request's Agent; requests without one share a budget). A verdict from the
// cache, or a share in an identical request's call, costs nothing. The zero
// value of each field is its default; a negative value lifts that bound.
type Budget struct {
	// PerMinute is the sustained rate of model calls. Default 30.
	PerMinute int
	// Burst is how many calls may be made at once above the rate.
	// Default 10.
	Burst int
	// Concurrent is how many of the agent's model calls may be in flight
	// at once. Default 4.
	Concurrent int
}

// The defaults of Budget.
const (
	DefaultPerMinute  = 30
	DefaultBurst      = 10
	DefaultConcurrent = 4
)

// maxBudgets bounds the agents whose budgets are kept; past it the budgets
// of idle agents (no call in flight, tokens refilled) are dropped.
const maxBudgets = 4096

func (b Budget) withDefaults() Budget {
	if b.PerMinute == 0 {
		b.PerMinute = DefaultPerMinute
	}
	if b.Burst == 0 {
		b.Burst = DefaultBurst
	}
	if b.Concurrent == 0 {
		b.Concurrent = DefaultConcurrent
	}
	return b
}

// agentBudget is one agent's spending. Guarded by Validator.mu.
type agentBudget struct {
	limiter  *rate.Limiter // nil: no rate bound
	inFlight int
}

// spend takes one model call from agent's budget at now, or says in words
// the agent can act on why it cannot. v.mu is held.
func (v *Validator) spend(agent string, now time.Time) (string, bool) {
	b := v.cfg.Budget
	ab := v.budgets[agent]
	if ab == nil {
		if len(v.budgets) >= maxBudgets {
			v.pruneBudgets(now)
		}
		ab = &agentBudget{}
		if b.PerMinute > 0 {
			ab.limiter = rate.NewLimiter(rate.Limit(float64(b.PerMinute)/60), max(b.Burst, 1))
		}
		v.budgets[agent] = ab
	}
	who := "this agent"
	if agent != "" {
		who = "agent " + strconv.Quote(agent)
	}
	if b.Concurrent > 0 && ab.inFlight >= b.Concurrent {
		return fmt.Sprintf("the validator's budget for %s is spent: %d of its calls are already being judged (at most %d at once); wait for their answers before trying again", who, ab.inFlight, b.Concurrent), false
	}
	if ab.limiter != nil && !ab.limiter.AllowN(now, 1) {
		return fmt.Sprintf("the validator's budget for %s is spent: at most %d calls a minute; wait a minute before trying again, and do not retry the same call", who, b.PerMinute), false
	}
	ab.inFlight++
	return "", true
}

// refund gives back agent's call in flight. v.mu is held.
func (v *Validator) refund(agent string) {
	if ab := v.budgets[agent]; ab != nil && ab.inFlight > 0 {
		ab.inFlight--
	}
}

// pruneBudgets drops the budgets of idle agents. v.mu is held.
func (v *Validator) pruneBudgets(now time.Time) {
	for a, ab := range v.budgets {
		if ab.inFlight == 0 && (ab.limiter == nil || ab.limiter.TokensAt(now) >= float64(ab.limiter.Burst())) {
			delete(v.budgets, a)
		}
	}
}
