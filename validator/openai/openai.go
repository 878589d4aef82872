// Package openai is the validator's transport to an OpenAI Chat Completions
// API, through the official SDK (github.com/openai/openai-go/v3): OpenAI
// itself, or any OpenAI-compatible server (ollama, vLLM, llama.cpp server)
// at a base URL. It implements portcullis.Model by sending the prompt it is
// given and returning the model's raw answer.
//
// It must not judge: building the prompt and parsing the verdict strictly
// are the validator core's work, so an answer is returned as it came. It must
// not retry on its own (the SDK's retries are off; the core retries errors
// whose Retryable method says so), and it must never log or return the API
// key: error messages are scrubbed of it. It reads nothing from the
// environment (no OPENAI_* variable): the caller passes the key in, so a key
// meant for OpenAI never reaches a local server.
package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/portcullis/portcullis"
)

// SchemaName is the name of the verdict's JSON schema in response_format.
const SchemaName = "verdict"

// DefaultMaxTokens bounds the answer when neither the prompt nor the Options
// say otherwise.
const DefaultMaxTokens = 1024

// defaultBaseURL is OpenAI's API; requests go to BaseURL + "chat/completions".
const defaultBaseURL = "https://api.openai.com/v1/"

// Options configure a Model.
type Options struct {
	// Model is the model to ask, e.g. "gpt-5-mini" or "llama3.1:8b".
	// Required.
	Model string
	// APIKey authenticates the requests (Authorization: Bearer). Required
	// for OpenAI; may be empty when BaseURL names a local server that needs
	// none. The caller reads it from the environment variable named by the
	// policy's apiKeyEnv, or from a file; it never lives in the policy file.
	APIKey string
	// BaseURL replaces https://api.openai.com/v1/, for any OpenAI-compatible
	// server, e.g. http://localhost:11434/v1 (ollama) or
	// http://localhost:8000/v1 (vLLM, llama.cpp). The request goes to
	// BaseURL + "/chat/completions". Optional.
	BaseURL string
	// Timeout bounds each Ask, on top of the caller's context. Zero: only
	// the context bounds it.
	Timeout time.Duration
	// MaxTokens bounds the answer when the prompt does not; zero means
	// DefaultMaxTokens.
	MaxTokens int
	// HTTPClient sends the requests; nil means a plain http.Client.
	HTTPClient *http.Client
}

// Model asks a model over Chat Completions. It is safe for concurrent use.
type Model struct {
	model     string
	key       string
	timeout   time.Duration
	maxTokens int
	// completionTokens: bound the answer with max_completion_tokens, which
	// OpenAI's own API wants (its reasoning models reject max_tokens);
	// compatible servers get the older max_tokens, which they all know.
	completionTokens bool
	chat             openai.ChatCompletionService
}

var _ portcullis.Model = (*Model)(nil)

// New returns a Model for opts. It fails when the model is missing, the API
// key is missing for OpenAI's own API, or an option is invalid; the error
// never contains the key.
func New(opts Options) (*Model, error) {
	switch {
	case strings.TrimSpace(opts.Model) == "":
		return nil, errors.New("openai: no model given (set validator.model in the policy)")
	case opts.APIKey == "" && opts.BaseURL == "":
		return nil, errors.New("openai: no API key given (set the environment variable named by validator.apiKeyEnv, or validator.baseURL for a local server that needs no key)")
	case opts.Timeout < 0:
		return nil, fmt.Errorf("openai: negative timeout %v", opts.Timeout)
	case opts.MaxTokens < 0:
		return nil, fmt.Errorf("openai: negative max tokens %d", opts.MaxTokens)
	}
	base := defaultBaseURL
	if opts.BaseURL != "" {
		u, err := url.Parse(opts.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("openai: base URL %q is not an http or https URL", opts.BaseURL)
		}
		base = opts.BaseURL
	}
	client := opts.HTTPClient
	if client == nil {
		client = &http.Client{}
	}
	maxTokens := opts.MaxTokens
	if maxTokens == 0 {
		maxTokens = DefaultMaxTokens
	}
	return &Model{
		model:            opts.Model,
		key:              opts.APIKey,
		timeout:          opts.Timeout,
		maxTokens:        maxTokens,
		completionTokens: isOpenAI(base),
		// The service alone, not openai.NewClient: the client would read
		// OPENAI_API_KEY, OPENAI_BASE_URL and the like from the
		// environment, and could send a key to a server it is not for.
		chat: openai.NewChatCompletionService(
			option.WithBaseURL(base),
			option.WithAPIKey(opts.APIKey),
			option.WithHTTPClient(client),
			// The validator core retries, boundedly; the SDK must not.
			option.WithMaxRetries(0),
		),
	}, nil
}

