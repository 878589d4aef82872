package portcullis

import (
	"context"
	"time"
)

// DecisionObserver is told of every decision the gate makes, after the
// decision is final (and, with a store, after its audit row is written).
// Metrics, traces and decision logs implement it; the gate calls it only
// when one is configured (gate.WithObserver), so a gate without one pays
// nothing.
//
// ObserveDecision runs on the decision's goroutine, before Decide returns:
// it must be quick, must not block, and must not keep ev or anything it
// points to after it returns (the gate reuses them). It cannot change the
// decision.
type DecisionObserver interface {
	ObserveDecision(ctx context.Context, ev *DecisionEvent)
}

// DecisionEvent is what an observer learns of one decision.
type DecisionEvent struct {
	// Decision is the final decision, with its trace and DecisionID.
	Decision *Decision
	// Call is the request as the gate received it. Its arguments are not
	// redacted: an observer must not record them.
	Call *Call
	// PolicyHash names the policy version that decided.
	PolicyHash string
	// PolicyTool is true when the decision's tool has a tools entry in the
	// policy; observers that label by tool use it to bound the labels to
	// the policy's tools.
	PolicyTool bool
	// Explain is true for Gate.Explain: nothing was changed or recorded.
	Explain bool
	// Start is when the decision began; Duration is how long the whole
	// pipeline took, audit included.
	Start    time.Time
	Duration time.Duration
	// Stages are the stages that ran, in order, with how long each took;
	// they follow one another without gaps from Start.
	Stages []StageTiming
	// Validator is the validator's call, when one was made.
	Validator *ValidatorRecord
	// Err is Decide's error (an invalid request), if any.
	Err error
}

// DecidingStage returns the stage whose trace entry decided, or "" when
// none is marked (a request rejected before the pipeline ran).
func (ev *DecisionEvent) DecidingStage() string {
	if ev.Decision == nil {
		return ""
	}
	for i := len(ev.Decision.Trace) - 1; i >= 0; i-- {
		if ev.Decision.Trace[i].Decided {
			return ev.Decision.Trace[i].Stage
		}
	}
	return ""
}

// StageTiming is how long one stage of the pipeline took.
type StageTiming struct {
	// Stage is the stage's name, as in the trace: mode, danger_zone,
	// route, elements, autonomy, validator, confirmation, retry_guard,
	// audit (request, when the request was rejected before the pipeline).
	Stage    string
	Duration time.Duration
}
