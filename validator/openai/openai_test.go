package openai_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/validator/openai"
)

const (
	testKey   = "sk-proj-TESTKEY-never-shown-0123456789abcdef"
	testModel = "gpt-5-mini"
	// answeredModel is the dated name the API reports for the alias.
	answeredModel = "gpt-5-mini-2025-08-07"
)

var verdictSchema = []byte(`{"type":"object","properties":{"allow":{"type":"boolean"},"reasoning":{"type":"string"},"whatWouldAuthorize":{"type":"string"},"confidence":{"type":"number"}},"required":["allow","reasoning","whatWouldAuthorize","confidence"],"additionalProperties":false}`)

func testPrompt() portcullis.ModelPrompt {
	return portcullis.ModelPrompt{
		System:    "You judge one proposed action against the rules.",
		User:      "<rules>no pushes to main</rules>\n<action>git push origin main</action>",
		Schema:    verdictSchema,
		MaxTokens: 300,
	}
}

// fake is a Chat Completions API: it records each request and answers with
// a recorded-looking response.
type fake struct {
	t      *testing.T
	status int
	header http.Header
	body   string
	hang   bool
	// arrived, when set, is closed once a held (hang) request has been
	// recorded.
	arrived chan struct{}

	mu       sync.Mutex
	once     sync.Once
	requests []*recorded
}

type recorded struct {
	method, path string
	header       http.Header
	body         map[string]any
}

func (f *fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		f.t.Errorf("read request body: %v", err)
	}
	rec := &recorded{method: r.Method, path: r.URL.Path, header: r.Header.Clone()}
	if err := json.Unmarshal(raw, &rec.body); err != nil {
		f.t.Errorf("request body is not JSON: %v\n%s", err, raw)
	}
	f.mu.Lock()
	f.requests = append(f.requests, rec)
	f.mu.Unlock()
	if f.hang {
		if f.arrived != nil {
			f.once.Do(func() { close(f.arrived) })
		}
		<-r.Context().Done()
		return
	}
	for k, vs := range f.header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json")
	}
	w.Header().Set("x-request-id", "req_6f1b0c1d2e3f4a5b6c7d8e9f0a1b2c3d")
	status := f.status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	if _, err := io.WriteString(w, f.body); err != nil {
		f.t.Errorf("write response: %v", err)
	}
}

func (f *fake) only(t *testing.T) *recorded {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.requests) != 1 {
		t.Fatalf("the server got %d requests; want exactly 1 (the SDK must not retry)", len(f.requests))
	}
	return f.requests[0]
}

