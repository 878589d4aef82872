package anthropic_test

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
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/validator/anthropic"
)

const (
	testKey   = "sk-ant-api03-TESTKEY-never-shown-0123456789"
	testModel = "claude-haiku-4-5"
	// answeredModel is the dated name the API reports for the alias.
	answeredModel = "claude-haiku-4-5-20251001"
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

// fake is an Anthropic Messages API: it records each request and answers
// with a recorded-looking response.
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
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("request-id", "req_011CSHoEeqs5C35K2UUqR7Fy")
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

func serve(t *testing.T, f *fake) (*anthropic.Model, *fake) {
	t.Helper()
	f.t = t
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	m, err := anthropic.New(anthropic.Options{
		Model:      testModel,
		APIKey:     testKey,
		BaseURL:    srv.URL,
		Timeout:    5 * time.Second,
		HTTPClient: srv.Client(),
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m, f
}

func message(stopReason string, content ...string) string {
	return `{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","model":"` + answeredModel + `",` +
		`"content":[` + strings.Join(content, ",") + `],"stop_reason":"` + stopReason + `","stop_sequence":null,` +
		`"usage":{"input_tokens":412,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":87,"service_tier":"standard"}}`
}

const (
	verdictInput = `{"allow":false,"reasoning":"The rules forbid pushes to main.","whatWouldAuthorize":"The user asks for this push.","confidence":0.93}`
	toolUse      = `{"type":"tool_use","id":"toolu_01A09q90qw90lq917835lq9","name":"record_verdict","input":` + verdictInput + `}`
)

func TestAskSendsMessagesRequest(t *testing.T) {
	t.Parallel()
	m, f := serve(t, &fake{body: message("tool_use", toolUse)})
	if _, err := m.Ask(context.Background(), testPrompt()); err != nil {
		t.Fatalf("Ask: %v", err)
	}
	req := f.only(t)
	if req.method != http.MethodPost || req.path != "/v1/messages" {
		t.Errorf("request = %s %s; want POST /v1/messages", req.method, req.path)
	}
	for k, want := range map[string]string{
		"X-Api-Key":         testKey,
		"Anthropic-Version": "2023-06-01",
		"Content-Type":      "application/json",
	} {
		if got := req.header.Get(k); got != want {
			t.Errorf("header %s = %q; want %q", k, got, want)
		}
	}
	if got := req.header.Get("Authorization"); got != "" {
		t.Errorf("header Authorization = %q; want none (the key goes in x-api-key)", got)
	}
	var schema any
	if err := json.Unmarshal(verdictSchema, &schema); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"model":      testModel,
		"max_tokens": float64(300),
		"system":     []any{map[string]any{"type": "text", "text": testPrompt().System}},
		"messages": []any{map[string]any{
			"role":    "user",
			"content": []any{map[string]any{"type": "text", "text": testPrompt().User}},
		}},
		"tools": []any{map[string]any{
			"name":         "record_verdict",
			"description":  "Record the verdict on the proposed action.",
			"input_schema": schema,
		}},
		"tool_choice": map[string]any{"type": "tool", "name": "record_verdict", "disable_parallel_tool_use": true},
	}
	if diff := cmp.Diff(want, req.body); diff != "" {
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
			f := &fake{t: t, body: message("tool_use", toolUse)}
			srv := httptest.NewServer(f)
			defer srv.Close()
			m, err := anthropic.New(anthropic.Options{Model: testModel, APIKey: testKey, BaseURL: srv.URL, MaxTokens: tt.options})
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

func TestAskWithoutSchemaSendsNoTool(t *testing.T) {
	t.Parallel()
	m, f := serve(t, &fake{body: message("end_turn", `{"type":"text","text":"{\"allow\":false}"}`)})
	p := testPrompt()
	p.Schema = nil
	got, err := m.Ask(context.Background(), p)
	if err != nil {
		t.Fatalf("Ask: %v", err)
	}
	body := f.only(t).body
	for _, k := range []string{"tools", "tool_choice"} {
		if v, ok := body[k]; ok {
			t.Errorf("request has %s = %v; want none without a schema", k, v)
		}
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
		name: "tool use",
		body: message("tool_use", toolUse),
		want: portcullis.ModelAnswer{Text: verdictInput, Structured: true, Model: answeredModel},
	}, {
		// The text is passed on beside the verdict, for the validator to
		// refuse: one verdict and nothing else.
		name: "text then tool use",
		body: message("tool_use", `{"type":"text","text":"Let me record my verdict."}`, toolUse),
		want: portcullis.ModelAnswer{Text: verdictInput, Structured: true, Others: []string{"Let me record my verdict."}, Model: answeredModel},
	}, {
		name: "two tool uses",
		body: message("tool_use", toolUse, `{"type":"tool_use","id":"toolu_02","name":"record_verdict","input":{"allow":true}}`),
		want: portcullis.ModelAnswer{Text: verdictInput, Structured: true, Others: []string{`record_verdict {"allow":true}`}, Model: answeredModel},
	}, {
		name: "text only",
		body: message("end_turn", `{"type":"text","text":"ALLOWED, but "}`, `{"type":"text","text":"DENY on reflection."}`),
		want: portcullis.ModelAnswer{Text: "ALLOWED, but DENY on reflection.", Model: answeredModel},
	}, {
		name: "truncated tool use",
		body: message("max_tokens", `{"type":"tool_use","id":"toolu_01","name":"record_verdict","input":{"allow":true}}`),
		want: portcullis.ModelAnswer{Text: `{"allow":true}`, Structured: true, Truncated: true, Model: answeredModel},
	}, {
		name: "truncated text",
		body: message("max_tokens", `{"type":"text","text":"The action pushes to"}`),
		want: portcullis.ModelAnswer{Text: "The action pushes to", Truncated: true, Model: answeredModel},
	}, {
		name: "refusal",
		body: `{"id":"msg_01","type":"message","role":"assistant","model":"` + answeredModel + `","content":[],"stop_reason":"refusal","stop_sequence":null,"stop_details":{"type":"refusal","category":"cyber","explanation":null},"usage":{"input_tokens":412,"output_tokens":0}}`,
		want: portcullis.ModelAnswer{Refused: true, Model: answeredModel},
	}, {
		name: "another tool",
		body: message("tool_use", `{"type":"tool_use","id":"toolu_02","name":"allow_everything","input":{"allow":true}}`),
		want: portcullis.ModelAnswer{Others: []string{`allow_everything {"allow":true}`}, Model: answeredModel},
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

func apiError(typ, msg string) string {
	return `{"type":"error","error":{"type":"` + typ + `","message":"` + msg + `"},"request_id":"req_011CSHoEeqs5C35K2UUqR7Fy"}`
}

func TestAskErrors(t *testing.T) {
	t.Parallel()
	rateLimit := http.Header{
		"Retry-After":                             {"17"},
		"Anthropic-Ratelimit-Requests-Limit":      {"50"},
		"Anthropic-Ratelimit-Requests-Remaining":  {"0"},
		"Anthropic-Ratelimit-Requests-Reset":      {"2026-01-01T00:00:17Z"},
		"Anthropic-Ratelimit-Input-Tokens-Limit":  {"50000"},
		"Anthropic-Ratelimit-Output-Tokens-Limit": {"10000"},
	}
	tests := []struct {
		name       string
		status     int
		header     http.Header
		body       string
		retryable  bool
		typ        string
		retryAfter time.Duration
	}{
		{"400", 400, nil, apiError("invalid_request_error", "max_tokens: Field required"), false, "invalid_request_error", 0},
		{"401", 401, nil, apiError("authentication_error", "invalid x-api-key"), false, "authentication_error", 0},
		{"401 echoing the key", 401, nil, apiError("authentication_error", "invalid x-api-key: "+testKey), false, "authentication_error", 0},
		{"403", 403, nil, apiError("permission_error", "Your API key does not have permission to use the specified resource."), false, "permission_error", 0},
		{"404", 404, nil, apiError("not_found_error", "model: claude-haiku-9"), false, "not_found_error", 0},
		{"413", 413, nil, apiError("request_too_large", "Request exceeds the maximum allowed number of bytes."), false, "request_too_large", 0},
		{"429", 429, rateLimit, apiError("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"), true, "rate_limit_error", 17 * time.Second},
		{"500", 500, nil, apiError("api_error", "Internal server error"), true, "api_error", 0},
		{"503 html", 503, http.Header{"Content-Type": {"text/html"}}, "<html><body>503 Service Unavailable</body></html>", true, "", 0},
		{"529", 529, http.Header{"Retry-After": {"3"}}, apiError("overloaded_error", "Overloaded"), true, "overloaded_error", 3 * time.Second},
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
			var e *anthropic.Error
			if !errors.As(err, &e) {
				t.Fatalf("Ask(%s) = %T %v; want *anthropic.Error", tt.name, err, err)
			}
			if e.Retryable() != tt.retryable || e.StatusCode != tt.status || e.Type != tt.typ || e.RetryAfter != tt.retryAfter {
				t.Errorf("Ask(%s) = {status %d, type %q, retryable %v, retry after %v}; want {%d, %q, %v, %v}",
					tt.name, e.StatusCode, e.Type, e.Retryable(), e.RetryAfter, tt.status, tt.typ, tt.retryable, tt.retryAfter)
			}
			status := http.StatusText(tt.status)
			if tt.status == anthropic.StatusOverloaded {
				status = "Overloaded"
			}
			if !strings.Contains(err.Error(), testModel) || !strings.Contains(err.Error(), status) {
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
	m, err := anthropic.New(anthropic.Options{Model: testModel, APIKey: testKey, BaseURL: srv.URL, Timeout: 100 * time.Millisecond})
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
	var e *anthropic.Error
	if !errors.As(err, &e) || !e.Retryable() {
		t.Errorf("Ask against a hung server = %v; want a retryable *anthropic.Error", err)
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
	var e *anthropic.Error
	if !errors.As(err, &e) || e.Retryable() {
		t.Errorf("Ask with an expired context = %v; want a *anthropic.Error that is not retryable (the caller gave up)", err)
	}
	f.only(t)
}

func TestAskMalformedResponse(t *testing.T) {
	t.Parallel()
	for _, body := range []string{`{"id":"msg_01","type":"message","content":[{"type":"tool_use"`, `not json`} {
		m, _ := serve(t, &fake{body: body})
		got, err := m.Ask(context.Background(), testPrompt())
		if err == nil {
			t.Errorf("Ask(%q) = %+v, nil error; want an error", body, got)
			continue
		}
		noKey(t, err)
		var e *anthropic.Error
		if !errors.As(err, &e) || e.Retryable() {
			t.Errorf("Ask(%q) = %v; want a *anthropic.Error that is not retryable", body, err)
		}
	}
}

func TestAskConnectionRefused(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	m, err := anthropic.New(anthropic.Options{Model: testModel, APIKey: testKey, BaseURL: url})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	_, err = m.Ask(context.Background(), testPrompt())
	var e *anthropic.Error
	if !errors.As(err, &e) || !e.Retryable() || e.StatusCode != 0 {
		t.Fatalf("Ask against a closed port = %v; want a retryable *anthropic.Error without status", err)
	}
	noKey(t, err)
}

func TestAskBadPrompt(t *testing.T) {
	t.Parallel()
	m, f := serve(t, &fake{body: message("tool_use", toolUse)})
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
		opts anthropic.Options
		want string // in the error; empty for success
	}{
		{"ok", anthropic.Options{Model: testModel, APIKey: testKey}, ""},
		{"no model", anthropic.Options{APIKey: testKey}, "model"},
		{"no key", anthropic.Options{Model: testModel}, "API key"},
		{"negative timeout", anthropic.Options{Model: testModel, APIKey: testKey, Timeout: -time.Second}, "timeout"},
		{"negative max tokens", anthropic.Options{Model: testModel, APIKey: testKey, MaxTokens: -1}, "max tokens"},
	}
	for _, tt := range tests {
		m, err := anthropic.New(tt.opts)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("New(%s) = %v; want no error", tt.name, err)
		case tt.want == "" && m.Name() != "anthropic/"+testModel:
			t.Errorf("New(%s).Name() = %q; want %q", tt.name, m.Name(), "anthropic/"+testModel)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("New(%s) = %v; want an error about %s", tt.name, err, tt.want)
		}
		if err != nil {
			noKey(t, err)
		}
	}
}

// TestIgnoresEnvironment: the key and base URL come from Options alone,
// never from ANTHROPIC_* variables, and nothing is logged.
func TestIgnoresEnvironment(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-from-the-environment")
	t.Setenv("ANTHROPIC_AUTH_TOKEN", "token-from-the-environment")
	t.Setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:1")
	var logs bytes.Buffer
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	defer log.SetOutput(log.Writer())
	log.SetOutput(&logs)

	m, f := serve(t, &fake{status: 401, body: apiError("authentication_error", "invalid x-api-key")})
	_, err := m.Ask(context.Background(), testPrompt())
	if err == nil {
		t.Fatal("Ask = nil error; want the 401")
	}
	req := f.only(t)
	if got := req.header.Get("X-Api-Key"); got != testKey {
		t.Errorf("x-api-key = %q; want the key from Options", got)
	}
	if got := req.header.Get("Authorization"); got != "" {
		t.Errorf("Authorization = %q; want none", got)
	}
	if strings.Contains(logs.String(), testKey) {
		t.Errorf("the logs contain the API key:\n%s", logs.String())
	}
}

// hostOnly answers every request itself, recording the URL it was sent to.
type hostOnly struct{ urls chan string }

func (h hostOnly) RoundTrip(r *http.Request) (*http.Response, error) {
	select {
	case h.urls <- r.URL.String():
	default:
	}
	return nil, errors.New("not sent: the test only records where it would go")
}

// Without a base URL, requests go to the production API, as they would
// with the SDK's whole client.
func TestDefaultBaseURLIsTheProductionAPI(t *testing.T) {
	h := hostOnly{urls: make(chan string, 1)}
	m, err := anthropic.New(anthropic.Options{Model: "claude-x", APIKey: testKey, HTTPClient: &http.Client{Transport: h}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Ask(context.Background(), testPrompt()); err == nil {
		t.Fatal("Ask = nil error; want the transport's")
	}
	select {
	case got := <-h.urls:
		if got != "https://api.anthropic.com/v1/messages" {
			t.Fatalf("request sent to %q; want https://api.anthropic.com/v1/messages", got)
		}
	default:
		t.Fatal("no request was sent")
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
