package notify_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/notify"
)

// logBuffer collects log output from several goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// hook is a webhook receiver. respond decides each answer from the
// request's number (1, 2, ...); nil answers 204.
type hook struct {
	mu      sync.Mutex
	bodies  [][]byte
	times   []time.Time
	respond func(w http.ResponseWriter, r *http.Request, n int)
	srv     *httptest.Server
}

func newHook(t *testing.T, respond func(w http.ResponseWriter, r *http.Request, n int)) *hook {
	t.Helper()
	h := &hook{respond: respond}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("webhook request %s with Content-Type %q; want a JSON POST", r.Method, r.Header.Get("Content-Type"))
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("read webhook body: %v", err)
		}
		h.mu.Lock()
		h.bodies = append(h.bodies, body)
		h.times = append(h.times, time.Now())
		n := len(h.bodies)
		h.mu.Unlock()
		if h.respond != nil {
			h.respond(w, r, n)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hook) arrivals() []time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.times)
}

func (h *hook) received() [][]byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.bodies)
}

func newWebhook(t *testing.T, opts notify.WebhookOptions) *notify.Webhook {
	t.Helper()
	w, err := notify.NewWebhook(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := w.Close(ctx); err != nil {
			t.Logf("close at the end of the test: %v", err) // some tests abandon a hung webhook
		}
	})
	return w
}

func closeWebhook(t *testing.T, w *notify.Webhook) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := w.Close(ctx); err != nil {
		t.Fatalf("Close = %v; want every notice delivered", err)
	}
}

func TestWebhookPayloads(t *testing.T) {
	tests := []struct {
		format string
		human  bool
	}{
		{"", false}, {"json", true}, {"slack", false}, {"slack", true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s human=%v", tt.format, tt.human), func(t *testing.T) {
			h := newHook(t, nil)
			w := newWebhook(t, notify.WebhookOptions{URL: h.srv.URL + "/hook", Format: tt.format, Human: tt.human})
			if err := w.Notify(context.Background(), blockNotice()); err != nil {
				t.Fatal(err)
			}
			if err := w.Notify(context.Background(), approvalNotice()); err != nil {
				t.Fatal(err)
			}
			closeWebhook(t, w)
			got := h.received()
			if len(got) != 2 {
				t.Fatalf("the webhook received %d requests; want 2", len(got))
			}
			block := got[0]
			if hasCode := bytes.Contains(block, []byte("K7P2QX")); hasCode != tt.human {
				t.Errorf("block payload %s: carries the code = %v; want %v (Human: %v)", block, hasCode, tt.human, tt.human)
			}
			var fields map[string]any
			if err := json.Unmarshal(block, &fields); err != nil {
				t.Fatalf("block payload %s is not JSON: %v", block, err)
			}
			if tt.format == "slack" {
				text, ok := fields["text"].(string)
				if len(fields) != 1 || !ok {
					t.Fatalf("slack payload %s; want only a text", block)
				}
				for _, w := range []string{"Portcullis", "agent bot is blocked", "rm -rf / is in the danger zone", "challenge chl_abc"} {
					if !strings.Contains(text, w) {
						t.Errorf("slack text %q lacks %q", text, w)
					}
				}
				var approval struct{ Text string }
				if err := json.Unmarshal(got[1], &approval); err != nil || !strings.Contains(approval.Text, "approval needed for delete_element") {
					t.Errorf("slack approval payload %s (%v); want a line naming the tool", got[1], err)
				}
				return
			}
			var n portcullis.Notice
			if err := json.Unmarshal(block, &n); err != nil {
				t.Fatal(err)
			}
			want := blockNotice()
			if !tt.human {
				want.Code = ""
				if _, ok := fields["code"]; ok {
					t.Errorf("JSON payload %s has a code field; want it omitted", block)
				}
			}
			if n != want {
				t.Errorf("JSON payload = %+v; want %+v", n, want)
			}
			var a portcullis.Notice
			if err := json.Unmarshal(got[1], &a); err != nil || a != approvalNotice() {
				t.Errorf("JSON approval payload = %+v (%v); want %+v", a, err, approvalNotice())
			}
		})
	}
}

