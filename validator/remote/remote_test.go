package remote_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/validator/anthropic"
	"github.com/portcullis/portcullis/validator/remote"
	"github.com/portcullis/portcullis/validator/remote/remotetest"
)

// prog is the provider program, built once for the package's tests.
var prog string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "remote-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	prog, err = remotetest.BuildIn(dir)
	code := 1
	if err == nil {
		code = m.Run()
	} else {
		fmt.Fprintln(os.Stderr, err)
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

const testKey = "sk-ant-api03-TESTKEY-never-shown-0123456789"

var verdictSchema = []byte(`{"type":"object","properties":{"allow":{"type":"boolean"}},"required":["allow"]}`)

// fakeAPI is a model API: the Anthropic Messages API or OpenAI Chat
// Completions, in their wire formats. Its answer names the question's user
// text, so that an answer can be matched to its question; a question whose
// user text starts with "hang" is held until the request is abandoned.
type fakeAPI struct {
	openai bool
	status int // when not zero, every request fails with it
	header http.Header
	body   string // the error body

	mu        sync.Mutex
	keys      []string
	abandoned chan string // the user texts of held requests, once abandoned
	held      chan string // the user texts of held requests, once held
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
	}
	raw, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(raw, &req); err != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	key := r.Header.Get("X-Api-Key")
	if f.openai {
		key = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	f.mu.Lock()
	f.keys = append(f.keys, key)
	f.mu.Unlock()
	user := ""
	for _, m := range req.Messages {
		if m.Role == "user" {
			b, _ := json.Marshal(m.Content)
			user = string(b)
		}
	}
	if strings.Contains(user, "hang") {
		f.held <- user
		<-r.Context().Done()
		f.abandoned <- user
		return
	}
	for k, vs := range f.header {
		w.Header()[k] = vs
	}
	w.Header().Set("Content-Type", "application/json")
	if f.status != 0 {
		w.WriteHeader(f.status)
		io.WriteString(w, f.body)
		return
	}
	verdict, _ := json.Marshal(map[string]any{"allow": true, "reasoning": user})
	if f.openai {
		content, _ := json.Marshal(string(verdict))
		fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1741570283,"model":"gpt-5-mini-2025-08-07","choices":[{"index":0,"message":{"role":"assistant","content":%s,"refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":4,"completion_tokens":8,"total_tokens":12}}`, content)
		return
	}
	fmt.Fprintf(w, `{"id":"msg_01","type":"message","role":"assistant","model":"claude-haiku-4-5-20251001","content":[{"type":"tool_use","id":"toolu_01","name":"record_verdict","input":%s}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":4,"output_tokens":8}}`, verdict)
}

// newModel starts a fake API and returns a Model that asks it through the
// provider program at prog.
func newModel(t *testing.T, prog string, f *fakeAPI, timeout time.Duration) *remote.Model {
	t.Helper()
	f.held, f.abandoned = make(chan string, 16), make(chan string, 16)
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	cfg := remote.Config{Provider: "anthropic", Model: "claude-haiku-4-5", BaseURL: srv.URL, Timeout: timeout}
	if f.openai {
		cfg = remote.Config{Provider: "openai", Model: "gpt-5-mini", BaseURL: srv.URL + "/v1", Timeout: timeout}
	}
	m, err := remote.New(remote.Options{Program: prog, Config: cfg, APIKey: testKey, RestartDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func ask(user string) portcullis.ModelPrompt {
	return portcullis.ModelPrompt{System: "judge", User: user, Schema: verdictSchema, MaxTokens: 100}
}

// TestAnswersThroughTheProgram asks both providers through the real
// program, many questions at once: each answer is its own question's, as
// the provider returned it, and the key reached the API.
func TestAnswersThroughTheProgram(t *testing.T) {
	for _, tc := range []struct {
		name       string
		openai     bool
		structured bool
		model      string
	}{
		{"anthropic", false, true, "claude-haiku-4-5-20251001"},
		{"openai", true, true, "gpt-5-mini-2025-08-07"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeAPI{openai: tc.openai}
			m := newModel(t, prog, f, 5*time.Second)
			if want := map[bool]string{false: "anthropic/claude-haiku-4-5", true: "openai/gpt-5-mini"}[tc.openai]; m.Name() != want {
				t.Errorf("Name() = %q; want %q", m.Name(), want)
			}
			var wg sync.WaitGroup
			for i := range 20 {
				wg.Go(func() {
					user := fmt.Sprintf("question %d", i)
					a, err := m.Ask(t.Context(), ask(user))
					if err != nil {
						t.Errorf("Ask(%s) = %v", user, err)
						return
					}
					var v struct{ Reasoning string }
					if json.Unmarshal([]byte(a.Text), &v) != nil || !strings.Contains(v.Reasoning, `"`+user+`"`) || a.Structured != tc.structured || a.Model != tc.model {
						t.Errorf("Ask(%s) = %+v; want the verdict naming it, structured %v, from %s", user, a, tc.structured, tc.model)
					}
				})
			}
			wg.Wait()
			f.mu.Lock()
			defer f.mu.Unlock()
			for _, k := range f.keys {
				if k != testKey {
					t.Fatalf("the API got the key %q; want the one given", k)
				}
			}
		})
	}
}

// TestErrorsCrossTheProgram: what the validator relies on in a provider's
// error — the status, whether a retry may succeed, the API's type, code,
// request id and retry-after, a timeout — survives the hop, and the key
// does not appear in the message.
func TestErrorsCrossTheProgram(t *testing.T) {
	for _, tc := range []struct {
		name                string
		api                 *fakeAPI
		status              int
		retryable           bool
		typ, code, request  string
		retryAfter          time.Duration
		messageHas, keyPart string
	}{
		{"anthropic rate limited", &fakeAPI{status: 429, header: http.Header{"Retry-After": {"7"}, "Request-Id": {"req_011"}},
			body: `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`},
			429, true, "rate_limit_error", "", "req_011", 7 * time.Second, "429 Too Many Requests: rate_limit_error: slow down", ""},
		{"anthropic bad key echoed", &fakeAPI{status: 401,
			body: `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key ` + testKey + `"}}`},
			401, false, "authentication_error", "", "", 0, "401 Unauthorized", testKey},
		{"anthropic overloaded", &fakeAPI{status: 529, body: `{"type":"error","error":{"type":"overloaded_error","message":"busy"}}`},
			529, true, "overloaded_error", "", "", 0, "529 Overloaded", ""},
		{"openai unavailable", &fakeAPI{openai: true, status: 503, header: http.Header{"X-Request-Id": {"req_oa"}, "Retry-After-Ms": {"1500"}},
			body: `{"error":{"message":"try later","type":"server_error","param":null,"code":"unavailable"}}`},
			503, true, "server_error", "unavailable", "req_oa", 1500 * time.Millisecond, "503 Service Unavailable: server_error: unavailable: try later", ""},
		{"openai bad request", &fakeAPI{openai: true, status: 400, body: `{"error":{"message":"no","type":"invalid_request_error","param":null,"code":"bad"}}`},
			400, false, "invalid_request_error", "bad", "", 0, "400 Bad Request", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newModel(t, prog, tc.api, 5*time.Second)
			_, err := m.Ask(t.Context(), ask("send the mail"))
			var e *remote.Error
			if !errors.As(err, &e) {
				t.Fatalf("Ask = %v (%T); want a *remote.Error", err, err)
			}
			retryable := err.(interface{ Retryable() bool }).Retryable()
			if e.HTTPStatus() != tc.status || retryable != tc.retryable || e.Type != tc.typ || e.Code != tc.code || e.RequestID != tc.request || e.RetryAfter != tc.retryAfter {
				t.Errorf("Ask = status %d retryable %v type %q code %q request %q retry-after %v; want %d %v %q %q %q %v",
					e.HTTPStatus(), retryable, e.Type, e.Code, e.RequestID, e.RetryAfter, tc.status, tc.retryable, tc.typ, tc.code, tc.request, tc.retryAfter)
			}
			if !strings.Contains(err.Error(), tc.messageHas) {
				t.Errorf("Ask = %q; want it to say %q", err, tc.messageHas)
			}
			if strings.Contains(err.Error(), testKey[8:20]) {
				t.Errorf("Ask = %q; shows the key", err)
			}
		})
	}

	t.Run("the request's own timeout", func(t *testing.T) {
		f := &fakeAPI{}
		m := newModel(t, prog, f, 300*time.Millisecond)
		_, err := m.Ask(t.Context(), ask("hang on"))
		<-f.abandoned
		retryable := err != nil && err.(interface{ Retryable() bool }).Retryable()
		if !errors.Is(err, context.DeadlineExceeded) || !retryable {
			t.Fatalf("Ask past the provider's timeout = %v (retryable %v); want a retryable error that is context.DeadlineExceeded", err, retryable)
		}
	})
}

// TestCancelReachesTheProgram: a question whose caller has gone is
// abandoned by the program too (its HTTP request ends), and the program
// goes on answering others.
func TestCancelReachesTheProgram(t *testing.T) {
	f := &fakeAPI{}
	m := newModel(t, prog, f, 0)
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := m.Ask(ctx, ask("hang until cancelled"))
		errc <- err
	}()
	<-f.held
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Ask after its context was cancelled = %v; want context.Canceled", err)
	}
	if got := <-f.abandoned; !strings.Contains(got, "hang until cancelled") {
		t.Fatalf("abandoned %q; want the cancelled question", got)
	}
	if _, err := m.Ask(t.Context(), ask("next")); err != nil {
		t.Fatalf("Ask after a cancel = %v; want an answer", err)
	}
}

// TestAbandonedStartDoesNotStick: a first question whose caller has
// already gone starts nothing, and does not fail the next one.
func TestAbandonedStartDoesNotStick(t *testing.T) {
	srv := httptest.NewServer(&fakeAPI{})
	defer srv.Close()
	// The default RestartDelay: a failed start would be returned for a
	// second.
	m, err := remote.New(remote.Options{Program: prog, Config: remote.Config{Provider: "anthropic", Model: "m", BaseURL: srv.URL}, APIKey: testKey})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := m.Ask(ctx, ask("gone")); !errors.Is(err, context.Canceled) || m.Pid() != 0 {
		t.Fatalf("Ask with its context cancelled = %v (program pid %d); want context.Canceled and no program", err, m.Pid())
	}
	if _, err := m.Ask(t.Context(), ask("next")); err != nil {
		t.Fatalf("Ask after an abandoned one = %v; want an answer", err)
	}
}

// TestStartErrors: a provider the program cannot build fails the question
// with the program's own reason, and is not retryable.
func TestStartErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  remote.Config
		key  string
		want string
	}{
		{"unknown provider", remote.Config{Provider: "gemini", Model: "m"}, testKey, `unknown provider "gemini"`},
		{"anthropic without a key", remote.Config{Provider: "anthropic", Model: "m"}, "", "anthropic: no API key given"},
		{"openai bad base URL", remote.Config{Provider: "openai", Model: "m", BaseURL: "ftp://x"}, testKey, "is not an http or https URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := remote.New(remote.Options{Program: prog, Config: tc.cfg, APIKey: tc.key})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			_, err = m.Ask(t.Context(), ask("x"))
			var e *remote.Error
			if !errors.As(err, &e) || e.Retryable() || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Ask = %v; want a non-retryable error saying %q", err, tc.want)
			}
		})
	}
}