// serve starts f and returns a Model for it at BaseURL <server>/v1, as for
// an OpenAI-compatible server.
func serve(t *testing.T, f *fake) (*openai.Model, *fake) {
	t.Helper()
	f.t = t
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	m, err := openai.New(openai.Options{
		Model:      testModel,
		APIKey:     testKey,
		BaseURL:    srv.URL + "/v1",
		Timeout:    5 * time.Second,
		HTTPClient: srv.Client(),
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m, f
}

// redirect sends every request, whatever its URL, to the test server: it
// lets a Model with OpenAI's default base URL talk to a fake.
type redirect struct{ to *url.URL }

func (r redirect) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("X-Original-Host", req.URL.Host)
	req.URL.Scheme, req.URL.Host = r.to.Scheme, r.to.Host
	return http.DefaultTransport.RoundTrip(req)
}

func completion(finishReason, message string) string {
	return `{"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion","created":1741570283,"model":"` + answeredModel + `",` +
		`"choices":[{"index":0,"message":` + message + `,"logprobs":null,"finish_reason":"` + finishReason + `"}],` +
		`"usage":{"prompt_tokens":412,"completion_tokens":87,"total_tokens":499,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},` +
		`"service_tier":"default","system_fingerprint":"fp_06737a9306"}`
}

func content(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return `{"role":"assistant","content":` + string(b) + `,"refusal":null,"annotations":[]}`
}

const verdictJSON = `{"allow":false,"reasoning":"The rules forbid pushes to main.","whatWouldAuthorize":"The user asks for this push.","confidence":0.93}`

func wantBody(maxTokensField string) map[string]any {
	var schema any
	if err := json.Unmarshal(verdictSchema, &schema); err != nil {
		panic(err)
	}
	return map[string]any{
		"model":        testModel,
		maxTokensField: float64(300),
		"messages": []any{
			map[string]any{"role": "system", "content": testPrompt().System},
			map[string]any{"role": "user", "content": testPrompt().User},
		},
		"response_format": map[string]any{
			"type": "json_schema",
			"json_schema": map[string]any{
				"name":   "verdict",
				"strict": true,
				"schema": schema,
			},
		},
	}
}

func TestAskSendsChatCompletionsRequest(t *testing.T) {
	t.Parallel()
	m, f := serve(t, &fake{body: completion("stop", content(verdictJSON))})
	if _, err := m.Ask(context.Background(), testPrompt()); err != nil {
		t.Fatalf("Ask: %v", err)
	}
	req := f.only(t)
	if req.method != http.MethodPost || req.path != "/v1/chat/completions" {
		t.Errorf("request = %s %s; want POST /v1/chat/completions", req.method, req.path)
	}
	if got, want := req.header.Get("Authorization"), "Bearer "+testKey; got != want {
		t.Errorf("header Authorization = %q; want %q", got, want)
	}
	if got := req.header.Get("Content-Type"); got != "application/json" {
		t.Errorf("header Content-Type = %q; want application/json", got)
	}
	// A compatible server gets max_tokens, which they all know.
	if diff := cmp.Diff(wantBody("max_tokens"), req.body); diff != "" {
		t.Errorf("request body mismatch (-want +got):\n%s", diff)
	}
}

func TestAskOpenAIDefaultBaseURL(t *testing.T) {
	t.Parallel()
	f := &fake{t: t, body: completion("stop", content(verdictJSON))}
	srv := httptest.NewServer(f)
	defer srv.Close()
	to, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	m, err := openai.New(openai.Options{Model: testModel, APIKey: testKey, HTTPClient: &http.Client{Transport: redirect{to}}})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if _, err := m.Ask(context.Background(), testPrompt()); err != nil {
		t.Fatalf("Ask: %v", err)
	}
	req := f.only(t)
	if host := req.header.Get("X-Original-Host"); host != "api.openai.com" || req.path != "/v1/chat/completions" {
		t.Errorf("request went to %s%s; want api.openai.com/v1/chat/completions", host, req.path)
	}
	// OpenAI's own API gets max_completion_tokens: its reasoning models
	// reject max_tokens.
	if diff := cmp.Diff(wantBody("max_completion_tokens"), req.body); diff != "" {
		t.Errorf("request body mismatch (-want +got):\n%s", diff)
	}
}

func TestAskMaxTokens(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		options int
		prompt  int
		want    float64
	}{
		{"default", 0, 0, 1024},
		{"options", 512, 0, 512},
		{"prompt wins", 512, 200, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fake{t: t, body: completion("stop", content(verdictJSON))}
			srv := httptest.NewServer(f)
			defer srv.Close()
			m, err := openai.New(openai.Options{Model: testModel, BaseURL: srv.URL + "/v1", MaxTokens: tt.options})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			p := testPrompt()
			p.MaxTokens = tt.prompt
			if _, err := m.Ask(context.Background(), p); err != nil {
				t.Fatalf("Ask: %v", err)
			}
			if got := f.only(t).body["max_tokens"]; got != tt.want {
				t.Errorf("max_tokens = %v; want %v", got, tt.want)
			}
		})
	}
}

func TestAskWithoutSchema(t *testing.T) {
	t.Parallel()
	m, f := serve(t, &fake{body: completion("stop", content(`{"allow":false}`))})
	p := testPrompt()
	p.Schema = nil
	got, err := m.Ask(context.Background(), p)
	if err != nil {
		t.Fatalf("Ask: %v", err)
	}
	if v, ok := f.only(t).body["response_format"]; ok {
		t.Errorf("request has response_format = %v; want none without a schema", v)
	}
	want := portcullis.ModelAnswer{Text: `{"allow":false}`, Model: answeredModel}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Ask mismatch (-want +got):\n%s", diff)
	}
}

