package validator_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/validator"
)

// fakeModel is a portcullis.Model whose answer is a function of the prompt.
type fakeModel struct {
	name  string
	ask   func(ctx context.Context, p portcullis.ModelPrompt) (portcullis.ModelAnswer, error)
	calls atomic.Int32

	mu      sync.Mutex
	prompts []portcullis.ModelPrompt
}

func (m *fakeModel) Name() string {
	if m.name == "" {
		return "fake/judge-1"
	}
	return m.name
}

func (m *fakeModel) Ask(ctx context.Context, p portcullis.ModelPrompt) (portcullis.ModelAnswer, error) {
	m.calls.Add(1)
	m.mu.Lock()
	m.prompts = append(m.prompts, p)
	m.mu.Unlock()
	return m.ask(ctx, p)
}

func (m *fakeModel) lastPrompt(t *testing.T) portcullis.ModelPrompt {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.prompts) == 0 {
		t.Fatal("the model was never asked")
	}
	return m.prompts[len(m.prompts)-1]
}

// answering returns a model that always answers text (free text).
func answering(text string) *fakeModel {
	return &fakeModel{ask: func(context.Context, portcullis.ModelPrompt) (portcullis.ModelAnswer, error) {
		return portcullis.ModelAnswer{Text: text}, nil
	}}
}

const (
	allowJSON = `{"verdict":"allow","reasoning":"reads are fine","whatWouldAuthorize":"","confidence":0.9}`
	denyJSON  = `{"verdict":"deny","reasoning":"rule 2 forbids deletes","whatWouldAuthorize":"the user asks for it","confidence":0.8}`
)

const groundRules = "1. Never delete data.\n2. Read-only network commands are fine.\n"

