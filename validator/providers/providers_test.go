package providers_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/validator/providers"
)

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
		{name: "anthropic", cfg: portcullis.ValidatorConfig{Provider: "anthropic", Model: "m", APIKeyEnv: "AK"}, env: map[string]string{"AK": "sk"}},
		{name: "openai without key", cfg: portcullis.ValidatorConfig{Provider: "openai", Model: "m", APIKeyEnv: "OK"},
			wantErr: "validator: the openai provider needs an API key: set the environment variable OK (validator.apiKeyEnv), or a baseURL for a local server"},
		{name: "openai local server needs no key", cfg: portcullis.ValidatorConfig{Provider: "openai", Model: "m", BaseURL: "http://127.0.0.1:11434/v1"}},
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