func isOpenAI(base string) bool {
	u, err := url.Parse(base)
	return err == nil && u.Hostname() == "api.openai.com"
}

// Name returns "openai/" and the model, for telemetry.
func (m *Model) Name() string { return "openai/" + m.model }

// Ask sends p as one Chat Completions request: p.System as the system
// message, p.User as the user message and, when p.Schema is set, a strict
// json_schema response_format named "verdict". The first choice's content is
// the answer (Structured when a schema was sent). A request the server
// rejected or could not answer is an error; see Error for which are
// retryable.
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
	var res *http.Response
	completion, err := m.chat.New(reqCtx, params, option.WithResponseInto(&res))
	if err != nil {
		return portcullis.ModelAnswer{}, m.wrap(ctx, err, res)
	}
	if len(completion.Choices) == 0 {
		return portcullis.ModelAnswer{}, &Error{msg: "openai: " + m.model + ": malformed response: no choices"}
	}
	choice := completion.Choices[0]
	return portcullis.ModelAnswer{
		Text:       choice.Message.Content,
		Structured: len(p.Schema) > 0,
		Others:     others(completion.Choices),
		Refused:    choice.Message.Refusal != "" || choice.FinishReason == "content_filter",
		Truncated:  choice.FinishReason == "length",
		Model:      completion.Model,
	}, nil
}

// others returns what a response holds beside the first choice's content:
// the first choice's tool calls (none were offered) and every further
// choice (one was asked for), for the validator to refuse.
func others(choices []openai.ChatCompletionChoice) []string {
	var out []string
	for i, c := range choices {
		if i > 0 {
			out = append(out, c.Message.Content+c.Message.Refusal)
		}
		for _, call := range c.Message.ToolCalls {
			out = append(out, call.Function.Name+" "+call.Function.Arguments)
		}
	}
	return out
}

func (m *Model) params(p portcullis.ModelPrompt) (openai.ChatCompletionNewParams, error) {
	if p.User == "" {
		return openai.ChatCompletionNewParams{}, errors.New("openai: empty prompt")
	}
	maxTokens := p.MaxTokens
	if maxTokens <= 0 {
		maxTokens = m.maxTokens
	}
	params := openai.ChatCompletionNewParams{Model: m.model}
	if p.System != "" {
		params.Messages = append(params.Messages, openai.SystemMessage(p.System))
	}
	params.Messages = append(params.Messages, openai.UserMessage(p.User))
	if m.completionTokens {
		params.MaxCompletionTokens = openai.Int(int64(maxTokens))
	} else {
		params.MaxTokens = openai.Int(int64(maxTokens))
	}
	if len(p.Schema) > 0 {
		var obj map[string]any
		if err := json.Unmarshal(p.Schema, &obj); err != nil || obj == nil {
			return openai.ChatCompletionNewParams{}, errors.New("openai: the verdict schema is not a JSON object")
		}
		params.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{
			OfJSONSchema: &openai.ResponseFormatJSONSchemaParam{
				JSONSchema: openai.ResponseFormatJSONSchemaJSONSchemaParam{
					Name:   SchemaName,
					Strict: openai.Bool(true),
					Schema: json.RawMessage(p.Schema),
				},
			},
		}
	}
	return params, nil
}
