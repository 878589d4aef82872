// Package failure is what the LLM providers share in reporting a request
// that failed: which failures may succeed if asked again, how long the
// server asked to wait, and keeping the API key out of every message.
package failure

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Unanswered describes a request that got no error status from the API:
// the caller's context ended (not retryable: nobody waits for the answer;
// the cause is the context's error), the request's own timeout expired
// (retryable), no answer came at all — a refused or dropped connection,
// DNS, TLS — (retryable), or an answer came that does not decode (not
// retryable: asking again is not expected to help). The message is to be
// prefixed with the provider and model, and scrubbed.
func Unanswered(ctx context.Context, err error) (msg string, retryable bool, cause error) {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return "request abandoned: " + ctxErr.Error(), false, ctxErr
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "no answer within the timeout: " + err.Error(), true, err
	}
	var urlErr *url.Error
	var netErr net.Error
	if errors.As(err, &urlErr) || errors.As(err, &netErr) {
		return err.Error(), true, err
	}
	return "malformed response: " + err.Error(), false, err
}

// RetryAfter reads how long the server asked the caller to wait:
// retry-after-ms (OpenAI's), then retry-after in seconds or as an HTTP
// date. Zero when it did not say.
func RetryAfter(h http.Header) time.Duration {
	if ms, err := strconv.ParseFloat(h.Get("Retry-After-Ms"), 64); err == nil && ms > 0 {
		return time.Duration(ms * float64(time.Millisecond))
	}
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil && secs > 0 {
		return time.Duration(secs * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := time.Until(t); d > 0 {
			return d
		}
	}
	return 0
}

// Scrub removes the API key from a message, wherever a server or a
// library may have echoed it.
func Scrub(s, key string) string {
	if key == "" {
		return s
	}
	return strings.ReplaceAll(s, key, "[redacted]")
}