// Text from an agent cannot mention a Slack channel or make a link.
func TestWebhookSlackEscapes(t *testing.T) {
	h := newHook(t, nil)
	w := newWebhook(t, notify.WebhookOptions{URL: h.srv.URL, Format: "slack"})
	n := approvalNotice()
	n.Tool = "<!channel> <https://evil.example|click>"
	if err := w.Notify(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	closeWebhook(t, w)
	var p struct{ Text string }
	if err := json.Unmarshal(h.received()[0], &p); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(p.Text, "<!channel>") || strings.Contains(p.Text, "<https://") || !strings.Contains(p.Text, "&lt;!channel&gt;") {
		t.Errorf("slack text = %q; want the agent's < and > escaped", p.Text)
	}
}

func TestWebhookRetries(t *testing.T) {
	h := newHook(t, func(w http.ResponseWriter, _ *http.Request, n int) {
		switch n {
		case 1:
			w.WriteHeader(http.StatusInternalServerError)
		case 2:
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		default:
			w.WriteHeader(http.StatusOK)
		}
	})
	logs := &logBuffer{}
	w := newWebhook(t, notify.WebhookOptions{URL: h.srv.URL, Backoff: 10 * time.Millisecond, Logger: logs.logger()})
	if err := w.Notify(context.Background(), blockNotice()); err != nil {
		t.Fatal(err)
	}
	closeWebhook(t, w)
	if got := len(h.received()); got != 3 {
		t.Fatalf("the webhook received %d requests; want 3 (500, 429, then 200)", got)
	}
	if at := h.arrivals(); at[2].Sub(at[1]) < time.Second {
		gap := at[2].Sub(at[1])
		t.Errorf("retry after a 429 with Retry-After: 1 came after %v; want at least 1s", gap)
	}
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("log has an error after a successful retry:\n%s", logs)
	}
}

func TestWebhookDoesNotRetryClientErrors(t *testing.T) {
	h := newHook(t, func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(http.StatusBadRequest) })
	logs := &logBuffer{}
	w := newWebhook(t, notify.WebhookOptions{URL: h.srv.URL, Backoff: time.Millisecond, Logger: logs.logger()})
	if err := w.Notify(context.Background(), blockNotice()); err != nil {
		t.Fatal(err)
	}
	closeWebhook(t, w)
	if got := len(h.received()); got != 1 {
		t.Errorf("the webhook received %d requests after a 400; want 1", got)
	}
	if !strings.Contains(logs.String(), "not retrying") || !strings.Contains(logs.String(), "status=400") {
		t.Errorf("log = %q; want the refusal logged", logs)
	}
}

func TestWebhookMaxAttempts(t *testing.T) {
	h := newHook(t, func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(http.StatusServiceUnavailable) })
	logs := &logBuffer{}
	w := newWebhook(t, notify.WebhookOptions{URL: h.srv.URL, MaxAttempts: 3, Backoff: time.Millisecond, Logger: logs.logger()})
	if err := w.Notify(context.Background(), blockNotice()); err != nil {
		t.Fatal(err)
	}
	closeWebhook(t, w)
	if got := len(h.received()); got != 3 {
		t.Errorf("the webhook received %d requests; want MaxAttempts = 3", got)
	}
	if !strings.Contains(logs.String(), "giving up") {
		t.Errorf("log = %q; want the failure logged", logs)
	}
}

// A transport error names neither the URL's secret path nor the code.
func TestWebhookLogsNoSecrets(t *testing.T) {
	h := newHook(t, nil)
	url := h.srv.URL + "/services/T000/B000/s3cr3tpath"
	h.srv.Close() // connection refused from now on
	logs := &logBuffer{}
	w := newWebhook(t, notify.WebhookOptions{URL: url, Human: true, MaxAttempts: 2, Backoff: time.Millisecond, Logger: logs.logger()})
	if err := w.Notify(context.Background(), blockNotice()); err != nil {
		t.Fatal(err)
	}
	closeWebhook(t, w)
	got := logs.String()
	if !strings.Contains(got, "giving up") {
		t.Fatalf("log = %q; want the failure logged", got)
	}
	if strings.Contains(got, "s3cr3tpath") || strings.Contains(got, "K7P2QX") {
		t.Errorf("log = %q; want neither the URL's path nor the code", got)
	}
}

