package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/portcullis/portcullis"
)

// Webhook defaults.
const (
	defaultWebhookTimeout     = 5 * time.Second
	defaultWebhookMaxAttempts = 5
	defaultWebhookBackoff     = 500 * time.Millisecond
	defaultWebhookQueue       = 256
	// maxWebhookBackoff caps the delay between two attempts, Retry-After
	// included.
	maxWebhookBackoff = 30 * time.Second
)

// The webhook payload formats.
const (
	FormatJSON  = "json"  // the Notice as JSON
	FormatSlack = "slack" // {"text": "..."}, for Slack-compatible incoming webhooks
)

// WebhookOptions configure a Webhook.
type WebhookOptions struct {
	// URL receives a POST per notice; http or https with a host. It often
	// holds a secret (a Slack webhook's path does) and is never logged.
	URL string
	// Format of the body: FormatJSON (the default) or FormatSlack.
	Format string
	// Human marks the webhook as a human channel (a chat only people read,
	// a pager). Only then does a block's payload carry the verification
	// code; otherwise the code is removed before the notice is queued.
	Human bool
	// Timeout bounds each attempt. Default 5s.
	Timeout time.Duration
	// MaxAttempts is how many times a notice is tried. Default 5.
	MaxAttempts int
	// Backoff is the delay before the first retry; it doubles after each
	// retry, capped at 30s. A Retry-After header (seconds or a date) is
	// used instead when present, within the same cap. Default 500ms.
	Backoff time.Duration
	// QueueSize bounds the notices waiting for delivery; when it is full
	// the oldest is dropped (and logged). Default 256.
	QueueSize int
	// Client sends the requests. Default: a client that does not follow
	// redirects (a redirect could carry a code to another host).
	Client *http.Client
	// Logger receives delivery failures and dropped notices. Default:
	// slog.Default().
	Logger *slog.Logger
}

// Webhook POSTs each notice to a URL from a background goroutine, retrying
// transport errors, 429 and 5xx responses with backoff. Notify only queues
// the notice, so it never waits for the network. Close stops it.
type Webhook struct {
	url         string
	host        string // for logs: the URL may hold a secret
	format      string
	human       bool
	timeout     time.Duration
	maxAttempts int
	backoff     time.Duration
	queueSize   int
	client      *http.Client
	log         *slog.Logger

	mu      sync.Mutex
	queue   []queued
	closed  bool
	lost    int           // notices left undelivered when Close gave up
	wake    chan struct{} // a notice was queued
	quit    chan struct{} // closed by Close: deliver what is queued, then stop
	ctx     context.Context
	cancel  context.CancelFunc // aborts deliveries when Close's ctx ends
	stopped chan struct{}      // closed when the goroutine ends
}

// queued is a notice ready to send: its body, built (and stripped of the
// code when the webhook is not human) when it was queued.
type queued struct {
	body     []byte
	kind     portcullis.NoticeKind
	agent    string
	decision string
}

var _ portcullis.Notifier = (*Webhook)(nil)

// NewWebhook validates the options and starts the delivery goroutine.
func NewWebhook(opts WebhookOptions) (*Webhook, error) {
	u, err := url.Parse(opts.URL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, which may hold a secret
		}
		return nil, fmt.Errorf("webhook URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("webhook URL must be http:// or https:// with a host (got scheme %q)", u.Scheme)
	}
	w := &Webhook{
		url:         u.String(),
		host:        u.Scheme + "://" + u.Host,
		format:      opts.Format,
		human:       opts.Human,
		timeout:     opts.Timeout,
		maxAttempts: opts.MaxAttempts,
		backoff:     opts.Backoff,
		queueSize:   opts.QueueSize,
		client:      opts.Client,
		log:         opts.Logger,
		wake:        make(chan struct{}, 1),
		quit:        make(chan struct{}),
		stopped:     make(chan struct{}),
	}
	switch w.format {
	case "":
		w.format = FormatJSON
	case FormatJSON, FormatSlack:
	default:
		return nil, fmt.Errorf("webhook format %q: want %s or %s", opts.Format, FormatJSON, FormatSlack)
	}
	if w.timeout <= 0 {
		w.timeout = defaultWebhookTimeout
	}
	if w.maxAttempts <= 0 {
		w.maxAttempts = defaultWebhookMaxAttempts
	}
	if w.backoff <= 0 {
		w.backoff = defaultWebhookBackoff
	}
	if w.queueSize <= 0 {
		w.queueSize = defaultWebhookQueue
	}
	if w.client == nil {
		w.client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if w.log == nil {
		w.log = slog.Default()
	}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	go w.run()
	return w, nil
}

// Notify queues the notice for delivery and returns at once. When the queue
// is full the oldest waiting notice is dropped and logged. It returns an
// error only when the webhook is closed or the payload cannot be built.
func (w *Webhook) Notify(_ context.Context, n portcullis.Notice) error {
	body, err := w.payload(n)
	if err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	q := queued{body: body, kind: n.Kind, agent: n.Agent, decision: n.DecisionID}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return fmt.Errorf("webhook %s: closed: notice for decision %s not sent", w.host, n.DecisionID)
	}
	var dropped *queued
	if len(w.queue) >= w.queueSize {
		d := w.queue[0]
		dropped = &d
		w.queue = w.queue[1:]
	}
	w.queue = append(w.queue, q)
	w.mu.Unlock()
	if dropped != nil {
		w.log.Error("webhook queue full: dropped the oldest notice", "webhook", w.host, "queue", w.queueSize, "kind", dropped.kind, "agent", dropped.agent, "decision", dropped.decision)
	}
	select {
	case w.wake <- struct{}{}:
	default:
	}
	return nil
}