// writeFile writes text to a new file in a test directory.
func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// newValidator returns a stateless validator over m with ground rules and
// no cache unless cfg says otherwise.
func newValidator(t testing.TB, m portcullis.Model, cfg validator.Config) *validator.Validator {
	t.Helper()
	if cfg.RulesFile == "" && cfg.Mode != portcullis.ValidateContextual {
		p := filepath.Join(t.TempDir(), "groundRules.md")
		if err := os.WriteFile(p, []byte(groundRules), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg.RulesFile = p
	}
	if cfg.CacheTTL == 0 {
		cfg.CacheTTL = -1
	}
	v, err := validator.New(m, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return v
}

var pingRequest = portcullis.ValidationRequest{
	Tool:    "Bash",
	Summary: "ping -c 1 192.0.2.1",
	Args:    map[string]any{"command": "ping -c 1 192.0.2.1"},
}

func validate(t *testing.T, v *validator.Validator, req portcullis.ValidationRequest) portcullis.Verdict {
	t.Helper()
	vd, err := v.Validate(context.Background(), req)
	if err != nil {
		t.Fatalf("Validate(%s): %v", req.Tool, err)
	}
	return vd
}

func TestStrictParsing(t *testing.T) {
	type want int
	const (
		allow want = iota
		deny
		failClosed
	)
	cases := []struct {
		name string
		ans  portcullis.ModelAnswer
		want want
	}{
		{"allow", portcullis.ModelAnswer{Text: allowJSON}, allow},
		{"deny", portcullis.ModelAnswer{Text: denyJSON}, deny},
		{"allow structured", portcullis.ModelAnswer{Text: allowJSON, Structured: true}, allow},
		{"surrounding whitespace", portcullis.ModelAnswer{Text: "\n\t " + allowJSON + " \n"}, allow},
		{"fenced", portcullis.ModelAnswer{Text: "```json\n" + allowJSON + "\n```"}, allow},
		{"fenced structured", portcullis.ModelAnswer{Text: "```json\n" + allowJSON + "\n```", Structured: true}, failClosed},
		{"fenced without language", portcullis.ModelAnswer{Text: "```\n" + allowJSON + "\n```"}, failClosed},
		{"fenced with prose after", portcullis.ModelAnswer{Text: "```json\n" + allowJSON + "\n```\nHope this helps"}, failClosed},
		{"two fences", portcullis.ModelAnswer{Text: "```json\n" + denyJSON + "\n```\n```json\n" + allowJSON + "\n```"}, failClosed},
		{"prose before", portcullis.ModelAnswer{Text: "Here is my verdict: " + allowJSON}, failClosed},
		{"ALLOWED but DENY", portcullis.ModelAnswer{Text: "ALLOWED, but DENY if the host is production"}, failClosed},
		{"ALLOW: looks fine", portcullis.ModelAnswer{Text: "ALLOW: looks fine"}, failClosed},
		{"DENY line", portcullis.ModelAnswer{Text: "DENY: destructive"}, failClosed},
		{"two objects", portcullis.ModelAnswer{Text: denyJSON + allowJSON}, failClosed},
		{"two objects on lines", portcullis.ModelAnswer{Text: allowJSON + "\n" + allowJSON}, failClosed},
		{"trailing text", portcullis.ModelAnswer{Text: allowJSON + " but deny"}, failClosed},
		{"trailing brace", portcullis.ModelAnswer{Text: allowJSON + "}"}, failClosed},
		{"unknown field", portcullis.ModelAnswer{Text: `{"verdict":"allow","reasoning":"","whatWouldAuthorize":"","confidence":0.9,"override":true}`}, failClosed},
		{"duplicate verdict", portcullis.ModelAnswer{Text: `{"verdict":"deny","reasoning":"","whatWouldAuthorize":"","confidence":0.9,"verdict":"allow"}`}, failClosed},
		{"missing verdict", portcullis.ModelAnswer{Text: `{"reasoning":"","whatWouldAuthorize":"","confidence":0.9}`}, failClosed},
		{"missing confidence", portcullis.ModelAnswer{Text: `{"verdict":"allow","reasoning":"","whatWouldAuthorize":""}`}, failClosed},
		{"missing reasoning", portcullis.ModelAnswer{Text: `{"verdict":"allow","whatWouldAuthorize":"","confidence":1}`}, failClosed},
		{"verdict ALLOW", portcullis.ModelAnswer{Text: `{"verdict":"ALLOW","reasoning":"","whatWouldAuthorize":"","confidence":0.9}`}, failClosed},
		{"verdict allowed", portcullis.ModelAnswer{Text: `{"verdict":"allowed","reasoning":"","whatWouldAuthorize":"","confidence":0.9}`}, failClosed},
		{"verdict true", portcullis.ModelAnswer{Text: `{"verdict":true,"reasoning":"","whatWouldAuthorize":"","confidence":0.9}`}, failClosed},
		{"confidence 1.5", portcullis.ModelAnswer{Text: `{"verdict":"allow","reasoning":"","whatWouldAuthorize":"","confidence":1.5}`}, failClosed},
		{"confidence negative", portcullis.ModelAnswer{Text: `{"verdict":"allow","reasoning":"","whatWouldAuthorize":"","confidence":-0.1}`}, failClosed},
		{"confidence string", portcullis.ModelAnswer{Text: `{"verdict":"allow","reasoning":"","whatWouldAuthorize":"","confidence":"high"}`}, failClosed},
		{"confidence 1", portcullis.ModelAnswer{Text: `{"verdict":"allow","reasoning":"","whatWouldAuthorize":"","confidence":1}`}, allow},
		{"confidence 0 deny", portcullis.ModelAnswer{Text: `{"verdict":"deny","reasoning":"","whatWouldAuthorize":"","confidence":0}`}, deny},
		{"nested reasoning", portcullis.ModelAnswer{Text: `{"verdict":"allow","reasoning":{"a":1},"whatWouldAuthorize":"","confidence":1}`}, failClosed},
		{"array", portcullis.ModelAnswer{Text: "[" + allowJSON + "]"}, failClosed},
		{"null", portcullis.ModelAnswer{Text: "null"}, failClosed},
		{"truncated JSON", portcullis.ModelAnswer{Text: allowJSON[:len(allowJSON)-1]}, failClosed},
		{"empty", portcullis.ModelAnswer{Text: ""}, failClosed},
		{"whitespace", portcullis.ModelAnswer{Text: " \n "}, failClosed},
		{"refused", portcullis.ModelAnswer{Text: allowJSON, Refused: true}, failClosed},
		{"truncated", portcullis.ModelAnswer{Text: allowJSON, Truncated: true}, failClosed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := &fakeModel{ask: func(context.Context, portcullis.ModelPrompt) (portcullis.ModelAnswer, error) { return tc.ans, nil }}
			vd := validate(t, newValidator(t, m, validator.Config{}), pingRequest)
			var got want
			switch {
			case vd.Allow && vd.FailClosed:
				t.Fatalf("Validate(%s) = allow with FailClosed; never both", tc.name)
			case vd.Allow:
				got = allow
			case vd.FailClosed:
				got = failClosed
			default:
				got = deny
			}
			names := []string{"allow", "deny", "failClosed"}
			if got != tc.want {
				t.Errorf("Validate(answer %q) = %s (%q); want %s", tc.ans.Text, names[got], vd.Reasoning, names[tc.want])
			}
		})
	}
}

func TestVerdictFields(t *testing.T) {
	m := answering(denyJSON)
	m.ask = func(context.Context, portcullis.ModelPrompt) (portcullis.ModelAnswer, error) {
		return portcullis.ModelAnswer{Text: denyJSON, Model: "judge-1-20260101"}, nil
	}
	v := newValidator(t, m, validator.Config{})
	vd := validate(t, v, pingRequest)
	if vd.Allow || vd.FailClosed || vd.Reasoning != "rule 2 forbids deletes" || vd.WhatWouldAuthorize != "the user asks for it" || vd.Confidence != 0.8 {
		t.Errorf("Validate = %+v; want the model's deny", vd)
	}
	if vd.Provider != "fake" || vd.Model != "judge-1-20260101" || !strings.HasPrefix(vd.PromptHash, "sha256:") || vd.Cached {
		t.Errorf("Validate telemetry = provider %q model %q hash %q cached %v", vd.Provider, vd.Model, vd.PromptHash, vd.Cached)
	}
	again := validate(t, v, pingRequest)
	if again.PromptHash != vd.PromptHash {
		t.Errorf("PromptHash differs for identical actions: %s, %s", vd.PromptHash, again.PromptHash)
	}
	if p := m.lastPrompt(t); string(p.Schema) != string(validator.VerdictSchema()) || p.MaxTokens <= 0 {
		t.Errorf("prompt schema %q, max tokens %d; want VerdictSchema and a bound", p.Schema, p.MaxTokens)
	}
	other := pingRequest
	other.Summary = "ping -c 2 192.0.2.1"
	if h := validate(t, v, other).PromptHash; h == vd.PromptHash {
		t.Errorf("PromptHash is the same for different actions")
	}
}

func TestMinConfidence(t *testing.T) {
	m := answering(`{"verdict":"allow","reasoning":"probably fine","whatWouldAuthorize":"","confidence":0.4}`)
	vd := validate(t, newValidator(t, m, validator.Config{MinConfidence: 0.6}), pingRequest)
	if vd.Allow || vd.FailClosed {
		t.Errorf("Validate(allow at 0.4, floor 0.6) = %+v; want a deny that is not fail-closed", vd)
	}
	vd = validate(t, newValidator(t, m, validator.Config{}), pingRequest)
	if !vd.Allow {
		t.Errorf("Validate(allow at 0.4, no floor) = %+v; want allow", vd)
	}
}

func TestFaults(t *testing.T) {
	transient := errors.New("503 service unavailable")
	cases := []struct {
		name      string
		cfg       validator.Config
		ask       func(n int32, ctx context.Context) (portcullis.ModelAnswer, error)
		wantAllow bool
		wantCalls int32
		reason    string
	}{
		{
			name: "timeout",
			cfg:  validator.Config{Timeout: 50 * time.Millisecond},
			ask: func(_ int32, ctx context.Context) (portcullis.ModelAnswer, error) {
				<-ctx.Done()
				return portcullis.ModelAnswer{}, ctx.Err()
			},
			wantCalls: 1, reason: "timed out after 50ms",
		},
		{
			name: "model ignores its context",
			cfg:  validator.Config{Timeout: 50 * time.Millisecond},
			ask: func(int32, context.Context) (portcullis.ModelAnswer, error) {
				time.Sleep(300 * time.Millisecond)
				return portcullis.ModelAnswer{Text: allowJSON}, nil
			},
			wantCalls: 1, reason: "timed out",
		},
		{
			name: "error",
			ask: func(int32, context.Context) (portcullis.ModelAnswer, error) {
				return portcullis.ModelAnswer{}, errors.New("401 invalid key")
			},
			wantCalls: 1, reason: "the validator is unreachable; the call is refused",
		},
		{
			name: "retryable then success",
			ask: func(n int32, _ context.Context) (portcullis.ModelAnswer, error) {
				if n < 3 {
					return portcullis.ModelAnswer{}, validator.Retryable(transient)
				}
				return portcullis.ModelAnswer{Text: allowJSON}, nil
			},
			wantAllow: true, wantCalls: 3,
		},
		{
			name: "retryable every time",
			ask: func(int32, context.Context) (portcullis.ModelAnswer, error) {
				return portcullis.ModelAnswer{}, validator.Retryable(transient)
			},
			wantCalls: 3, reason: "the validator is unreachable; the call is refused",
		},
		{
			name: "provider's own retryable type",
			cfg:  validator.Config{Retries: 1},
			ask: func(int32, context.Context) (portcullis.ModelAnswer, error) {
				return portcullis.ModelAnswer{}, fmt.Errorf("post: %w", rateLimited{})
			},
			wantCalls: 2, reason: "the validator is unavailable (HTTP 429); the call is refused",
		},
		{
			name: "no retries",
			cfg:  validator.Config{Retries: -1},
			ask: func(int32, context.Context) (portcullis.ModelAnswer, error) {
				return portcullis.ModelAnswer{}, validator.Retryable(transient)
			},
			wantCalls: 1, reason: "the validator is unreachable; the call is refused",
		},
		{
			name: "panic",
			ask: func(int32, context.Context) (portcullis.ModelAnswer, error) {
				panic("boom")
			},
			wantCalls: 1, reason: "the validator failed internally; the call is refused",
		},
		{
			name: "retries stop at the timeout",
			cfg:  validator.Config{Timeout: 80 * time.Millisecond, Retries: 100},
			ask: func(int32, context.Context) (portcullis.ModelAnswer, error) {
				return portcullis.ModelAnswer{}, validator.Retryable(transient)
			},
			reason: "timed out",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var n atomic.Int32
			m := &fakeModel{ask: func(ctx context.Context, _ portcullis.ModelPrompt) (portcullis.ModelAnswer, error) {
				return tc.ask(n.Add(1), ctx)
			}}
			vd := validate(t, newValidator(t, m, tc.cfg), pingRequest)
			if vd.Allow != tc.wantAllow || vd.FailClosed == tc.wantAllow {
				t.Fatalf("Validate(%s) = allow %v failClosed %v (%q); want allow %v", tc.name, vd.Allow, vd.FailClosed, vd.Reasoning, tc.wantAllow)
			}
			if tc.wantCalls > 0 && m.calls.Load() != tc.wantCalls {
				t.Errorf("Validate(%s) asked the model %d times; want %d", tc.name, m.calls.Load(), tc.wantCalls)
			}
			if !strings.Contains(vd.Reasoning, tc.reason) {
				t.Errorf("Validate(%s) reason %q; want it to mention %q", tc.name, vd.Reasoning, tc.reason)
			}
		})
	}
}

