// Package providers builds the validator a policy asks for: the provider
// its `validator.provider` names (the Anthropic Messages API, OpenAI Chat
// Completions or any compatible server, a local command), with the API key
// from the environment variable `validator.apiKeyEnv` names (never from the
// policy), behind package validator's prompts, parsing, retries and budget.
//
// It reads no environment of its own: the caller passes how to look a
// variable up.
package providers

import (
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/validator"
	"github.com/portcullis/portcullis/validator/anthropic"
	"github.com/portcullis/portcullis/validator/command"
	"github.com/portcullis/portcullis/validator/openai"
)

// Getenv looks up an environment variable ("" when it is not set), as
// os.Getenv does.
type Getenv func(name string) string

// New makes the policy's validator, nil when the policy has none. A
// validator that cannot be built is an error: a policy that asks for a
// validator never runs without one.
func New(pol *portcullis.Policy, getenv Getenv, log *slog.Logger) (portcullis.Validator, error) {
	cfg := pol.Validator
	if cfg == nil {
		return nil, nil
	}
	m, err := Model(cfg, getenv)
	if err != nil {
		return nil, fmt.Errorf("validator: %w", err)
	}
	v, err := validator.New(m, validator.Config{
		Mode:           portcullis.ValidationMode(cfg.Mode),
		RulesFile:      cfg.Rules,
		PolicyDocument: pol.PolicyDocument,
		Timeout:        cfg.Timeout,
		PolicyHash:     pol.Hash,
		Logger:         log,
		Budget: validator.Budget{
			PerMinute:  cfg.Budget.PerMinute,
			Burst:      cfg.Budget.Burst,
			Concurrent: cfg.Budget.Concurrent,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("validator: %w", err)
	}
	return v, nil
}

// Model is the provider cfg names, with its API key.
func Model(cfg *portcullis.ValidatorConfig, getenv Getenv) (portcullis.Model, error) {
	key, err := APIKey(cfg.APIKeyEnv, getenv)
	if err != nil {
		return nil, err
	}
	keyEnv := cfg.APIKeyEnv
	if keyEnv == "" {
		keyEnv = "named by validator.apiKeyEnv"
	}
	var m portcullis.Model
	switch cfg.Provider {
	case "anthropic":
		if key == "" {
			return nil, fmt.Errorf("the anthropic provider needs an API key: set the environment variable %s (validator.apiKeyEnv)", keyEnv)
		}
		m, err = anthropic.New(anthropic.Options{Model: cfg.Model, APIKey: key, BaseURL: cfg.BaseURL, Timeout: cfg.Timeout})
	case "openai":
		// With a baseURL it speaks to any OpenAI-compatible server
		// (ollama, vLLM, llama.cpp), which may need no key.
		if key == "" && cfg.BaseURL == "" {
			return nil, fmt.Errorf("the openai provider needs an API key: set the environment variable %s (validator.apiKeyEnv), or a baseURL for a local server", keyEnv)
		}
		m, err = openai.New(openai.Options{Model: cfg.Model, APIKey: key, BaseURL: cfg.BaseURL, Timeout: cfg.Timeout})
	case "command":
		m, err = command.New(cfg.Command, command.Options{})
	default:
		return nil, fmt.Errorf("unknown provider %q (want anthropic, openai or command)", cfg.Provider)
	}
	if err != nil {
		return nil, err
	}
	return m, nil
}

// APIKey reads the validator's API key from the environment variable env,
// or — the container-secrets convention — from the file named by the same
// variable with _FILE appended. It is "" when env is "" or neither is set.
// The key never comes from the policy file and is never logged.
func APIKey(env string, getenv Getenv) (string, error) {
	if env == "" {
		return "", nil
	}
	if k := strings.TrimSpace(getenv(env)); k != "" {
		return k, nil
	}
	path := getenv(env + "_FILE")
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read the API key from %s (%s_FILE): %w", path, env, err)
	}
	return strings.TrimSpace(string(b)), nil
}
