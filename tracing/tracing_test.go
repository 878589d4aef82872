package tracing_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/mcpgw"
	"github.com/portcullis/portcullis/memstore"
	"github.com/portcullis/portcullis/policy"
	"github.com/portcullis/portcullis/tracing"
)

// The tracer is the MCP gateway's observer too.
var _ mcpgw.Observer = (*tracing.Tracer)(nil)

const testPolicy = `
version: 1
tools:
  list_elements: {endpoint: READ}
  edit_element:  {endpoint: UPDATE}
elements:
  - name: Guard
    type: persona
    active: true
    gatekeeper: {deny: [edit_element]}
`

func newGate(t *testing.T, tr *tracing.Tracer) *gate.Gate {
	t.Helper()
	pol, _, err := policy.Parse("policy.yaml", []byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	g, err := gate.New(pol, gate.WithStore(memstore.New(nil)), gate.WithObserver(tr))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestSpansOfAnMCPCall(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tr := tracing.New(tp)
	g := newGate(t, tr)

	ctx, end := tr.StartCall(context.Background(), "list_elements", "s1", "bot")
	d, err := g.Decide(ctx, portcullis.Call{Tool: "list_elements", Session: "s1", Agent: "bot", Args: map[string]any{"secret": "hunter2"}})
	if err != nil {
		t.Fatal(err)
	}
	tr.UpstreamCall(ctx, "notes", "list_elements", 1000, false, nil)
	end("forwarded", nil)

	spans := exp.GetSpans()
	byName := map[string]tracetest.SpanStub{}
	for _, s := range spans {
		byName[s.Name] = s
		for _, a := range s.Attributes {
			if a.Value.Emit() == "hunter2" {
				t.Errorf("span %s carries an argument's value", s.Name)
			}
		}
	}
	call, ok := byName["tools/call"]
	if !ok {
		t.Fatalf("no tools/call span in %v", names(spans))
	}
	dec, ok := byName["portcullis.decide"]
	if !ok {
		t.Fatalf("no decision span in %v", names(spans))
	}
	if dec.Parent.SpanID() != call.SpanContext.SpanID() || dec.SpanContext.TraceID() != call.SpanContext.TraceID() {
		t.Error("the decision span is not a child of the MCP call's")
	}
	if up := byName["upstream tools/call"]; up.Parent.SpanID() != call.SpanContext.SpanID() {
		t.Error("the upstream call's span is not a child of the MCP call's")
	}
	attr := map[string]string{}
	for _, a := range dec.Attributes {
		attr[string(a.Key)] = a.Value.Emit()
	}
	for k, want := range map[string]string{
		"portcullis.decision_id": d.DecisionID, "portcullis.outcome": "allow", "portcullis.tool": "list_elements",
		"portcullis.stage": "elements", "portcullis.agent": "bot",
	} {
		if attr[k] != want {
			t.Errorf("decision span %s = %q; want %q", k, attr[k], want)
		}
	}
	var stages []string
	for _, s := range spans {
		if s.Parent.SpanID() == dec.SpanContext.SpanID() {
			stages = append(stages, s.Name)
			if s.StartTime.Before(dec.StartTime) || s.EndTime.After(dec.EndTime) {
				t.Errorf("stage span %s lies outside its decision", s.Name)
			}
		}
	}
	want := []string{"portcullis.stage mode", "portcullis.stage danger_zone", "portcullis.stage route", "portcullis.stage elements", "portcullis.stage audit"}
	if len(stages) != len(want) {
		t.Fatalf("stage spans = %q; want %q", stages, want)
	}
	for i := range want {
		if stages[i] != want[i] {
			t.Errorf("stage span %d = %q; want %q", i, stages[i], want[i])
		}
	}
}

func TestFailClosedDecisionIsAnErrorSpan(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tr := tracing.New(sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)))
	g := newGate(t, tr)
	if _, err := g.Decide(context.Background(), portcullis.Call{}); err == nil {
		t.Fatal("an empty call was accepted")
	}
	spans := exp.GetSpans()
	if len(spans) != 2 || spans[len(spans)-1].Name != "portcullis.decide" || spans[len(spans)-1].Status.Code.String() != "Error" {
		t.Fatalf("spans = %v; want a decision span with status Error and its request stage", names(spans))
	}
}

func names(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

func TestFromEnv(t *testing.T) {
	for _, v := range []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
		"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_TRACES_SAMPLER"} {
		t.Setenv(v, "")
	}
	ctx := context.Background()
	off := func(name string) {
		t.Helper()
		tr, _, err := tracing.FromEnv(ctx, "v1")
		if err != nil || tr != nil {
			t.Errorf("%s: FromEnv = %v, %v; want tracing off", name, tr, err)
		}
	}
	off("nothing set")
	t.Setenv("OTEL_TRACES_EXPORTER", "none")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	off("exporter none")
	t.Setenv("OTEL_TRACES_EXPORTER", "")
	t.Setenv("OTEL_SDK_DISABLED", "true")
	off("SDK disabled")
	t.Setenv("OTEL_SDK_DISABLED", "")

	for name, env := range map[string][2]string{
		"zipkin":   {"OTEL_TRACES_EXPORTER", "zipkin"},
		"grpc":     {"OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"},
		"disabled": {"OTEL_SDK_DISABLED", "yes"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(env[0], env[1])
			if _, _, err := tracing.FromEnv(ctx, "v1"); err == nil {
				t.Errorf("%s=%s was accepted", env[0], env[1])
			}
		})
	}
}

// TestFromEnvExportsOverOTLP sends a decision's spans to a real HTTP
// endpoint that receives OTLP.
func TestFromEnvExportsOverOTLP(t *testing.T) {
	var posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method == http.MethodPost && r.URL.Path == "/v1/traces" && r.Header.Get("Content-Type") == "application/x-protobuf" && len(body) > 0 {
			posts.Add(1)
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer srv.Close()
	for _, v := range []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
		t.Setenv(v, "")
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	ctx := context.Background()
	tr, shutdown, err := tracing.FromEnv(ctx, "v1")
	if err != nil || tr == nil {
		t.Fatalf("FromEnv = %v, %v; want a tracer", tr, err)
	}
	g := newGate(t, tr)
	if _, err := g.Decide(ctx, portcullis.Call{Tool: "edit_element", Session: "s"}); err != nil {
		t.Fatal(err)
	}
	if err := shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if posts.Load() == 0 {
		t.Fatal("no spans reached the OTLP endpoint")
	}
}