// Close stops accepting notices, delivers those queued until ctx ends, and
// stops the delivery goroutine. When ctx ends first, the delivery in flight
// is abandoned and the error says how many notices were not sent.
func (w *Webhook) Close(ctx context.Context) error {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.quit)
	}
	w.mu.Unlock()
	select {
	case <-w.stopped:
		w.cancel()
		return nil
	case <-ctx.Done():
		w.cancel()
		<-w.stopped
		w.mu.Lock()
		lost := w.lost
		w.mu.Unlock()
		return fmt.Errorf("webhook %s: %d notices not delivered: %w", w.host, lost, ctx.Err())
	}
}

// run delivers queued notices one at a time until Close.
func (w *Webhook) run() {
	defer close(w.stopped)
	for {
		if w.ctx.Err() != nil {
			w.mu.Lock()
			w.lost += len(w.queue)
			w.queue = nil
			lost := w.lost
			w.mu.Unlock()
			if lost > 0 {
				w.log.Error("webhook closed before delivering every notice", "webhook", w.host, "undelivered", lost)
			}
			return
		}
		q, ok := w.next()
		if ok {
			if !w.deliver(q) && w.ctx.Err() != nil {
				w.mu.Lock()
				w.lost++
				w.mu.Unlock()
			}
			continue
		}
		select {
		case <-w.wake:
		case <-w.quit:
			// Notify refuses new notices once quit is closed, so an
			// empty queue now stays empty.
			w.mu.Lock()
			empty := len(w.queue) == 0
			w.mu.Unlock()
			if empty {
				return
			}
		}
	}
}

func (w *Webhook) next() (queued, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.queue) == 0 {
		return queued{}, false
	}
	q := w.queue[0]
	w.queue[0] = queued{}
	w.queue = w.queue[1:]
	return q, true
}

// deliver sends one notice, retrying what may succeed later. It reports
// whether the notice was delivered.
func (w *Webhook) deliver(q queued) bool {
	delay := w.backoff
	for attempt := 1; ; attempt++ {
		status, retryAfter, err := w.post(q.body)
		switch {
		case err == nil && status >= 200 && status < 300:
			return true
		case w.ctx.Err() != nil:
			return false
		case err == nil && status != http.StatusTooManyRequests && status < 500:
			w.log.Error("webhook refused the notice; not retrying", "webhook", w.host, "status", status, "kind", q.kind, "agent", q.agent, "decision", q.decision)
			return false
		case attempt >= w.maxAttempts:
			w.log.Error("webhook delivery failed; giving up", "webhook", w.host, "attempts", attempt, "status", status, "err", err, "kind", q.kind, "agent", q.agent, "decision", q.decision)
			return false
		}
		wait := delay
		if retryAfter >= 0 {
			wait = retryAfter
		}
		wait = min(wait, maxWebhookBackoff)
		w.log.Info("webhook delivery failed; retrying", "webhook", w.host, "attempt", attempt, "status", status, "err", err, "retryIn", wait, "decision", q.decision)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-w.ctx.Done():
			t.Stop()
			return false
		}
		delay = min(delay*2, maxWebhookBackoff)
	}
}

// post makes one attempt. retryAfter is the server's Retry-After, or -1.
// A transport error is returned without the URL, which may hold a secret.
func (w *Webhook) post(body []byte) (status int, retryAfter time.Duration, err error) {
	ctx, cancel := context.WithTimeout(w.ctx, w.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return 0, -1, stripURL(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "portcullis-notify")
	resp, err := w.client.Do(req)
	if err != nil {
		return 0, -1, stripURL(err)
	}
	defer resp.Body.Close()
	// Read a little of the body so the connection can be reused.
	if _, err := io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)); err != nil {
		w.log.Debug("webhook: read response", "webhook", w.host, "err", stripURL(err))
	}
	return resp.StatusCode, parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()), nil
}

func stripURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", strings.ToLower(ue.Op), ue.Err)
	}
	return err
}

// parseRetryAfter reads a Retry-After header: delay seconds or an HTTP date.
// It returns -1 when there is none or it cannot be read.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return -1
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s < 0 {
			return -1
		}
		if s > int64(maxWebhookBackoff/time.Second) {
			return maxWebhookBackoff
		}
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return -1
}

// payload is the request body of a notice. The code is removed first unless
// the webhook is a human channel.
func (w *Webhook) payload(n portcullis.Notice) ([]byte, error) {
	if !w.human {
		n.Code = ""
	}
	if w.format == FormatSlack {
		return json.Marshal(struct {
			Text string `json:"text"`
		}{slackText(n, w.human)})
	}
	return json.Marshal(n)
}

// slackText is a notice as one line of Slack mrkdwn. Text that may come from
// an agent is escaped, so it cannot mention a channel or make a link.
func slackText(n portcullis.Notice, withCode bool) string {
	prefix := ":bell: *Portcullis*: "
	if n.Kind == portcullis.NoticeBlock {
		prefix = ":no_entry: *Portcullis*: "
	}
	return prefix + slackEscaper.Replace(summary(n, withCode))
}

var slackEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")
