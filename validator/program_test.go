package validator_test

import (
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/validator/remote"
	"github.com/portcullis/portcullis/validator/remote/remotetest"
)

// The provider program, built once for the package's tests that ask a
// model through it, as a gateway does.
var program struct {
	once      sync.Once
	dir, path string
	err       error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if program.dir != "" {
		os.RemoveAll(program.dir)
	}
	os.Exit(code)
}

func providerProgram(t *testing.T) string {
	t.Helper()
	program.once.Do(func() {
		if program.dir, program.err = os.MkdirTemp("", "validator-test"); program.err == nil {
			program.path, program.err = remotetest.BuildIn(program.dir)
		}
	})
	if program.err != nil {
		t.Fatal(program.err)
	}
	return program.path
}

// throughProgram asks provider ("anthropic" or "openai") at url with key
// through the provider program. The program sends with its own HTTP
// client: the test servers are plain HTTP.
func throughProgram(provider string) func(t *testing.T, url, key string, _ *http.Client) portcullis.Model {
	return func(t *testing.T, url, key string, _ *http.Client) portcullis.Model {
		cfg := remote.Config{Provider: provider, Model: "claude-haiku-4-5", BaseURL: url, Timeout: 5 * time.Second}
		if provider == "openai" {
			cfg.Model, cfg.BaseURL = "gpt-5-mini", url+"/v1"
		}
		m, err := remote.New(remote.Options{Program: providerProgram(t), Config: cfg, APIKey: key})
		if err != nil {
			t.Fatalf("remote.New: %v", err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
}
