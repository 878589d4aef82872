package main

import (
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/validator"
	"github.com/portcullis/portcullis/validator/anthropic"
	"github.com/portcullis/portcullis/validator/command"
)

// buildValidator makes the policy's validator: the provider named by
// `validator.provider`, its API key from the environment variable named by
// `validator.apiKeyEnv` (never from the policy), and the rules file of the
// configured mode. A validator that cannot be built stops the start: a
// policy that asks for a validator never runs without one.
func buildValidator(pol *portcullis.Policy, log *slog.Logger) (portcullis.Validator, error) {
	cfg := pol.Validator
	if cfg == nil {
		return nil, nil
	}
	key, err := apiKey(cfg.APIKeyEnv)
	if err != nil {
		return nil, fmt.Errorf("validator: %w", err)
	}
	var m portcullis.Model
	switch cfg.Provider {
	case "anthropic":
		if key == "" {
			return nil, fmt.Errorf("validator: the anthropic provider needs an API key: set the environment variable %s (validator.apiKeyEnv)", orDefault(cfg.APIKeyEnv, "named by validator.apiKeyEnv"))
		}
		m, err = anthropic.New(anthropic.Options{Model: cfg.Model, APIKey: key, BaseURL: cfg.BaseURL, Timeout: cfg.Timeout})
	case "openai":
		m, err = newOpenAIModel(cfg, key)
	case "command":
		m, err = command.New(cfg.Command, command.Options{})
	default:
		return nil, fmt.Errorf("validator: unknown provider %q (want anthropic, openai or command)", cfg.Provider)
	}
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

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// apiKey reads the validator's API key from the environment variable the
// policy names, or — the container-secrets convention — from the file named
// by the same variable with _FILE appended. The key never comes from the
// policy file and is never logged.
func apiKey(env string) (string, error) {
	if env == "" {
		return "", nil
	}
	if k := strings.TrimSpace(os.Getenv(env)); k != "" {
		return k, nil
	}
	path := os.Getenv(env + "_FILE")
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read the API key from %s (%s_FILE): %w", path, env, err)
	}
	return strings.TrimSpace(string(b)), nil
}
