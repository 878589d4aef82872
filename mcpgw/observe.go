package mcpgw

import (
	"context"
	"time"
)

// Observer is told of the gateway's own events, for metrics and traces
// (decisions themselves are observed at the gate). Its methods run on the
// gateway's goroutines: they must be quick and must not block.
type Observer interface {
	// StartCall is called when a tools/call arrives, before it is
	// decided. The context it returns carries the call through its
	// decision and its forwarding (a trace span, say); end is called once
	// with how the call was answered: "forwarded", "denied", "held",
	// "refused" (malformed) or "error" (err set).
	StartCall(ctx context.Context, tool, session, agent string) (_ context.Context, end func(result string, err error))
	// UpstreamCall reports one call forwarded to an upstream: how long it
	// took, whether the tool answered with an error result, and err when
	// the call itself failed (transport, protocol, timeout, upstream
	// down).
	UpstreamCall(ctx context.Context, upstream, tool string, took time.Duration, isError bool, err error)
	// UpstreamRestart reports that an upstream's session ended and the
	// gateway is restarting it.
	UpstreamRestart(upstream string, err error)
	// ApprovalWait reports how long a held call waited for a person and
	// how the wait ended: "approved", "denied", "expired", "timeout",
	// "cancelled" or "error".
	ApprovalWait(tool, result string, waited time.Duration)
}

// Observers tells several observers of the gateway's events, in order
// (and ends calls in the reverse order).
type Observers []Observer

func (obs Observers) StartCall(ctx context.Context, tool, session, agent string) (context.Context, func(string, error)) {
	ends := make([]func(string, error), len(obs))
	for i, o := range obs {
		ctx, ends[i] = o.StartCall(ctx, tool, session, agent)
	}
	return ctx, func(result string, err error) {
		for i := len(ends) - 1; i >= 0; i-- {
			ends[i](result, err)
		}
	}
}

func (obs Observers) UpstreamCall(ctx context.Context, upstream, tool string, took time.Duration, isError bool, err error) {
	for _, o := range obs {
		o.UpstreamCall(ctx, upstream, tool, took, isError, err)
	}
}

func (obs Observers) UpstreamRestart(upstream string, err error) {
	for _, o := range obs {
		o.UpstreamRestart(upstream, err)
	}
}

// UpstreamFrameSkipped tells each observer that is a FrameObserver.
func (obs Observers) UpstreamFrameSkipped(upstream, reason string) {
	for _, o := range obs {
		if fo, ok := o.(FrameObserver); ok {
			fo.UpstreamFrameSkipped(upstream, reason)
		}
	}
}

func (obs Observers) ApprovalWait(tool, result string, waited time.Duration) {
	for _, o := range obs {
		o.ApprovalWait(tool, result, waited)
	}
}

// nopObserver is the Observer of a gateway configured without one.
type nopObserver struct{}

func (nopObserver) StartCall(ctx context.Context, _, _, _ string) (context.Context, func(string, error)) {
	return ctx, func(string, error) {}
}
func (nopObserver) UpstreamCall(context.Context, string, string, time.Duration, bool, error) {}
func (nopObserver) UpstreamRestart(string, error)                                            {}
func (nopObserver) ApprovalWait(string, string, time.Duration)                               {}
