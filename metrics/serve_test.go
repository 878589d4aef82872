package metrics_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"

	"github.com/portcullis/portcullis/metrics"
)

// TestServe serves a handler as /metrics until the context ends.
func TestServe(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "portcullis_up 1\n") })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	addr, err := metrics.Serve(ctx, "127.0.0.1:0", h, log)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr.String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || string(body) != "portcullis_up 1\n" {
		t.Fatalf("GET /metrics = %d %q, %v", resp.StatusCode, body, err)
	}
	if resp, err := http.Get("http://" + addr.String() + "/other"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /other = %v, %v; want 404", resp, err)
	} else {
		resp.Body.Close()
	}
	if _, err := metrics.Serve(ctx, addr.String(), h, log); err == nil {
		t.Error("Serve on an address in use succeeded")
	}
	if _, err := metrics.Serve(ctx, "no-port", h, log); err == nil {
		t.Error("Serve on an address without a port succeeded")
	}
}
