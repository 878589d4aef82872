package tracing

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
)

// NewOTLPExporter is the exporter FromEnv builds, configured by getenv.
func NewOTLPExporter(ctx context.Context, getenv func(string) string) (*otlptrace.Exporter, error) {
	cfg, err := otlpFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	return otlptrace.New(ctx, newOTLPClient(cfg))
}

// SetOTLPRetry sets the client's retry intervals until the returned
// function restores them.
func SetOTLPRetry(initial, max, elapsed time.Duration) (restore func()) {
	old := otlpRetry
	otlpRetry.initial, otlpRetry.max, otlpRetry.elapsed = initial, max, elapsed
	return func() { otlpRetry = old }
}
