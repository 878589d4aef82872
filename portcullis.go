// Package portcullis is the vocabulary of the Portcullis permission gateway:
// the decision request (Call), the decision (Decision), permission levels,
// outcomes, error codes, the policy model, and the small interfaces the
// decision engine consumes (Store, Clock, Decider).
//
// It imports only the standard library and holds no behaviour beyond parsing,
// formatting and comparing its own values. The engine lives in package gate,
// policy files are read by package policy, and adapters (stores, the MCP
// gateway, the HTTP API) live in packages of their own.
package portcullis

import (
	"context"
	"time"
)

// Decider decides one call. The gate implements it; the edges (CLI, HTTP API,
// MCP gateway, hooks, policy tests) consume it.
//
// Decide returns a Decision that is always safe to act on: when it cannot
// decide (store failure, panic in a stage) the Decision is a DENY with
// FailClosed set. The error is non-nil only for a request that is itself
// invalid (code INVALID_REQUEST); the Decision is then a fail-closed DENY too.
type Decider interface {
	Decide(ctx context.Context, c Call) (Decision, error)
}

// Clock tells the time. The gate and the stores take one so tests control
// expiry.
type Clock interface {
	Now() time.Time
}

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }
