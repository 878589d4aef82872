package openai

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
)

// Error is a request that failed: the server answered with an error status,
// or the request did not get an answer (a transport error or a timeout). Its
// message never contains the API key.
type Error struct {
	// StatusCode is the HTTP status; zero when no answer came.
	StatusCode int
	// Type and Code are the API's error type and code, e.g.
	// "invalid_request_error" and "invalid_api_key"; empty when the body
	// did not say.
	Type string
	Code string
	// RequestID is the x-request-id header, for support.
	RequestID string
	// RetryAfter is how long the server asked the caller to wait (the
	// retry-after or retry-after-ms header); zero when it did not say.
	RetryAfter time.Duration

	msg       string
	retryable bool
	cause     error // a transport or context error; nil for an API error
}

func (e *Error) Error() string { return e.msg }

// Retryable reports whether the same request may succeed later: true for
// 429, 5xx, transport errors and the Options.Timeout expiring; false for
// other 4xx statuses, malformed answers and the caller's context ending.
func (e *Error) Retryable() bool { return e.retryable }

// Unwrap returns the transport or context error, so that errors.Is finds
// context.DeadlineExceeded. An API error unwraps to nothing: the SDK's error
// carries the raw request and response, which are not passed on.
func (e *Error) Unwrap() error { return e.cause }

// wrap turns an error of the SDK into an *Error. ctx is the caller's
// context: when it has ended, retrying is pointless. res is the response,
// when one came.
func (m *Model) wrap(ctx context.Context, err error, res *http.Response) error {
	prefix := "openai: " + m.model + ": "
	var apiErr *openai.Error
	if errors.As(err, &apiErr) || (res != nil && res.StatusCode >= 400) {
		e := &Error{}
		if res != nil {
			e.StatusCode = res.StatusCode
			e.RequestID = res.Header.Get("x-request-id")
			e.RetryAfter = retryAfter(res.Header)
		}
		var text string
		if apiErr != nil {
			e.StatusCode = apiErr.StatusCode
			e.Type, e.Code, text = apiErr.Type, apiErr.Code, apiErr.Message
		}
		e.retryable = e.StatusCode == http.StatusTooManyRequests || e.StatusCode >= 500
		var msg strings.Builder
		fmt.Fprintf(&msg, "%s%d %s", prefix, e.StatusCode, http.StatusText(e.StatusCode))
		for _, s := range []string{e.Type, e.Code, text} {
			if s != "" {
				fmt.Fprintf(&msg, ": %s", s)
			}
		}
		if e.RequestID != "" {
			fmt.Fprintf(&msg, " (request-id %s)", e.RequestID)
		}
		e.msg = m.scrub(msg.String())
		return e
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return &Error{msg: m.scrub(prefix + "request abandoned: " + ctxErr.Error()), cause: ctxErr}
	}
	e := &Error{msg: m.scrub(prefix + err.Error()), cause: err}
	if errors.Is(err, context.DeadlineExceeded) {
		e.msg = m.scrub(prefix + "no answer within the timeout: " + err.Error())
		e.retryable = true
		return e
	}
	// A request that got no answer (refused or dropped connection, DNS,
	// TLS) may get one later. An answer that came but does not decode, or
	// is not JSON, is broken: asking again is not expected to help.
	var urlErr *url.Error
	var netErr net.Error
	if errors.As(err, &urlErr) || errors.As(err, &netErr) {
		e.retryable = true
		return e
	}
	e.msg = m.scrub(prefix + "malformed response: " + err.Error())
	return e
}

// retryAfter reads retry-after-ms (OpenAI's), then retry-after: seconds,
// or an HTTP date.
func retryAfter(h http.Header) time.Duration {
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

// scrub removes the API key from a message, wherever a server or a library
// may have echoed it.
func (m *Model) scrub(s string) string {
	if m.key == "" {
		return s
	}
	return strings.ReplaceAll(s, m.key, "[redacted]")
}