func TestAskAnswers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		body string
		want portcullis.ModelAnswer
	}{{
		name: "structured",
		body: completion("stop", content(verdictJSON)),
		want: portcullis.ModelAnswer{Text: verdictJSON, Structured: true, Model: answeredModel},
	}, {
		name: "truncated",
		body: completion("length", content(`{"allow":false,"reasoning":"The rules forb`)),
		want: portcullis.ModelAnswer{Text: `{"allow":false,"reasoning":"The rules forb`, Structured: true, Truncated: true, Model: answeredModel},
	}, {
		name: "refusal",
		body: completion("stop", `{"role":"assistant","content":null,"refusal":"I'm sorry, I can't assist with that request.","annotations":[]}`),
		want: portcullis.ModelAnswer{Structured: true, Refused: true, Model: answeredModel},
	}, {
		name: "content filter",
		body: completion("content_filter", `{"role":"assistant","content":"","refusal":null}`),
		want: portcullis.ModelAnswer{Structured: true, Refused: true, Model: answeredModel},
	}, {
		// ollama's answer: fewer fields, no refusal key.
		name: "ollama",
		body: `{"id":"chatcmpl-311","object":"chat.completion","created":1754300000,"model":"llama3.1:8b","system_fingerprint":"fp_ollama","choices":[{"index":0,"message":{"role":"assistant","content":"{\"allow\": true}"},"finish_reason":"stop"}],"usage":{"prompt_tokens":412,"completion_tokens":9,"total_tokens":421}}`,
		want: portcullis.ModelAnswer{Text: `{"allow": true}`, Structured: true, Model: "llama3.1:8b"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, _ := serve(t, &fake{body: tt.body})
			got, err := m.Ask(context.Background(), testPrompt())
			if err != nil {
				t.Fatalf("Ask(%s): %v", tt.name, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Ask(%s) mismatch (-want +got):\n%s", tt.name, diff)
			}
		})
	}
}

func apiError(msg, typ, code string) string {
	c := "null"
	if code != "" {
		c = `"` + code + `"`
	}
	return `{"error":{"message":"` + msg + `","type":"` + typ + `","param":null,"code":` + c + `}}`
}

func TestAskErrors(t *testing.T) {
	t.Parallel()
	rateLimit := http.Header{
		"Retry-After":                    {"20"},
		"X-Ratelimit-Limit-Requests":     {"3"},
		"X-Ratelimit-Remaining-Requests": {"0"},
		"X-Ratelimit-Reset-Requests":     {"20s"},
		"X-Ratelimit-Limit-Tokens":       {"40000"},
		"X-Ratelimit-Remaining-Tokens":   {"39500"},
	}
	tests := []struct {
		name       string
		status     int
		header     http.Header
		body       string
		retryable  bool
		typ, code  string
		retryAfter time.Duration
	}{
		{"400", 400, nil, apiError("Invalid schema for response_format 'verdict': 'additionalProperties' is required to be supplied and to be false.", "invalid_request_error", ""), false, "invalid_request_error", "", 0},
		{"401", 401, nil, apiError("Incorrect API key provided: sk-proj-****...cdef. You can find your API key at https://platform.openai.com/account/api-keys.", "invalid_request_error", "invalid_api_key"), false, "invalid_request_error", "invalid_api_key", 0},
		{"401 echoing the key", 401, nil, apiError("Incorrect API key provided: "+testKey, "invalid_request_error", "invalid_api_key"), false, "invalid_request_error", "invalid_api_key", 0},
		{"404 ollama", 404, nil, apiError(`model \"gpt-5-mini\" not found, try pulling it first`, "api_error", ""), false, "api_error", "", 0},
		{"400 vLLM", 400, nil, `{"object":"error","message":"The model gpt-5-mini does not exist.","type":"NotFoundError","param":null,"code":404}`, false, "", "", 0},
		{"429", 429, rateLimit, apiError("Rate limit reached for gpt-5-mini in organization org-abc on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s.", "requests", "rate_limit_exceeded"), true, "requests", "rate_limit_exceeded", 20 * time.Second},
		{"429 ms", 429, http.Header{"Retry-After-Ms": {"1500"}, "Retry-After": {"2"}}, apiError("You exceeded your current quota.", "insufficient_quota", "insufficient_quota"), true, "insufficient_quota", "insufficient_quota", 1500 * time.Millisecond},
		{"500", 500, nil, apiError("The server had an error while processing your request. Sorry about that!", "server_error", ""), true, "server_error", "", 0},
		{"503 html", 503, http.Header{"Content-Type": {"text/html"}}, "<html><body>503 Service Unavailable</body></html>", true, "", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, f := serve(t, &fake{status: tt.status, header: tt.header, body: tt.body})
			_, err := m.Ask(context.Background(), testPrompt())
			if err == nil {
				t.Fatalf("Ask(%s) = nil error; want an error", tt.name)
			}
			f.only(t)
			noKey(t, err)
			var e *openai.Error
			if !errors.As(err, &e) {
				t.Fatalf("Ask(%s) = %T %v; want *openai.Error", tt.name, err, err)
			}
			if e.Retryable() != tt.retryable || e.StatusCode != tt.status || e.Type != tt.typ || e.Code != tt.code || e.RetryAfter != tt.retryAfter {
				t.Errorf("Ask(%s) = {status %d, type %q, code %q, retryable %v, retry after %v}; want {%d, %q, %q, %v, %v}",
					tt.name, e.StatusCode, e.Type, e.Code, e.Retryable(), e.RetryAfter, tt.status, tt.typ, tt.code, tt.retryable, tt.retryAfter)
			}
			if !strings.Contains(err.Error(), testModel) || !strings.Contains(err.Error(), http.StatusText(tt.status)) {
				t.Errorf("Ask(%s) error %q; want it to name the model and the status", tt.name, err)
			}
		})
	}
}

