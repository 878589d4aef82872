// Package anthropic is the validator's transport to the Anthropic Messages
// API, through the official SDK (github.com/anthropics/anthropic-sdk-go): it
// implements portcullis.Model by sending the prompt it is given and
// returning the model's raw answer.
//
// It must not judge: building the prompt and parsing the verdict strictly
// are the validator core's work, so an answer is returned as it came. It must
// not retry on its own (the SDK's retries are off; the core retries errors
// whose Retryable method says so), and it must never log or return the API
// key: error messages are scrubbed of it. It reads nothing from the
// environment; the caller passes the key in.
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
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/anthropics/anthropic-sdk-go/packages/param"

	"github.com/portcullis/portcullis"
)

// ToolName is the name of the one tool the model is made to call: its input
// is the verdict, shaped by the prompt's schema.
const ToolName = "record_verdict"

// DefaultMaxTokens bounds the answer when neither the prompt nor the Options
// say otherwise.
const DefaultMaxTokens = 1024

// Options configure a Model.
type Options struct {
	// Model is the model to ask, e.g. "claude-haiku-4-5". Required.
	Model string
	// APIKey authenticates the requests (sent as x-api-key). Required. The
	// caller reads it from the environment variable named by the policy's
	// apiKeyEnv, or from a file; it never lives in the policy file.
	APIKey string
	// BaseURL replaces https://api.anthropic.com/ (the request goes to
	// BaseURL + "v1/messages"). Optional.
	BaseURL string
	// Timeout bounds each Ask, on top of the caller's context. Zero: only
	// the context bounds it.
	Timeout time.Duration
	// MaxTokens bounds the answer when the prompt does not; zero means
	// DefaultMaxTokens.
	MaxTokens int
	// HTTPClient sends the requests; nil means the SDK's default.
	HTTPClient *http.Client
}

// Model asks an Anthropic model. It is safe for concurrent use.
type Model struct {
	model     string
	key       string
	timeout   time.Duration
	maxTokens int
	messages  anthropic.MessageService
}

var _ portcullis.Model = (*Model)(nil)

// New returns a Model for opts. It fails when the model or the API key is
// missing, or an option is invalid; the error never contains the key.
func New(opts Options) (*Model, error) {
	switch {
	case strings.TrimSpace(opts.Model) == "":
		return nil, errors.New("anthropic: no model given (set validator.model in the policy)")
	case opts.APIKey == "":
		return nil, errors.New("anthropic: no API key given (set the environment variable named by validator.apiKeyEnv)")
	case opts.Timeout < 0:
		return nil, fmt.Errorf("anthropic: negative timeout %v", opts.Timeout)
	case opts.MaxTokens < 0:
		return nil, fmt.Errorf("anthropic: negative max tokens %d", opts.MaxTokens)
	}
	ropts := []option.RequestOption{
		// The key comes from the caller alone: no ANTHROPIC_* variable,
		// profile or federation token of this process is picked up.
		option.WithoutEnvironmentDefaults(),
		option.WithAPIKey(opts.APIKey),
		// The validator core retries, boundedly; the SDK must not.
		option.WithMaxRetries(0),
	}
	if opts.BaseURL != "" {
		ropts = append(ropts, option.WithBaseURL(opts.BaseURL))
	}
	if opts.HTTPClient != nil {
		ropts = append(ropts, option.WithHTTPClient(opts.HTTPClient))
	}
	maxTokens := opts.MaxTokens
	if maxTokens == 0 {
		maxTokens = DefaultMaxTokens
	}
	return &Model{
		model:     opts.Model,
		key:       opts.APIKey,
		timeout:   opts.Timeout,
		maxTokens: maxTokens,
		// The Messages service alone, with the defaults NewClient gives it
		// (the production base URL, then ours). The whole client would
		// link every other service of the SDK into the binary.
		messages: anthropic.NewMessageService(append([]option.RequestOption{option.WithEnvironmentProduction()}, ropts...)...),
	}, nil
}

// Name returns "anthropic/" and the model, for telemetry.
func (m *Model) Name() string { return "anthropic/" + m.model }

// Ask sends p as one Messages API request: p.System as the system prompt,
// p.User as the one user message and, when p.Schema is set, a single tool
// record_verdict with p.Schema as its input schema, which the model is made
// to call. The tool call's input is the answer (Structured); without one,
// the text blocks are. A request the provider rejected or could not answer
// is an error; see Error for which are retryable.
func (m *Model) Ask(ctx context.Context, p portcullis.ModelPrompt) (portcullis.ModelAnswer, error) {
	params, err := m.params(p)
	if err != nil {
		return portcullis.ModelAnswer{}, err
	}
	reqCtx := ctx
	if m.timeout > 0 {
		var cancel context.CancelFunc
		reqCtx, cancel = context.WithTimeout(ctx, m.timeout)
		defer cancel()
	}
	msg, err := m.messages.New(reqCtx, params)
	if err != nil {
		return portcullis.ModelAnswer{}, m.wrap(ctx, err)
	}
	return answer(msg, len(p.Schema) > 0), nil
}

func (m *Model) params(p portcullis.ModelPrompt) (anthropic.MessageNewParams, error) {
	if p.User == "" {
		return anthropic.MessageNewParams{}, errors.New("anthropic: empty prompt")
	}
	maxTokens := p.MaxTokens
	if maxTokens <= 0 {
		maxTokens = m.maxTokens
	}
	params := anthropic.MessageNewParams{
		Model:     anthropic.Model(m.model),
		MaxTokens: int64(maxTokens),
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(p.User))},
	}
	if p.System != "" {
		params.System = []anthropic.TextBlockParam{{Text: p.System}}
	}
	if len(p.Schema) > 0 {
		var obj map[string]any
		if err := json.Unmarshal(p.Schema, &obj); err != nil || obj == nil {
			return anthropic.MessageNewParams{}, errors.New("anthropic: the verdict schema is not a JSON object")
		}
		var schema anthropic.ToolInputSchemaParam
		param.SetJSON(p.Schema, &schema)
		params.Tools = []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{
			Name:        ToolName,
			Description: anthropic.String("Record the verdict on the proposed action."),
			InputSchema: schema,
		}}}
		choice := anthropic.ToolChoiceParamOfTool(ToolName)
		choice.OfTool.DisableParallelToolUse = anthropic.Bool(true)
		params.ToolChoice = choice
	}
	return params, nil
}

// answer turns a response into the model's raw answer, without judging it:
// the first record_verdict call is the answer; every other tool call, and
// the text beside a tool call, are Others, for the validator to refuse.
// Without a tool call the text blocks are the answer.
func answer(msg *anthropic.Message, schema bool) portcullis.ModelAnswer {
	a := portcullis.ModelAnswer{
		Model:     string(msg.Model),
		Truncated: msg.StopReason == anthropic.StopReasonMaxTokens,
		Refused:   msg.StopReason == anthropic.StopReasonRefusal,
	}
	var (
		texts []string
		calls []string
	)
	for _, block := range msg.Content {
		switch block.Type {
		case "tool_use":
			if schema && block.Name == ToolName && !a.Structured {
				a.Text = string(block.Input)
				a.Structured = true
				continue
			}
			calls = append(calls, block.Name+" "+string(block.Input))
		case "text":
			texts = append(texts, block.Text)
		}
	}
	if !a.Structured {
		a.Text = strings.Join(texts, "")
		if len(calls) > 0 {
			a.Others = calls
		}
		return a
	}
	if others := append(calls, texts...); len(others) > 0 {
		a.Others = others
	}
	return a
}
