package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/mcpgw"
	"github.com/portcullis/portcullis/tracing"
)

// NewLogger returns a long-running command's logger, at info level, in
// format: text ("" too) or json.
func NewLogger(w io.Writer, format string) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: slog.LevelInfo}
	switch format {
	case "", "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("log format %q: want text or json", format)
}

// Observability is what a long-running gateway gives operators besides
// its metrics: traces, when Tracer is set, and one log line per decision.
type Observability struct {
	Log    *slog.Logger
	Tracer *tracing.Tracer
}

// GateOptions are the gate's observers: the decision log, and the traces
// when they are on.
func (o Observability) GateOptions() []gate.Option {
	opts := []gate.Option{gate.WithObserver(DecisionLogger{o.Log})}
	if o.Tracer != nil {
		opts = append(opts, gate.WithObserver(o.Tracer))
	}
	return opts
}

// GatewayObservers are the MCP gateway's observers: the traces, when they
// are on.
func (o Observability) GatewayObservers() []mcpgw.Observer {
	if o.Tracer == nil {
		return nil
	}
	return []mcpgw.Observer{o.Tracer}
}

// DecisionLogger writes one info line per decision, with the decision id
// that the audit row, the trace and the console show too. It never logs
// the call's arguments, nor an explanation.
type DecisionLogger struct{ Log *slog.Logger }

// ObserveDecision logs the decision of ev.
func (l DecisionLogger) ObserveDecision(ctx context.Context, ev *portcullis.DecisionEvent) {
	if ev.Explain || ev.Decision == nil {
		return
	}
	d, c := ev.Decision, ev.Call
	l.Log.LogAttrs(ctx, slog.LevelInfo, "decision",
		slog.String("decisionId", d.DecisionID),
		slog.String("tool", d.Tool),
		slog.String("agent", c.Agent),
		slog.String("session", c.Session),
		slog.String("outcome", string(d.Outcome)),
		slog.String("permissionLevel", d.PermissionLevel.String()),
		slog.String("code", string(d.Code)),
		slog.String("stage", ev.DecidingStage()),
		slog.Bool("failClosed", d.FailClosed),
		slog.Duration("latency", ev.Duration),
		slog.String("policy", ev.PolicyHash),
	)
}
