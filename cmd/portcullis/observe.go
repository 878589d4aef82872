package main

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/mcpgw"
	"github.com/portcullis/portcullis/metrics"
	"github.com/portcullis/portcullis/tracing"

	"github.com/spf13/pflag"
)

// obsFlags are the observability flags of serve and mcp.
type obsFlags struct {
	logFormat   string
	metricsAddr string // mcp only
}

func (o *obsFlags) register(fs *pflag.FlagSet, metricsAddr bool) {
	fs.StringVar(&o.logFormat, "log-format", "text", "log `format`: text or json")
	if metricsAddr {
		fs.StringVar(&o.metricsAddr, "metrics-addr", "", "serve Prometheus metrics on this `address` (e.g. 127.0.0.1:9464), with the token in metrics.token of the state directory")
	}
}

// logger returns the process's logger in the chosen format, at info level.
func (o *obsFlags) logger(w io.Writer) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: slog.LevelInfo}
	switch o.logFormat {
	case "", "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usageError("--log-format %q: want text or json", o.logFormat)
}

// observability is what a long-running command gives operators: metrics,
// traces and one log line per decision.
type observability struct {
	metrics *metrics.Metrics
	tracer  *tracing.Tracer // nil: tracing is off
	log     *slog.Logger
}

// startTracing turns traces on when the OTEL_* variables ask for them
// (tracing.FromEnv). The returned function flushes the spans not yet sent;
// call it before exiting.
func (o *observability) startTracing(ctx context.Context) (func(), error) {
	tr, shutdown, err := tracing.FromEnv(ctx, moduleVersion())
	if err != nil {
		return nil, err
	}
	if tr == nil {
		return func() {}, nil
	}
	o.tracer = tr
	o.log.Info("tracing on: spans are exported with OTLP")
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := shutdown(sctx); err != nil {
			o.log.Warn("flush traces", "err", err)
		}
	}, nil
}

// gateOptions are the gate's observers: the decision log, the metrics and
// the traces.
func (o *observability) gateOptions() []gate.Option {
	opts := []gate.Option{gate.WithObserver(decisionLogger{o.log})}
	if o.metrics != nil {
		opts = append(opts, gate.WithObserver(o.metrics))
	}
	if o.tracer != nil {
		opts = append(opts, gate.WithObserver(o.tracer))
	}
	return opts
}

// gatewayObservers are the MCP gateway's observers: the traces and the
// metrics, those that are on.
func (o *observability) gatewayObservers() []mcpgw.Observer {
	var obs []mcpgw.Observer
	if o.tracer != nil {
		obs = append(obs, o.tracer)
	}
	if o.metrics != nil {
		obs = append(obs, o.metrics)
	}
	return obs
}

// gatewayObserver is the MCP gateway's observer (nil when there is
// nothing to tell).
func (o *observability) gatewayObserver() mcpgw.Observer {
	obs := o.gatewayObservers()
	if len(obs) == 0 {
		return nil
	}
	return mcpgw.Observers(obs)
}

// store returns st with its operations measured, when there are metrics.
func (o *observability) store(st portcullis.Store) portcullis.Store {
	if o.metrics == nil {
		return st
	}
	return o.metrics.Store(st)
}

// decisionLogger writes one info line per decision, with the decision id that
// the audit row, the trace and the console show too. It never logs the
// call's arguments.
type decisionLogger struct{ log *slog.Logger }

func (l decisionLogger) ObserveDecision(ctx context.Context, ev *portcullis.DecisionEvent) {
	if ev.Explain || ev.Decision == nil {
		return
	}
	d, c := ev.Decision, ev.Call
	l.log.LogAttrs(ctx, slog.LevelInfo, "decision",
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
