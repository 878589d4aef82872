// Command portcullis-provider asks the validator's model for a Portcullis
// gateway: the Anthropic Messages API or OpenAI Chat Completions (and any
// compatible server), through their official SDKs. The gateway starts it
// when a policy's validator.provider is anthropic or openai, and speaks to
// it in JSON lines on its standard input and output (package
// validator/remote); it is not meant to be run by hand.
//
// It exists so that the gateway itself does not link the SDKs: Go
// initialises every package linked into a binary, and theirs keep
// megabytes resident in every gateway, validator or not. Install it beside
// portcullis:
//
//	go install github.com/portcullis/portcullis/cmd/portcullis-provider@latest
//
// It reads its configuration and the API key from its standard input, and exits when that
// ends: when the gateway exits or dies.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/validator/anthropic"
	"github.com/portcullis/portcullis/validator/openai"
	"github.com/portcullis/portcullis/validator/remote"
)

func main() {
	if len(os.Args) > 1 {
		fmt.Fprintf(os.Stderr, "usage: %s (no arguments)\n\nThe Portcullis gateway starts this program to ask its validator's model;\nit speaks JSON lines on standard input and output, and is not run by hand.\n", remote.Program)
		os.Exit(2)
	}
	if err := remote.Serve(os.Stdin, os.Stdout, open, describe); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", remote.Program, err)
		os.Exit(1)
	}
}

// open builds the provider the gateway's policy names.
func open(cfg remote.Config, key string) (portcullis.Model, error) {
	switch cfg.Provider {
	case "anthropic":
		return anthropic.New(anthropic.Options{Model: cfg.Model, APIKey: key, BaseURL: cfg.BaseURL, Timeout: cfg.Timeout})
	case "openai":
		return openai.New(openai.Options{Model: cfg.Model, APIKey: key, BaseURL: cfg.BaseURL, Timeout: cfg.Timeout})
	}
	return nil, fmt.Errorf("unknown provider %q (want anthropic or openai)", cfg.Provider)
}

// describe carries what the providers' own errors know across to the
// gateway.
func describe(err error, e *remote.Error) {
	var ae *anthropic.Error
	var oe *openai.Error
	switch {
	case errors.As(err, &ae):
		e.StatusCode, e.Type, e.RequestID, e.RetryAfter = ae.StatusCode, ae.Type, ae.RequestID, ae.RetryAfter
	case errors.As(err, &oe):
		e.StatusCode, e.Type, e.Code, e.RequestID, e.RetryAfter = oe.StatusCode, oe.Type, oe.Code, oe.RequestID, oe.RetryAfter
	}
}
