package failure

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
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

func TestScrubForms(t *testing.T) {
	const key = "sk-ant-api03-Zq8/Xv+Lm2=Kd9Rt4Yw7Pn5Hc3Bv"
	for _, c := range []struct{ name, in string }{
		{"exact", "invalid key " + key},
		{"upper-cased", "invalid key " + strings.ToUpper(key)},
		{"lower-cased", "invalid key " + strings.ToLower(key)},
		{"truncated", "invalid key " + key[:12] + "..."},
		{"a fragment", "key ending " + key[len(key)-10:]},
		{"query-escaped", "GET /v1?key=" + url.QueryEscape(key)},
		{"path-escaped", "GET /keys/" + url.PathEscape(key)},
		{"twice", key + " and " + strings.ToUpper(key)},
	} {
		got := Scrub(c.in, key)
		low := strings.ToLower(got)
		for _, form := range []string{key, url.QueryEscape(key), url.PathEscape(key)} {
			form = strings.ToLower(form)
			for i := 0; i+MinFragment <= len(form); i++ {
				if strings.Contains(low, form[i:i+MinFragment]) {
					t.Errorf("Scrub(%s) = %q; shows %q of the key", c.name, got, form[i:i+MinFragment])
					break
				}
			}
		}
		if !strings.Contains(got, "[redacted]") {
			t.Errorf("Scrub(%s) = %q; want the key marked [redacted]", c.name, got)
		}
	}
	if got := Scrub("429 Too Many Requests: rate_limit_error (request-id req_011CSHoEeqs5C35K2UUqR7Fy)", key); strings.Contains(got, "[redacted]") {
		t.Errorf("Scrub(an error without a key) = %q; want it unchanged", got)
	}
}

func TestMask(t *testing.T) {
	for _, c := range []struct{ in, secret string }{
		{"Authorization: Bearer abcdef0123456789", "abcdef0123456789"},
		{"x-api-key: my-local-secret-value", "my-local-secret-value"},
		{`{"api_key":"k3y-v4lue-here"}`, "k3y-v4lue-here"},
		{"password=hunter22", "hunter22"},
		{"https://admin:s3cret@proxy.internal/v1", "s3cret"},
		{"POST https://llm.internal/v1?token=abc123xyz&x=1", "abc123xyz"},
		{"key sk-proj-AbC123dEf456", "sk-proj-AbC123dEf456"},
		{"AKIAIOSFODNN7EXAMPLE rejected", "AKIAIOSFODNN7EXAMPLE"},
		{"opaque 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", "9f86d081884c7d659a2feaa0c55ad015"},
	} {
		if got := Mask(c.in); strings.Contains(got, c.secret) {
			t.Errorf("Mask(%q) = %q; still shows %q", c.in, got, c.secret)
		}
	}
	for _, s := range []string{"503 Service Unavailable: overloaded_error", "command/judge.sh: exit status 1", "request-id req_011CSHoEeqs5C35K2UUqR7Fy"} {
		if got := Mask(s); got != s {
			t.Errorf("Mask(%q) = %q; want it unchanged", s, got)
		}
	}
}
