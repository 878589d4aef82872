package tracing_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/tracing"
)

// TestStart: off, Start says nothing and flushes nothing; on, it says so
// and its flush sends the spans not yet sent.
func TestStart(t *testing.T) {
	var posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err == nil && r.URL.Path == "/v1/traces" {
			posts.Add(1)
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer srv.Close()
	for _, v := range []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
		t.Setenv(v, "")
	}
	ctx := context.Background()
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	tr, flush, err := tracing.Start(ctx, "v1", log)
	if err != nil || tr != nil || flush == nil {
		t.Fatalf("Start(off) = %v, %v; want no tracer and a flush", tr, err)
	}
	flush()
	if logged.Len() != 0 {
		t.Errorf("Start(off) logged %q", logged.String())
	}

	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	tr, flush, err = tracing.Start(ctx, "v1", log)
	if err != nil || tr == nil {
		t.Fatalf("Start(on) = %v, %v; want a tracer", tr, err)
	}
	if !strings.Contains(logged.String(), "tracing on: spans are exported with OTLP") {
		t.Errorf("Start(on) logged %q; want it said", logged.String())
	}
	if _, err := newGate(t, tr).Decide(ctx, portcullis.Call{Tool: "edit_element", Session: "s"}); err != nil {
		t.Fatal(err)
	}
	flush()
	if posts.Load() == 0 {
		t.Error("the flush sent no spans")
	}

	t.Setenv("OTEL_TRACES_EXPORTER", "zipkin")
	if _, _, err := tracing.Start(ctx, "v1", log); err == nil {
		t.Error("Start with OTEL_TRACES_EXPORTER=zipkin was accepted")
	}
}
