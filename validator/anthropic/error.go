package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
)

// StatusOverloaded is Anthropic's status for an overloaded API.
const StatusOverloaded = 529

// Error is a request that failed: the API answered with an error status, or
// the request did not get an answer (a transport error or a timeout). Its
// message never contains the API key.
type Error struct {
	// StatusCode is the HTTP status; zero when no answer came.
	StatusCode int
	// Type is the API's error type, e.g. "rate_limit_error" or
	// "overloaded_error"; empty when the body did not say.
	Type string
	// RequestID is the API's request-id header, for support.
	RequestID string
	// RetryAfter is how long the API asked the caller to wait (the
	// retry-after header); zero when it did not say.
	RetryAfter time.Duration

	msg       string
	retryable bool
	cause     error // a transport or context error; nil for an API error
}

func (e *Error) Error() string { return e.msg }

// Retryable reports whether the same request may succeed later: true for
// 429, 529, 5xx, transport errors and the Options.Timeout expiring; false for
// other 4xx statuses and for the caller's context ending.
func (e *Error) Retryable() bool { return e.retryable }

// Unwrap returns the transport or context error, so that errors.Is finds
// context.DeadlineExceeded. An API error unwraps to nothing: the SDK's error
// carries the raw request and response, which are not passed on.
func (e *Error) Unwrap() error { return e.cause }

// wrap turns an error of the SDK into an *Error. ctx is the caller's
// context: when it has ended, retrying is pointless.
func (m *Model) wrap(ctx context.Context, err error) error {
	prefix := "anthropic: " + m.model + ": "
	var apiErr *anthropic.Error
	if errors.As(err, &apiErr) {
		e := &Error{
			StatusCode: apiErr.StatusCode,
			Type:       string(apiErr.Type()),
			RequestID:  apiErr.RequestID,
			retryable:  retryableStatus(apiErr.StatusCode),
		}
		if apiErr.Response != nil {
			e.RetryAfter = retryAfter(apiErr.Response.Header)
		}
		var msg strings.Builder
		fmt.Fprintf(&msg, "%s%d %s", prefix, apiErr.StatusCode, statusText(apiErr.StatusCode))
		if e.Type != "" {
			fmt.Fprintf(&msg, ": %s", e.Type)
		}
		if text := errorMessage(apiErr.RawJSON()); text != "" {
			fmt.Fprintf(&msg, ": %s", text)
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

// statusText names a status, Anthropic's 529 included.
func statusText(code int) string {
	if code == StatusOverloaded {
		return "Overloaded"
	}
	return http.StatusText(code)
}

func retryableStatus(code int) bool {
	return code == http.StatusTooManyRequests || code == StatusOverloaded || code >= 500
}

// errorMessage returns the message of an error body in the API's format:
// {"type":"error","error":{"type":"...","message":"..."}}.
func errorMessage(raw string) string {
	var body struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(raw), &body) != nil {
		return ""
	}
	return body.Error.Message
}

// retryAfter reads the retry-after header: seconds, or an HTTP date.
func retryAfter(h http.Header) time.Duration {
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
	return strings.ReplaceAll(s, m.key, "[redacted]")
}
