package metrics

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"
)

// Serve serves h as /metrics on addr until ctx ends (`portcullis mcp
// --metrics-addr`), then shuts the server down. It returns once the
// address is listening, with the address it listens on.
func Serve(ctx context.Context, addr string, h http.Handler, log *slog.Logger) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
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
