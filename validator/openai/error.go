package openai

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/portcullis/portcullis/validator/internal/failure"
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

// HTTPStatus returns StatusCode: the validator tells the agent only this of
// a failed request, never the provider's text.
func (e *Error) HTTPStatus() int { return e.StatusCode }

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
			e.RetryAfter = failure.RetryAfter(res.Header)
		}
		var text string
		if apiErr != nil {
			e.StatusCode = apiErr.StatusCode
			e.Type, e.Code, text = failure.Cut(apiErr.Type), failure.Cut(apiErr.Code), failure.Cut(apiErr.Message)
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
	msg, retryable, cause := failure.Unanswered(ctx, err)
	return &Error{msg: m.scrub(prefix + msg), retryable: retryable, cause: cause}
}

// scrub removes the API key from a message.
func (m *Model) scrub(s string) string { return failure.Scrub(s, m.key) }
