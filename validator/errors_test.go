package validator_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/validator"
	"github.com/portcullis/portcullis/validator/anthropic"
	"github.com/portcullis/portcullis/validator/openai"
)

// syncBuffer is a log sink safe for the validator's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// leaks reports the first run of MinFragment characters of a form of key
// that text holds, in any letter case.
func leaks(text, key string) string {
	low := strings.ToLower(text)
	for _, form := range []string{key, url.QueryEscape(key), url.PathEscape(key)} {
		form = strings.ToLower(form)
		for i := 0; i+8 <= len(form); i++ {
			if strings.Contains(low, form[i:i+8]) {
				return form[i : i+8]
			}
		}
	}
	return ""
}

// TestProviderErrorsAreNotTheAgents: a provider's error text never reaches
// the verdict (which the agent sees); the agent is told a fixed text with
// the HTTP status, and the operators' log keeps the provider's text with
// the key masked in whatever form the provider echoed it.
func TestProviderErrorsAreNotTheAgents(t *testing.T) {
	const key = "sk-ant-api03-Zq8/Xv+Lm2=Kd9Rt4Yw7Pn5Hc3Bv"
	const localKey = "local/7f3a+9c2e=1b5d8a6f"
	echoes := map[string]func(k string) string{
		"exact":       func(k string) string { return k },
		"truncated":   func(k string) string { return k[:14] + "..." },
		"upper-cased": strings.ToUpper,
		"url-encoded": url.QueryEscape,
		"a fragment":  func(k string) string { return "…" + k[9:21] + "…" },
		"in a URL":    func(k string) string { return "https://proxy.example/v1?key=" + url.QueryEscape(k) },
	}
	type provider struct {
		name   string
		key    string
		status int
		body   func(msg string) string
		model  func(t *testing.T, url, key string, c *http.Client) portcullis.Model
	}
	providers := []provider{
		{"anthropic", key, http.StatusUnauthorized,
			func(msg string) string {
				return `{"type":"error","error":{"type":"authentication_error","message":` + jsonString(msg) + `},"request_id":"req_011CSHoEeqs5C35K2UUqR7Fy"}`
			},
			func(t *testing.T, u, k string, c *http.Client) portcullis.Model {
				m, err := anthropic.New(anthropic.Options{Model: "claude-haiku-4-5", APIKey: k, BaseURL: u, Timeout: 5 * time.Second, HTTPClient: c})
				if err != nil {
					t.Fatal(err)
				}
				return m
			}},
		{"openai", key, http.StatusServiceUnavailable,
			func(msg string) string {
				return `{"error":{"message":` + jsonString(msg) + `,"type":"server_error","param":null,"code":"unavailable"}}`
			},
			func(t *testing.T, u, k string, c *http.Client) portcullis.Model {
				m, err := openai.New(openai.Options{Model: "gpt-5-mini", APIKey: k, BaseURL: u + "/v1", Timeout: 5 * time.Second, HTTPClient: c})
				if err != nil {
					t.Fatal(err)
				}
				return m
			}},
	}
	// A local OpenAI-compatible server's key has no well-known shape.
	local := providers[1]
	local.name, local.key, local.status = "openai local", localKey, http.StatusBadGateway
	providers = append(providers, local)
	// The same, asked through the provider program, as a gateway asks.
	for _, p := range providers[:3] {
		p.name += " through portcullis-provider"
		p.model = throughProgram(strings.Fields(p.name)[0])
		providers = append(providers, p)
	}
	for _, p := range providers {
		for name, echo := range echoes {
			t.Run(p.name+"/"+name, func(t *testing.T) {
				t.Parallel()
				msg := "invalid x-api-key " + echo(p.key) + " for this organization"
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(p.status)
					w.Write([]byte(p.body(msg)))
				}))
				t.Cleanup(srv.Close)
				var log syncBuffer
				v := newValidator(t, p.model(t, srv.URL, p.key, srv.Client()), validator.Config{
					Retries: -1, Logger: slog.New(slog.NewTextHandler(&log, nil)),
				})
				vd, err := v.Validate(context.Background(), pingRequest)
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				want := "the validator is unavailable (HTTP " + strconv.Itoa(p.status) + "); the call is refused"
				if vd.Allow || !vd.FailClosed || vd.Reasoning != want {
					t.Errorf("Validate(provider %d) = allow %v failClosed %v reason %q; want a fail-closed deny saying %q", p.status, vd.Allow, vd.FailClosed, vd.Reasoning, want)
				}
				for _, s := range []string{vd.Reasoning, vd.WhatWouldAuthorize, log.String()} {
					if l := leaks(s, p.key); l != "" {
						t.Errorf("%q shows %q of the key", s, l)
					}
				}
				if logged := log.String(); !strings.Contains(logged, "for this organization") || !strings.Contains(logged, "[redacted]") {
					t.Errorf("the log lacks the provider's text, masked:\n%s", logged)
				}
			})
		}
	}
}
