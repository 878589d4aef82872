package main

import (
	"fmt"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/validator/openai"
)

// newOpenAIModel builds the OpenAI Chat Completions provider; with a
// baseURL it speaks to any OpenAI-compatible server (ollama, vLLM,
// llama.cpp), which may need no key.
func newOpenAIModel(cfg *portcullis.ValidatorConfig, key string) (portcullis.Model, error) {
	if key == "" && cfg.BaseURL == "" {
		return nil, fmt.Errorf("the openai provider needs an API key: set the environment variable %s (validator.apiKeyEnv), or a baseURL for a local server", orDefault(cfg.APIKeyEnv, "named by validator.apiKeyEnv"))
	}
	return openai.New(openai.Options{Model: cfg.Model, APIKey: key, BaseURL: cfg.BaseURL, Timeout: cfg.Timeout})
}
