package tracing

import (
	"context"
	"log/slog"
	"time"
)

// Start turns traces on when the OTEL_* variables ask for them (FromEnv)
// and says so on log. The returned function flushes the spans not yet sent
// (for at most 5 seconds, warning on log when it cannot); call it before
// exiting. The Tracer is nil when tracing is off; flush is never nil.
func Start(ctx context.Context, version string, log *slog.Logger) (_ *Tracer, flush func(), _ error) {
	tr, shutdown, err := FromEnv(ctx, version)
	if err != nil {
		return nil, nil, err
	}
	if tr == nil {
		return nil, func() {}, nil
	}
	log.Info("tracing on: spans are exported with OTLP")
	return tr, func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := shutdown(sctx); err != nil {
			log.Warn("flush traces", "err", err)
		}
	}, nil
}