// noKey fails when the error's message, or that of anything it wraps,
// contains the API key.
func noKey(t *testing.T, err error) {
	t.Helper()
	for e := err; e != nil; e = errors.Unwrap(e) {
		if strings.Contains(e.Error(), testKey) {
			t.Errorf("error %q contains the API key", e)
		}
	}
}

func TestAskTimeout(t *testing.T) {
	t.Parallel()
	f := &fake{t: t, hang: true}
	srv := httptest.NewServer(f)
	defer srv.Close()
	m, err := openai.New(openai.Options{Model: testModel, APIKey: testKey, BaseURL: srv.URL + "/v1", Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	// The caller's context allows much longer; Options.Timeout must cut in.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = m.Ask(ctx, testPrompt())
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Ask against a hung server = %v; want context.DeadlineExceeded", err)
	}
	noKey(t, err)
	var e *openai.Error
	if !errors.As(err, &e) || !e.Retryable() {
		t.Errorf("Ask against a hung server = %v; want a retryable *openai.Error", err)
	}
	f.only(t)
}

func TestAskContextDeadline(t *testing.T) {
	t.Parallel()
	arrived := make(chan struct{})
	m, f := serve(t, &fake{hang: true, arrived: arrived})
	// The deadline passes while the server holds the request, however
	// slow the machine: a timer could fire before the request is sent.
	_, err := m.Ask(expiresWhen(arrived), testPrompt())
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Ask with an expiring context = %v; want context.DeadlineExceeded", err)
	}
	noKey(t, err)
	var e *openai.Error
	if !errors.As(err, &e) || e.Retryable() {
		t.Errorf("Ask with an expired context = %v; want a *openai.Error that is not retryable (the caller gave up)", err)
	}
	f.only(t)
}

func TestAskMalformedResponse(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		`{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"{\"allow\":`,
		`not json`,
		`{"id":"chatcmpl-1","object":"chat.completion","created":1741570283,"model":"gpt-5-mini","choices":[]}`,
	} {
		m, _ := serve(t, &fake{body: body})
		got, err := m.Ask(context.Background(), testPrompt())
		if err == nil {
			t.Errorf("Ask(%q) = %+v, nil error; want an error", body, got)
			continue
		}
		noKey(t, err)
		var e *openai.Error
		if !errors.As(err, &e) || e.Retryable() {
			t.Errorf("Ask(%q) = %v; want a *openai.Error that is not retryable", body, err)
		}
	}
}

func TestAskConnectionRefused(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	base := srv.URL + "/v1"
	srv.Close()
	m, err := openai.New(openai.Options{Model: testModel, APIKey: testKey, BaseURL: base})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	_, err = m.Ask(context.Background(), testPrompt())
	var e *openai.Error
	if !errors.As(err, &e) || !e.Retryable() || e.StatusCode != 0 {
		t.Fatalf("Ask against a closed port = %v; want a retryable *openai.Error without status", err)
	}
	noKey(t, err)
}

