package providers_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/validator/providers"
	"github.com/portcullis/portcullis/validator/remote/remotetest"
)

// testBinary is the running test binary, beside which the provider program
// is looked for first.
func testBinary(t *testing.T) string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// env is an environment of its own for a test.
func env(vars map[string]string) providers.Getenv {
	return func(name string) string { return vars[name] }
}

func TestAPIKeyFromFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(file, []byte("sk-test-123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if k, err := providers.APIKey("KEY", env(map[string]string{"KEY_FILE": file})); err != nil || k != "sk-test-123" {
		t.Fatalf("APIKey from file = %q, %v; want sk-test-123", k, err)
	}
	if k, err := providers.APIKey("KEY", env(map[string]string{"KEY": " sk-env\n", "KEY_FILE": file})); err != nil || k != "sk-env" {
		t.Fatalf("APIKey = %q, %v; want the variable to win over the file", k, err)
	}
	if k, err := providers.APIKey("", env(map[string]string{"": "x"})); err != nil || k != "" {
		t.Fatalf("APIKey with no variable named = %q, %v; want none", k, err)
	}
	missing := filepath.Join(t.TempDir(), "missing")
	if _, err := providers.APIKey("KEY", env(map[string]string{"KEY_FILE": missing})); err == nil || !strings.Contains(err.Error(), "KEY_FILE") {
		t.Fatalf("APIKey with a missing key file = %v; want an error naming KEY_FILE", err)
	}
}