// Notify only queues: a server that never answers does not hold it up.
func TestWebhookNotifyNeverBlocks(t *testing.T) {
	release := make(chan struct{})
	h := newHook(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(func() { close(release) }) // before the server closes
	w := newWebhook(t, notify.WebhookOptions{URL: h.srv.URL, Timeout: time.Minute, Logger: slog.New(slog.DiscardHandler)})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 1000 {
			n := blockNotice()
			n.DecisionID = fmt.Sprint(i)
			if err := w.Notify(context.Background(), n); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Notify blocked on a webhook that does not answer")
	}
	// Close gives up when its context ends, abandoning the request in flight.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := w.Close(ctx); err == nil || !strings.Contains(err.Error(), "not delivered") {
		t.Errorf("Close on a hung webhook = %v; want an error saying notices were not delivered", err)
	}
	if err := w.Notify(context.Background(), blockNotice()); err == nil {
		t.Error("Notify after Close = nil; want an error")
	}
}

func TestWebhookCloseDrains(t *testing.T) {
	h := newHook(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		time.Sleep(time.Millisecond)
		w.WriteHeader(http.StatusAccepted)
	})
	w := newWebhook(t, notify.WebhookOptions{URL: h.srv.URL})
	// A notice outlives the decision's context.
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 20 {
		n := approvalNotice()
		n.DecisionID = fmt.Sprint(i)
		if err := w.Notify(cancelled, n); err != nil {
			t.Fatal(err)
		}
	}
	closeWebhook(t, w)
	got := h.received()
	if len(got) != 20 {
		t.Fatalf("Close delivered %d notices; want all 20", len(got))
	}
	for i, b := range got {
		var n portcullis.Notice
		if err := json.Unmarshal(b, &n); err != nil || n.DecisionID != fmt.Sprint(i) {
			t.Errorf("notice %d = %s (%v); want decision %d, in order", i, b, err, i)
		}
	}
	if err := w.Notify(context.Background(), approvalNotice()); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("Notify after Close = %v; want closed", err)
	}
}

func TestWebhookQueueDropsOldest(t *testing.T) {
	arrived, release := make(chan struct{}), make(chan struct{})
	h := newHook(t, func(w http.ResponseWriter, _ *http.Request, n int) {
		if n == 1 {
			close(arrived)
			<-release
		}
	})
	logs := &logBuffer{}
	w := newWebhook(t, notify.WebhookOptions{URL: h.srv.URL, QueueSize: 4, Timeout: time.Minute, Logger: logs.logger()})
	notice := func(i int) {
		n := approvalNotice()
		n.DecisionID = fmt.Sprint(i)
		if err := w.Notify(context.Background(), n); err != nil {
			t.Fatal(err)
		}
	}
	notice(0)
	<-arrived // 0 is in flight; the queue is empty
	for i := 1; i <= 6; i++ {
		notice(i) // 1 and 2 are dropped to make room for 5 and 6
	}
	close(release)
	closeWebhook(t, w)
	var ids []string
	for _, b := range h.received() {
		var n portcullis.Notice
		if err := json.Unmarshal(b, &n); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, n.DecisionID)
	}
	if want := []string{"0", "3", "4", "5", "6"}; !slices.Equal(ids, want) {
		t.Errorf("delivered decisions %v; want %v (the oldest dropped)", ids, want)
	}
	if got := strings.Count(logs.String(), "dropped the oldest notice"); got != 2 {
		t.Errorf("log reports %d dropped notices; want 2:\n%s", got, logs)
	}
}

func TestNewWebhookValidates(t *testing.T) {
	tests := []struct{ name, url, format string }{
		{"empty", "", ""},
		{"no scheme", "hooks.example/x", ""},
		{"host and port only", "localhost:8080", ""},
		{"other scheme", "ftp://hooks.example/x", ""},
		{"no host", "https:///services/x", ""},
		{"malformed", "http://h:1:bad/s3cr3tpath", ""},
		{"unknown format", "https://hooks.example/x", "xml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := notify.NewWebhook(notify.WebhookOptions{URL: tt.url, Format: tt.format})
			if err == nil {
				t.Errorf("close: %v", w.Close(context.Background()))
				t.Fatalf("NewWebhook(%q, %q) = nil error; want one", tt.url, tt.format)
			}
			if strings.Contains(err.Error(), "s3cr3tpath") {
				t.Errorf("NewWebhook error %q shows the URL's path", err)
			}
		})
	}
}