func TestAskBadPrompt(t *testing.T) {
	t.Parallel()
	m, f := serve(t, &fake{body: completion("stop", content(verdictJSON))})
	for name, p := range map[string]portcullis.ModelPrompt{
		"empty user":        {System: "s", Schema: verdictSchema},
		"schema not object": {System: "s", User: "u", Schema: []byte(`["allow"]`)},
		"schema not JSON":   {System: "s", User: "u", Schema: []byte(`{allow`)},
	} {
		if _, err := m.Ask(context.Background(), p); err == nil {
			t.Errorf("Ask(%s) = nil error; want an error", name)
		}
	}
	if len(f.requests) != 0 {
		t.Errorf("the server got %d requests for invalid prompts; want none", len(f.requests))
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opts openai.Options
		want string // in the error; empty for success
	}{
		{"ok", openai.Options{Model: testModel, APIKey: testKey}, ""},
		{"local server without key", openai.Options{Model: testModel, BaseURL: "http://localhost:11434/v1"}, ""},
		{"no model", openai.Options{APIKey: testKey}, "model"},
		{"no key for OpenAI", openai.Options{Model: testModel}, "API key"},
		{"bad base URL", openai.Options{Model: testModel, BaseURL: "localhost:11434"}, "base URL"},
		{"negative timeout", openai.Options{Model: testModel, APIKey: testKey, Timeout: -time.Second}, "timeout"},
		{"negative max tokens", openai.Options{Model: testModel, APIKey: testKey, MaxTokens: -1}, "max tokens"},
	}
	for _, tt := range tests {
		m, err := openai.New(tt.opts)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("New(%s) = %v; want no error", tt.name, err)
		case tt.want == "" && m.Name() != "openai/"+testModel:
			t.Errorf("New(%s).Name() = %q; want %q", tt.name, m.Name(), "openai/"+testModel)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("New(%s) = %v; want an error about %s", tt.name, err, tt.want)
		}
		if err != nil {
			noKey(t, err)
		}
	}
}

// TestIgnoresEnvironment: a local server without a key gets no key, even
// when OPENAI_API_KEY is set; nothing comes from OPENAI_* variables, and
// nothing is logged.
func TestIgnoresEnvironment(t *testing.T) {
	const envKey = "sk-proj-from-the-environment"
	t.Setenv("OPENAI_API_KEY", envKey)
	t.Setenv("OPENAI_ADMIN_KEY", "sk-admin-from-the-environment")
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
	t.Setenv("OPENAI_ORG_ID", "org-from-the-environment")
	t.Setenv("OPENAI_PROJECT_ID", "proj-from-the-environment")
	var logs bytes.Buffer
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	defer log.SetOutput(log.Writer())
	log.SetOutput(&logs)

	f := &fake{t: t, body: completion("stop", content(verdictJSON))}
	srv := httptest.NewServer(f)
	defer srv.Close()
	m, err := openai.New(openai.Options{Model: testModel, BaseURL: srv.URL + "/v1"})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if _, err := m.Ask(context.Background(), testPrompt()); err != nil {
		t.Fatalf("Ask: %v", err)
	}
	req := f.only(t)
	for _, h := range []string{"Authorization", "OpenAI-Organization", "OpenAI-Project"} {
		if got := req.header.Get(h); got != "" {
			t.Errorf("header %s = %q; want none (nothing from the environment)", h, got)
		}
	}

	// With a key, a 401 that echoes it: neither the error nor the logs show it.
	f401 := &fake{t: t, status: 401, body: apiError("Incorrect API key provided: "+testKey, "invalid_request_error", "invalid_api_key")}
	srv401 := httptest.NewServer(f401)
	defer srv401.Close()
	m, err = openai.New(openai.Options{Model: testModel, APIKey: testKey, BaseURL: srv401.URL + "/v1"})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	_, err = m.Ask(context.Background(), testPrompt())
	if err == nil {
		t.Fatal("Ask = nil error; want the 401")
	}
	noKey(t, err)
	if got := f401.only(t).header.Get("Authorization"); got != "Bearer "+testKey {
		t.Errorf("Authorization = %q; want the key from Options", got)
	}
	if strings.Contains(logs.String(), testKey) || strings.Contains(logs.String(), envKey) {
		t.Errorf("the logs contain an API key:\n%s", logs.String())
	}
}

// expiresWhen is a context whose deadline passes when done is closed.
type expiresWhen chan struct{}

func (expiresWhen) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c expiresWhen) Done() <-chan struct{}     { return c }
func (expiresWhen) Value(any) any               { return nil }

func (c expiresWhen) Err() error {
	select {
	case <-c:
		return context.DeadlineExceeded
	default:
		return nil
	}
}
