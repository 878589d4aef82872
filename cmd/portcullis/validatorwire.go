package main

import (
	"log/slog"
	"os"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/validator/providers"
)

// buildValidator makes the policy's validator (providers.New), its API key
// from the environment variable the policy names.
func buildValidator(pol *portcullis.Policy, log *slog.Logger) (portcullis.Validator, error) {
	return providers.New(pol, os.Getenv, log)
}