type rateLimited struct{}

func (rateLimited) Error() string   { return "429 too many requests" }
func (rateLimited) Retryable() bool { return true }
func (rateLimited) HTTPStatus() int { return http.StatusTooManyRequests }

func TestIsRetryable(t *testing.T) {
	base := errors.New("x")
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{base, false},
		{validator.Retryable(base), true},
		{fmt.Errorf("wrap: %w", validator.Retryable(base)), true},
		{rateLimited{}, true},
		{errors.Join(base, rateLimited{}), true},
		{context.DeadlineExceeded, false},
	} {
		if got := validator.IsRetryable(tc.err); got != tc.want {
			t.Errorf("IsRetryable(%v) = %v; want %v", tc.err, got, tc.want)
		}
	}
	if validator.Retryable(nil) != nil {
		t.Errorf("Retryable(nil) != nil")
	}
	if !errors.Is(validator.Retryable(base), base) {
		t.Errorf("Retryable(err) does not wrap err")
	}
}

func TestCallerCancels(t *testing.T) {
	started := make(chan struct{})
	m := &fakeModel{ask: func(ctx context.Context, _ portcullis.ModelPrompt) (portcullis.ModelAnswer, error) {
		close(started)
		<-ctx.Done()
		return portcullis.ModelAnswer{}, ctx.Err()
	}}
	v := newValidator(t, m, validator.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }()
	vd, err := v.Validate(ctx, pingRequest)
	if err != nil || vd.Allow || !vd.FailClosed || !strings.Contains(vd.Reasoning, "cancelled") {
		t.Errorf("Validate(cancelled) = %+v, %v; want a fail-closed deny saying cancelled", vd, err)
	}
}

