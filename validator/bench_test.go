package validator_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/validator"
)

// instant is a model that answers at once: the benchmarks measure the
// stage's own cost, not a model's.
type instant struct{}

func (instant) Name() string { return "fake/instant" }

func (instant) Ask(context.Context, portcullis.ModelPrompt) (portcullis.ModelAnswer, error) {
	return portcullis.ModelAnswer{Text: allowJSON, Structured: true}, nil
}

var benchRequest = portcullis.ValidationRequest{
	Tool:    "send_email",
	Summary: "send to jane@acme.com, subject Re: lunch",
	Args:    map[string]any{"to": "jane@acme.com", "subject": "Re: lunch", "body": "See you at noon at the usual place."},
	Risk:    portcullis.RiskExternalWrite,
}

func benchValidate(b *testing.B, cfg validator.Config) {
	v := newValidator(b, instant{}, cfg)
	ctx := context.Background()
	if vd, err := v.Validate(ctx, benchRequest); err != nil || !vd.Allow {
		b.Fatalf("Validate = %+v, %v; want allow", vd, err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if vd, err := v.Validate(ctx, benchRequest); err != nil || !vd.Allow {
			b.Fatalf("Validate = %+v, %v; want allow", vd, err)
		}
	}
}

// BenchmarkValidate is one uncached validation with a model that answers at
// once: rules file stat, prompt with a fresh nonce, prompt hash, the shared
// call, strict parsing. Budget: under 1 ms.
func BenchmarkValidate(b *testing.B) {
	benchValidate(b, validator.Config{CacheTTL: -1})
}

// BenchmarkValidateContextual is BenchmarkValidate in the contextual mode
// with a 20-message conversation.
func BenchmarkValidateContextual(b *testing.B) {
	cfg := validator.Config{CacheTTL: -1, Mode: portcullis.ValidateContextual}
	cfg.PolicyDocument = cfgFile(b, "permissions.md", "Don't send emails to anyone outside @acme.com without asking first.\nSlack messages in #leadership require user confirmation.\n")
	v := newValidator(b, instant{}, cfg)
	req := benchRequest
	req.Trigger, req.UserPresent = "daily summary", false
	for range 20 {
		req.Conversation = append(req.Conversation, portcullis.Message{Role: "user", Content: "Please email Jane that lunch at noon works, and cc nobody else."})
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if vd, err := v.Validate(ctx, req); err != nil || !vd.Allow {
			b.Fatalf("Validate = %+v, %v; want allow", vd, err)
		}
	}
}

// BenchmarkValidateCached is a cache hit. Budget: under 20 µs.
func BenchmarkValidateCached(b *testing.B) {
	benchValidate(b, validator.Config{CacheTTL: time.Hour})
}

func cfgFile(b *testing.B, name, text string) string {
	b.Helper()
	p := filepath.Join(b.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		b.Fatal(err)
	}
	return p
}
