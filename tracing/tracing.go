// Package tracing gives Portcullis OpenTelemetry traces: one span per
// decision with a child per pipeline stage, and a span around each MCP
// tools/call with the decision and the upstream call inside it.
//
// It is an adapter: it imports the root package and OpenTelemetry only. A
// *Tracer is a portcullis.DecisionObserver (gate.WithObserver) and has the
// methods of the MCP gateway's Observer (mcpgw.Config.Observer). Spans
// never carry a call's arguments. FromEnv builds one from the standard
// OTEL_* variables, with the OTLP exporter over HTTP (OpenTelemetry's
// otlptrace with a client of its own, which does not link gRPC as the
// official HTTP client does); tracing is off when they do not ask for it.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/portcullis/portcullis"
)

// instrumentation names the tracer.
const instrumentation = "github.com/portcullis/portcullis"

// Tracer records Portcullis's spans.
type Tracer struct {
	tr trace.Tracer
}

// New returns a Tracer that records with tp.
func New(tp trace.TracerProvider) *Tracer {
	return &Tracer{tr: tp.Tracer(instrumentation)}
}

var _ portcullis.DecisionObserver = (*Tracer)(nil)

// ObserveDecision records the decision's span ("portcullis.decide", a child
// of the span in ctx, such as the MCP call's) with one child span per
// stage ("portcullis.stage <stage>"), at the times they ran.
func (t *Tracer) ObserveDecision(ctx context.Context, ev *portcullis.DecisionEvent) {
	d := ev.Decision
	if d == nil {
		return
	}
	attrs := []attribute.KeyValue{
		attribute.String("portcullis.decision_id", d.DecisionID),
		attribute.String("portcullis.tool", d.Tool),
		attribute.String("portcullis.outcome", string(d.Outcome)),
		attribute.String("portcullis.permission_level", d.PermissionLevel.String()),
		attribute.String("portcullis.code", string(d.Code)),
		attribute.String("portcullis.source", string(d.Source)),
		attribute.String("portcullis.stage", ev.DecidingStage()),
		attribute.String("portcullis.policy_hash", ev.PolicyHash),
		attribute.Bool("portcullis.fail_closed", d.FailClosed),
		attribute.Bool("portcullis.explain", ev.Explain),
	}
	if c := ev.Call; c != nil {
		attrs = append(attrs, attribute.String("portcullis.agent", c.Agent), attribute.String("portcullis.session", c.Session))
	}
	if v := ev.Validator; v != nil {
		attrs = append(attrs,
			attribute.String("portcullis.validator.verdict", v.Verdict),
			attribute.String("portcullis.validator.provider", v.Provider),
			attribute.Bool("portcullis.validator.cached", v.Cached),
			attribute.Bool("portcullis.validator.fail_closed", v.FailClosed))
	}
	ctx, span := t.tr.Start(ctx, "portcullis.decide", trace.WithTimestamp(ev.Start), trace.WithAttributes(attrs...),
		trace.WithSpanKind(trace.SpanKindInternal))
	at := ev.Start
	for _, s := range ev.Stages {
		_, ss := t.tr.Start(ctx, "portcullis.stage "+s.Stage, trace.WithTimestamp(at),
			trace.WithAttributes(attribute.String("portcullis.stage", s.Stage)))
		at = at.Add(s.Duration)
		ss.End(trace.WithTimestamp(at))
	}
	switch {
	case ev.Err != nil:
		span.SetStatus(codes.Error, ev.Err.Error())
	case d.FailClosed:
		span.SetStatus(codes.Error, "failed closed")
	}
	span.End(trace.WithTimestamp(ev.Start.Add(ev.Duration)))
}

// StartCall starts the span of an MCP tools/call ("tools/call"); the
// decision's span and the upstream call's are its children.
func (t *Tracer) StartCall(ctx context.Context, tool, session, agent string) (context.Context, func(string, error)) {
	ctx, span := t.tr.Start(ctx, "tools/call", trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
		attribute.String("mcp.method.name", "tools/call"),
		attribute.String("gen_ai.tool.name", tool),
		attribute.String("mcp.session.id", session),
		attribute.String("portcullis.agent", agent),
	))
	return ctx, func(result string, err error) {
		span.SetAttributes(attribute.String("portcullis.result", result))
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}

// UpstreamCall records the forwarded call's span ("upstream tools/call"),
// a child of the MCP call's.
func (t *Tracer) UpstreamCall(ctx context.Context, upstream, tool string, took time.Duration, isError bool, err error) {
	end := time.Now()
	_, span := t.tr.Start(ctx, "upstream tools/call", trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(end.Add(-took)),
		trace.WithAttributes(
			attribute.String("mcp.method.name", "tools/call"),
			attribute.String("gen_ai.tool.name", tool),
			attribute.String("portcullis.upstream", upstream),
			attribute.Bool("portcullis.tool_error", isError),
		))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End(trace.WithTimestamp(end))
}

// UpstreamRestart is not traced (the metrics count it).
func (t *Tracer) UpstreamRestart(string, error) {}

// ApprovalWait is not traced apart: the wait is inside the MCP call's span.
func (t *Tracer) ApprovalWait(string, string, time.Duration) {}

// FromEnv builds a Tracer from the standard OpenTelemetry variables, or
// returns nil (tracing off) when they do not ask for traces: tracing is on
// when OTEL_TRACES_EXPORTER is "otlp", or when it is unset and
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set;
// OTEL_SDK_DISABLED=true and OTEL_TRACES_EXPORTER=none turn it off. The
// exporter is OTLP over HTTP (protocol http/protobuf), configured by the
// OTEL_EXPORTER_OTLP_* variables (a value it cannot use is an error);
// OTEL_SERVICE_NAME (default "portcullis"), OTEL_RESOURCE_ATTRIBUTES and
// OTEL_TRACES_SAMPLER apply. shutdown flushes the spans not yet sent.
func FromEnv(ctx context.Context, version string) (_ *Tracer, shutdown func(context.Context) error, _ error) {
	getenv := os.Getenv
	if v := getenv("OTEL_SDK_DISABLED"); v != "" {
		switch v {
		case "true":
			return nil, nil, nil
		case "false":
		default:
			return nil, nil, fmt.Errorf("OTEL_SDK_DISABLED=%q: want true or false", v)
		}
	}
	switch exp := getenv("OTEL_TRACES_EXPORTER"); exp {
	case "none":
		return nil, nil, nil
	case "":
		if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
			return nil, nil, nil
		}
	case "otlp":
	default:
		return nil, nil, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: portcullis exports traces with otlp (or none)", exp)
	}
	proto := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if proto != "" && proto != "http/protobuf" {
		return nil, nil, fmt.Errorf("OTLP protocol %q: portcullis sends traces with http/protobuf (the collector's port 4318)", proto)
	}
	cfg, err := otlpFromEnv(getenv)
	if err != nil {
		return nil, nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	exp, err := otlptrace.New(ctx, newOTLPClient(cfg))
	if err != nil {
		return nil, nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	attrs := []attribute.KeyValue{attribute.String("service.version", version)}
	if getenv("OTEL_SERVICE_NAME") == "" && !strings.Contains(getenv("OTEL_RESOURCE_ATTRIBUTES"), "service.name=") {
		attrs = append(attrs, attribute.String("service.name", "portcullis"))
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attrs...))
	if err != nil && !errors.Is(err, resource.ErrSchemaURLConflict) {
		return nil, nil, fmt.Errorf("trace resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return New(tp), tp.Shutdown, nil
}
