// Package remote runs a model provider in a process of its own, the program
// portcullis-provider, and speaks to it in JSON lines over its standard
// input and output. Model is the gateway's side: a portcullis.Model that
// starts the program when first asked and passes each question to it.
// Serve is the program's side: the loop that answers the questions with
// the provider it was told to build.
//
// Why a process: Go runs the initialisation of every package linked into a
// binary at start, whatever the configuration, and the official LLM SDKs'
// initialisation keeps megabytes of the binary resident in every gateway,
// validator or not (docs/ARCHITECTURE.md, "The provider process"). Linked
// only into portcullis-provider, they cost nothing where no policy
// configures them.
//
// The protocol, one JSON object a line:
//
//   - gateway → program, first: the Config (protocol version, provider,
//     model, base URL, timeout) and the API key. The key travels only on
//     this pipe, which no other process can read: never in the program's
//     arguments or environment, which every process of the user can read
//     (/proc/PID/cmdline, /proc/PID/environ).
//   - program → gateway, first: a hello with the protocol version and the
//     model's name, or an error when the provider cannot be built; then it
//     exits.
//   - gateway → program: {"id":N,"prompt":{...}} asks; {"id":N,"cancel":true}
//     abandons a question whose caller has gone. Questions are answered
//     concurrently, in any order.
//   - program → gateway: {"id":N,"answer":{...}} or {"id":N,"error":{...}},
//     the error with what the validator relies on: the message (scrubbed of
//     the key by the provider), whether a retry may succeed, the HTTP
//     status, and whether it was the request's own timeout or a cancel.
//
// The end of the program's standard input ends it: the gateway closes it on
// exit, and the kernel closes it when the gateway dies, however it dies.
package remote

import (
	"context"
	"encoding/json"
	"time"

	"github.com/portcullis/portcullis"
)

// Program is the name of the provider program.
const Program = "portcullis-provider"

// Install says how to install the program.
const Install = "go install github.com/portcullis/portcullis/cmd/" + Program + "@latest (from a clone: go install ./cmd/" + Program + ")"

// Protocol is the version of the protocol: a program that speaks another
// one is refused, naming both.
const Protocol = 1

// Config is what the program builds: the first line it reads.
type Config struct {
	Protocol int    `json:"protocol"`
	Provider string `json:"provider"`
	Model    string `json:"model"`
	BaseURL  string `json:"baseURL,omitempty"`
	// Timeout bounds each question, on top of the caller's context.
	Timeout time.Duration `json:"timeout,omitempty"`
}

// start is the gateway's first line: the Config and the API key.
type start struct {
	Config
	APIKey string `json:"apiKey,omitempty"`
}

// hello is the program's first line.
type hello struct {
	Protocol int    `json:"protocol"`
	Name     string `json:"name,omitempty"`
	Error    string `json:"error,omitempty"`
}

type request struct {
	ID     uint64  `json:"id"`
	Prompt *prompt `json:"prompt,omitempty"`
	Cancel bool    `json:"cancel,omitempty"`
}

type prompt struct {
	System    string          `json:"system,omitempty"`
	User      string          `json:"user"`
	Schema    json.RawMessage `json:"schema,omitempty"`
	MaxTokens int             `json:"maxTokens,omitempty"`
}

type response struct {
	ID     uint64     `json:"id"`
	Answer *answer    `json:"answer,omitempty"`
	Error  *wireError `json:"error,omitempty"`
}

type answer struct {
	Text       string   `json:"text"`
	Structured bool     `json:"structured,omitempty"`
	Others     []string `json:"others,omitempty"`
	Refused    bool     `json:"refused,omitempty"`
	Truncated  bool     `json:"truncated,omitempty"`
	Model      string   `json:"model,omitempty"`
}

type wireError struct {
	Message    string        `json:"message"`
	Retryable  bool          `json:"retryable,omitempty"`
	StatusCode int           `json:"status,omitempty"`
	Type       string        `json:"type,omitempty"`
	Code       string        `json:"code,omitempty"`
	RequestID  string        `json:"requestId,omitempty"`
	RetryAfter time.Duration `json:"retryAfter,omitempty"`
	// Cause is "deadline" when the request's own timeout expired and
	// "canceled" when it was abandoned: Error unwraps to the context error.
	Cause string `json:"cause,omitempty"`
}

func toPrompt(p portcullis.ModelPrompt) *prompt {
	var schema json.RawMessage
	if len(p.Schema) > 0 {
		schema = json.RawMessage(p.Schema)
	}
	return &prompt{System: p.System, User: p.User, Schema: schema, MaxTokens: p.MaxTokens}
}

func (p *prompt) model() portcullis.ModelPrompt {
	return portcullis.ModelPrompt{System: p.System, User: p.User, Schema: []byte(p.Schema), MaxTokens: p.MaxTokens}
}

func toAnswer(a portcullis.ModelAnswer) *answer {
	return &answer{Text: a.Text, Structured: a.Structured, Others: a.Others, Refused: a.Refused, Truncated: a.Truncated, Model: a.Model}
}

func (a *answer) model() portcullis.ModelAnswer {
	return portcullis.ModelAnswer{Text: a.Text, Structured: a.Structured, Others: a.Others, Refused: a.Refused, Truncated: a.Truncated, Model: a.Model}
}

// Error is a question the provider program could not answer: the
// provider's own error, as its Error carried it across, or the program
// failing (it could not start, or it exited). Its message never contains
// the API key.
type Error struct {
	// StatusCode is the HTTP status; zero when no answer came.
	StatusCode int
	// Type and Code are the API's error type and code, when it said.
	Type, Code string
	// RequestID is the API's request id, for support.
	RequestID string
	// RetryAfter is how long the API asked the caller to wait.
	RetryAfter time.Duration

	msg       string
	retryable bool
	cause     error
}

func (e *Error) Error() string { return e.msg }

// HTTPStatus returns StatusCode: the validator tells the agent only this of
// a failed request, never the provider's text.
func (e *Error) HTTPStatus() int { return e.StatusCode }

// Retryable reports whether the same question may succeed if asked again:
// as the provider said, and true when the program exited under it.
func (e *Error) Retryable() bool { return e.retryable }

// Unwrap returns context.DeadlineExceeded when the request's own timeout
// expired, the context's error when it was abandoned, nothing otherwise.
func (e *Error) Unwrap() error { return e.cause }

func (w *wireError) err() *Error {
	e := &Error{StatusCode: w.StatusCode, Type: w.Type, Code: w.Code, RequestID: w.RequestID, RetryAfter: w.RetryAfter, msg: w.Message, retryable: w.Retryable}
	switch w.Cause {
	case "deadline":
		e.cause = context.DeadlineExceeded
	case "canceled":
		e.cause = context.Canceled
	}
	return e
}