func TestInvalidRequest(t *testing.T) {
	v := newValidator(t, answering(allowJSON), validator.Config{})
	for _, req := range []portcullis.ValidationRequest{{}, {Tool: "x", Mode: "psychic"}} {
		vd, err := v.Validate(context.Background(), req)
		if portcullis.ErrorCode(err) != portcullis.CodeInvalidRequest || vd.Allow || !vd.FailClosed {
			t.Errorf("Validate(%+v) = %+v, %v; want a fail-closed deny and INVALID_REQUEST", req, vd, err)
		}
	}
	if _, err := validator.New(answering(allowJSON), validator.Config{}); err == nil {
		t.Errorf("New without a rules file: no error")
	}
	if _, err := validator.New(nil, validator.Config{RulesFile: "r"}); err == nil {
		t.Errorf("New without a model: no error")
	}
	if _, err := validator.New(answering(allowJSON), validator.Config{RulesFile: "r", Mode: "x"}); err == nil {
		t.Errorf("New with an unknown mode: no error")
	}
}

func TestRulesFile(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "none.md")
	for _, tc := range []struct {
		name, path, reason string
	}{
		{"missing", missing, "does not exist"},
		{"empty", writeFile(t, "empty.md", ""), "empty"},
		{"whitespace", writeFile(t, "blank.md", " \n\t\r\n  "), "empty"},
		{"directory", dir, "not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := answering(allowJSON)
			vd := validate(t, newValidator(t, m, validator.Config{RulesFile: tc.path}), pingRequest)
			if vd.Allow || !vd.FailClosed || !strings.Contains(vd.Reasoning, tc.reason) {
				t.Errorf("Validate(rules %s) = %+v; want a fail-closed deny saying %q", tc.name, vd, tc.reason)
			}
			if strings.Contains(vd.Reasoning, dir) {
				t.Errorf("reason %q names the directory", vd.Reasoning)
			}
			if m.calls.Load() != 0 {
				t.Errorf("the model was asked without rules")
			}
		})
	}
	t.Run("contextual without a policy document", func(t *testing.T) {
		v := newValidator(t, answering(allowJSON), validator.Config{})
		req := pingRequest
		req.Mode = portcullis.ValidateContextual
		if vd := validate(t, v, req); vd.Allow || !vd.FailClosed {
			t.Errorf("Validate(contextual, no policy) = %+v; want a fail-closed deny", vd)
		}
	})
}

func TestRulesChangePickedUp(t *testing.T) {
	p := writeFile(t, "rules.md", "rule one\n")
	m := answering(allowJSON)
	v := newValidator(t, m, validator.Config{RulesFile: p, CacheTTL: time.Hour})
	validate(t, v, pingRequest)
	if !strings.Contains(m.lastPrompt(t).User, "rule one") {
		t.Fatalf("prompt lacks the rules")
	}
	// Same size, later modification time.
	if err := os.WriteFile(p, []byte("rule two\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(p, later, later); err != nil {
		t.Fatal(err)
	}
	vd := validate(t, v, pingRequest)
	if vd.Cached || !strings.Contains(m.lastPrompt(t).User, "rule two") {
		t.Errorf("after the rules changed: cached %v, prompt %q; want a new call with the new rules", vd.Cached, m.lastPrompt(t).User)
	}
	if err := os.WriteFile(p, []byte("  \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if vd := validate(t, v, pingRequest); vd.Allow || !vd.FailClosed {
		t.Errorf("after the rules were emptied: %+v; want a fail-closed deny", vd)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if vd := validate(t, v, pingRequest); vd.Allow || !vd.FailClosed {
		t.Errorf("after the rules were removed: %+v; want a fail-closed deny", vd)
	}
}