// BenchmarkAsk is one question to a local Anthropic API, in process (the
// provider as the program runs it) and through the program, for what the
// hop costs; BenchmarkFirstAsk adds the program's start, as the first
// question of a gateway, hook or decide pays it.
func BenchmarkAsk(b *testing.B) {
	srv := httptest.NewServer(&fakeAPI{})
	b.Cleanup(srv.Close)
	cfg := remote.Config{Provider: "anthropic", Model: "claude-haiku-4-5", BaseURL: srv.URL}
	inProcess, err := anthropic.New(anthropic.Options{Model: cfg.Model, APIKey: testKey, BaseURL: cfg.BaseURL})
	if err != nil {
		b.Fatal(err)
	}
	through, err := remote.New(remote.Options{Program: prog, Config: cfg, APIKey: testKey})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { through.Close() })
	for _, m := range []portcullis.Model{inProcess, through} {
		name := "in-process"
		if m == portcullis.Model(through) {
			name = "through-program"
		}
		b.Run(name, func(b *testing.B) {
			if _, err := m.Ask(b.Context(), ask("warm up")); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := m.Ask(b.Context(), ask("question")); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkFirstAsk(b *testing.B) {
	srv := httptest.NewServer(&fakeAPI{})
	b.Cleanup(srv.Close)
	cfg := remote.Config{Provider: "anthropic", Model: "claude-haiku-4-5", BaseURL: srv.URL}
	for b.Loop() {
		m, err := remote.New(remote.Options{Program: prog, Config: cfg, APIKey: testKey})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := m.Ask(b.Context(), ask("first")); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		m.Close()
		b.StartTimer()
	}
}
