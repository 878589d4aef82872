package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/portcullis/portcullis/validator/internal/failure"
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

// HTTPStatus returns StatusCode: the validator tells the agent only this of
// a failed request, never the provider's text.
func (e *Error) HTTPStatus() int { return e.StatusCode }

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
			e.RetryAfter = failure.RetryAfter(apiErr.Response.Header)
		}
		var msg strings.Builder
		fmt.Fprintf(&msg, "%s%d %s", prefix, apiErr.StatusCode, statusText(apiErr.StatusCode))
		if e.Type != "" {
			fmt.Fprintf(&msg, ": %s", e.Type)
		}
		if text := errorMessage(apiErr.RawJSON()); text != "" {
			fmt.Fprintf(&msg, ": %s", failure.Cut(text))
		}
		if e.RequestID != "" {
			fmt.Fprintf(&msg, " (request-id %s)", e.RequestID)
		}
		e.msg = m.scrub(msg.String())
		return e
	}
	msg, retryable, cause := failure.Unanswered(ctx, err)
	return &Error{msg: m.scrub(prefix + msg), retryable: retryable, cause: cause}
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

// scrub removes the API key from a message.
func (m *Model) scrub(s string) string { return failure.Scrub(s, m.key) }