func TestNew(t *testing.T) {
	rules := filepath.Join(t.TempDir(), "rules.md")
	if err := os.WriteFile(rules, []byte("Never send email outside acme.com.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	prog := remotetest.Build(t, t.TempDir())
	notInstalled := "validator: the anthropic provider runs in a program of its own: portcullis-provider is not installed (looked beside " +
		testBinary(t) + " and in PATH): install it with go install github.com/portcullis/portcullis/cmd/portcullis-provider@latest (from a clone: go install ./cmd/portcullis-provider), or set PORTCULLIS_PROVIDER_PROGRAM to its path"
	for _, tc := range []struct {
		name    string
		cfg     portcullis.ValidatorConfig
		env     map[string]string
		wantErr string // "" : a validator is built
	}{
		{name: "anthropic without key", cfg: portcullis.ValidatorConfig{Provider: "anthropic", Model: "m", APIKeyEnv: "AK"},
			wantErr: "validator: the anthropic provider needs an API key: set the environment variable AK (validator.apiKeyEnv)"},
		{name: "anthropic with no variable named", cfg: portcullis.ValidatorConfig{Provider: "anthropic", Model: "m"},
			wantErr: "set the environment variable named by validator.apiKeyEnv"},
		{name: "anthropic", cfg: portcullis.ValidatorConfig{Provider: "anthropic", Model: "m", APIKeyEnv: "AK"}, env: map[string]string{"AK": "sk", providers.ProgramEnv: prog}},
		{name: "anthropic, the program in PATH", cfg: portcullis.ValidatorConfig{Provider: "anthropic", Model: "m", APIKeyEnv: "AK"},
			env: map[string]string{"AK": "sk", "PATH": "relative" + string(filepath.ListSeparator) + filepath.Dir(prog)}},
		{name: "anthropic without the program", cfg: portcullis.ValidatorConfig{Provider: "anthropic", Model: "m", APIKeyEnv: "AK"},
			env: map[string]string{"AK": "sk", "PATH": t.TempDir()}, wantErr: notInstalled},
		{name: "the program named is not there", cfg: portcullis.ValidatorConfig{Provider: "openai", Model: "m", APIKeyEnv: "OK"},
			env: map[string]string{"OK": "sk", providers.ProgramEnv: filepath.Join(t.TempDir(), "nothing")}, wantErr: "PORTCULLIS_PROVIDER_PROGRAM=" + os.TempDir()},
		{name: "openai without key", cfg: portcullis.ValidatorConfig{Provider: "openai", Model: "m", APIKeyEnv: "OK"},
			wantErr: "validator: the openai provider needs an API key: set the environment variable OK (validator.apiKeyEnv), or a baseURL for a local server"},
		{name: "openai local server needs no key", cfg: portcullis.ValidatorConfig{Provider: "openai", Model: "m", BaseURL: "http://127.0.0.1:11434/v1"}, env: map[string]string{providers.ProgramEnv: prog}},
		{name: "command", cfg: portcullis.ValidatorConfig{Provider: "command", Command: []string{"true"}}},
		{name: "unknown provider", cfg: portcullis.ValidatorConfig{Provider: "gemini"},
			wantErr: `validator: unknown provider "gemini" (want anthropic, openai or command)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Rules = rules
			v, err := providers.New(&portcullis.Policy{Version: 1, Validator: &cfg}, env(tc.env), nil)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || v != nil {
					t.Fatalf("New(%s) = %v, %v; want the error %q", tc.name, v, err, tc.wantErr)
				}
				return
			}
			if err != nil || v == nil {
				t.Fatalf("New(%s) = %v, %v; want a validator", tc.name, v, err)
			}
		})
	}
	if v, err := providers.New(&portcullis.Policy{Version: 1}, env(nil), nil); v != nil || err != nil {
		t.Fatalf("New(no validator) = %v, %v; want nil, nil", v, err)
	}
}

// TestValidatorAsksThroughTheProgram: the validator New builds for a model
// provider asks the model through the provider program and judges its
// answer; a provider that fails is a fail-closed deny naming its HTTP
// status, as in process.
func TestValidatorAsksThroughTheProgram(t *testing.T) {
	prog := remotetest.Build(t, t.TempDir())
	rules := filepath.Join(t.TempDir(), "rules.md")
	if err := os.WriteFile(rules, []byte("Never send email outside acme.com.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var status atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") != "sk-ant-api03-test" {
			t.Errorf("the API got the key %q; want the one in AK", r.Header.Get("X-Api-Key"))
		}
		w.Header().Set("Content-Type", "application/json")
		if s := int(status.Load()); s != 0 {
			w.WriteHeader(s)
			io.WriteString(w, `{"type":"error","error":{"type":"overloaded_error","message":"busy"}}`)
			return
		}
		io.WriteString(w, `{"id":"msg_01","type":"message","role":"assistant","model":"claude-haiku-4-5-20251001",`+
			`"content":[{"type":"tool_use","id":"toolu_01","name":"record_verdict","input":{"verdict":"deny","reasoning":"outside acme.com","whatWouldAuthorize":"the user asking for it","confidence":0.9}}],`+
			`"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":4,"output_tokens":8}}`)
	}))
	defer srv.Close()
	cfg := portcullis.ValidatorConfig{Provider: "anthropic", Model: "claude-haiku-4-5", APIKeyEnv: "AK", BaseURL: srv.URL, Rules: rules, Timeout: 10 * time.Second}
	v, err := providers.New(&portcullis.Policy{Version: 1, Validator: &cfg}, env(map[string]string{"AK": "sk-ant-api03-test", providers.ProgramEnv: prog}), nil)
	if err != nil {
		t.Fatal(err)
	}
	req := portcullis.ValidationRequest{Tool: "send_email", Summary: "send to bob@example.com", Args: map[string]any{"to": "bob@example.com"}}
	vd, err := v.Validate(t.Context(), req)
	if err != nil || vd.Allow || vd.FailClosed || vd.Reasoning != "outside acme.com" || vd.Provider != "anthropic" || vd.Model != "claude-haiku-4-5-20251001" {
		t.Fatalf("Validate = %+v, %v; want the model's deny, from anthropic/claude-haiku-4-5-20251001", vd, err)
	}
	status.Store(529)
	req.Summary = "send to carol@example.com" // not the cached verdict
	vd, err = v.Validate(t.Context(), req)
	if want := "the validator is unavailable (HTTP 529); the call is refused"; err != nil || vd.Allow || !vd.FailClosed || vd.Reasoning != want {
		t.Fatalf("Validate with the API overloaded = %+v, %v; want a fail-closed deny saying %q", vd, err, want)
	}
}
