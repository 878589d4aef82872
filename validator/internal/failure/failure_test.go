package failure

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"
)

func TestUnanswered(t *testing.T) {
	live := context.Background()
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	refused := &url.Error{Op: "Post", URL: "http://127.0.0.1:1", Err: &net.OpError{Op: "dial", Err: errors.New("connection refused")}}
	for _, c := range []struct {
		name      string
		ctx       context.Context
		err       error
		prefix    string
		retryable bool
		cause     error
	}{
		{"caller gone", ended, refused, "request abandoned: ", false, context.Canceled},
		{"timeout", live, fmt.Errorf("post: %w", context.DeadlineExceeded), "no answer within the timeout: ", true, context.DeadlineExceeded},
		{"no answer", live, refused, "Post ", true, refused},
		{"malformed", live, errors.New("invalid character 'x'"), "malformed response: ", false, nil},
	} {
		msg, retryable, cause := Unanswered(c.ctx, c.err)
		if len(msg) < len(c.prefix) || msg[:len(c.prefix)] != c.prefix {
			t.Errorf("%s: message %q; want it to start %q", c.name, msg, c.prefix)
		}
		if retryable != c.retryable {
			t.Errorf("%s: retryable %v; want %v", c.name, retryable, c.retryable)
		}
		if c.cause != nil && !errors.Is(cause, c.cause) {
			t.Errorf("%s: cause %v; want %v", c.name, cause, c.cause)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	future := time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)
	past := time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat)
	for _, c := range []struct {
		h        http.Header
		min, max time.Duration
	}{
		{http.Header{"Retry-After-Ms": {"1500"}, "Retry-After": {"9"}}, 1500 * time.Millisecond, 1500 * time.Millisecond},
		{http.Header{"Retry-After": {"2"}}, 2 * time.Second, 2 * time.Second},
		{http.Header{"Retry-After": {"0.5"}}, 500 * time.Millisecond, 500 * time.Millisecond},
		{http.Header{"Retry-After": {future}}, 59 * time.Minute, time.Hour},
		{http.Header{"Retry-After": {past}}, 0, 0},
		{http.Header{"Retry-After": {"soon"}}, 0, 0},
		{http.Header{"Retry-After": {"-3"}}, 0, 0},
		{http.Header{}, 0, 0},
	} {
		if got := RetryAfter(c.h); got < c.min || got > c.max {
			t.Errorf("RetryAfter(%v) = %v; want %v to %v", c.h, got, c.min, c.max)
		}
	}
}

func TestScrub(t *testing.T) {
	if got := Scrub("bad key sk-123 for sk-123", "sk-123"); got != "bad key [redacted] for [redacted]" {
		t.Errorf("Scrub = %q", got)
	}
	if got := Scrub("no key here", ""); got != "no key here" {
		t.Errorf("Scrub with no key = %q", got)
	}
}
