package main

import (
	"context"
	"io"
	"log/slog"

	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/mcpgw"
	"github.com/portcullis/portcullis/server"
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
	log, err := server.NewLogger(w, o.logFormat)
	if err != nil {
		return nil, usageError("--log-format %q: want text or json", o.logFormat)
	}
	return log, nil
}

// observability is what a long-running command gives operators
// (server.Observability): traces and one log line per decision.
type observability struct {
	tracer *tracing.Tracer // nil: tracing is off
	log    *slog.Logger
}

// startTracing turns traces on when the OTEL_* variables ask for them
// (tracing.Start). The returned function flushes the spans not yet sent;
// call it before exiting.
func (o *observability) startTracing(ctx context.Context) (func(), error) {
	tr, flush, err := tracing.Start(ctx, moduleVersion(), o.log)
	o.tracer = tr
	return flush, err
}

func (o *observability) server() server.Observability {
	return server.Observability{Log: o.log, Tracer: o.tracer}
}

func (o *observability) gateOptions() []gate.Option         { return o.server().GateOptions() }
func (o *observability) gatewayObservers() []mcpgw.Observer { return o.server().GatewayObservers() }
