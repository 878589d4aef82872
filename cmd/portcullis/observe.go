package main

import (
	"context"
	"crypto/subtle"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/internal/guard"
	"github.com/portcullis/portcullis/mcpgw"
	"github.com/portcullis/portcullis/metrics"
	"github.com/portcullis/portcullis/tracing"
)

// obsFlags are the observability flags of serve and mcp.
type obsFlags struct {
	logFormat   string
	metricsAddr string // mcp only
}

func (o *obsFlags) register(fs *flag.FlagSet, metricsAddr bool) {
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

// gatewayObserver is the MCP gateway's observer (nil when there is
// nothing to tell).
func (o *observability) gatewayObserver() mcpgw.Observer {
	var obs gatewayObservers
	if o.tracer != nil {
		obs = append(obs, o.tracer)
	}
	if o.metrics != nil {
		obs = append(obs, o.metrics)
	}
	if len(obs) == 0 {
		return nil
	}
	return obs
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

// gatewayObservers tells several observers of the MCP gateway's events.
type gatewayObservers []mcpgw.Observer

func (os gatewayObservers) StartCall(ctx context.Context, tool, session, agent string) (context.Context, func(string, error)) {
	ends := make([]func(string, error), len(os))
	for i, o := range os {
		ctx, ends[i] = o.StartCall(ctx, tool, session, agent)
	}
	return ctx, func(result string, err error) {
		for i := len(ends) - 1; i >= 0; i-- {
			ends[i](result, err)
		}
	}
}

func (os gatewayObservers) UpstreamCall(ctx context.Context, upstream, tool string, took time.Duration, isError bool, err error) {
	for _, o := range os {
		o.UpstreamCall(ctx, upstream, tool, took, isError, err)
	}
}

func (os gatewayObservers) UpstreamRestart(upstream string, err error) {
	for _, o := range os {
		o.UpstreamRestart(upstream, err)
	}
}

func (os gatewayObservers) UpstreamFrameSkipped(upstream, reason string) {
	for _, o := range os {
		if fo, ok := o.(mcpgw.FrameObserver); ok {
			fo.UpstreamFrameSkipped(upstream, reason)
		}
	}
}

func (os gatewayObservers) ApprovalWait(tool, result string, waited time.Duration) {
	for _, o := range os {
		o.ApprovalWait(tool, result, waited)
	}
}

// metricsHandler serves the metrics to a scraper that sends the metrics
// token as a bearer token (compared in constant time). The metrics name the
// policy's tools, upstreams and how often calls are denied: they are not
// for anyone who can reach the port. The token is its own, not the
// people's: a scraper holding it can read metrics and do nothing else.
func metricsHandler(m *metrics.Metrics, token string) http.Handler {
	h := m.Handler()
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if token == "" || subtle.ConstantTimeCompare(got, want) != 1 {
			guard.CloseAfter(w)
			w.Header().Set("WWW-Authenticate", `Bearer realm="portcullis metrics"`)
			http.Error(w, "send the metrics token (metrics.token in the state directory) as Authorization: Bearer <token>", http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "GET only", http.StatusMethodNotAllowed)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// serveMetrics serves /metrics on addr until ctx ends (mcp --metrics-addr).
// It returns once the address is listening.
func serveMetrics(ctx context.Context, addr string, h http.Handler, log *slog.Logger) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", "err", err)
		}
	}()
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(shut); err != nil {
			log.Warn("metrics server shutdown", "err", err)
		}
	}()
	log.Info("serving metrics", "url", "http://"+strings.TrimPrefix(ln.Addr().String(), "http://")+"/metrics")
	return ln.Addr(), nil
}
