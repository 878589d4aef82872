package validator_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/validator"
)

// FuzzAnswer feeds arbitrary answers to the parser through Validate: an
// allow must come only from text that is (after whitespace and, for free
// text, one ```json fence) exactly one verdict object saying "allow", with
// the four fields and a confidence in 0..1.
func FuzzAnswer(f *testing.F) {
	for _, s := range []string{allowJSON, denyJSON, "```json\n" + allowJSON + "\n```", "ALLOW: fine", allowJSON + allowJSON, `{"verdict":"allow"}`, ""} {
		f.Add(s, false)
		f.Add(s, true)
	}
	rules := filepath.Join(f.TempDir(), "rules.md")
	if err := os.WriteFile(rules, []byte(groundRules), 0o600); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, text string, structured bool) {
		m := &fakeModel{ask: func(context.Context, portcullis.ModelPrompt) (portcullis.ModelAnswer, error) {
			return portcullis.ModelAnswer{Text: text, Structured: structured}, nil
		}}
		v := newValidator(t, m, validator.Config{RulesFile: rules})
		vd, err := v.Validate(context.Background(), pingRequest)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(vd.Reasoning, "no rules") {
			t.Fatalf("the rules file is gone: %s", vd.Reasoning)
		}
		if vd.Allow == vd.FailClosed && vd.Allow {
			t.Fatalf("allow and fail-closed at once for %q", text)
		}
		if !vd.Allow {
			return
		}
		body := strings.TrimSpace(text)
		if !structured {
			if inner, ok := strings.CutPrefix(body, "```json"); ok {
				body = strings.TrimSpace(strings.TrimSuffix(inner, "```"))
			}
		}
		var got struct {
			Verdict            *string  `json:"verdict"`
			Reasoning          *string  `json:"reasoning"`
			WhatWouldAuthorize *string  `json:"whatWouldAuthorize"`
			Confidence         *float64 `json:"confidence"`
		}
		dec := json.NewDecoder(bytes.NewReader([]byte(body)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&got); err != nil || dec.More() {
			t.Fatalf("allowed %q, which is not one verdict object (%v)", text, err)
		}
		if got.Verdict == nil || *got.Verdict != "allow" || got.Reasoning == nil || got.WhatWouldAuthorize == nil || got.Confidence == nil || *got.Confidence < 0 || *got.Confidence > 1 {
			t.Fatalf("allowed %q", text)
		}
	})
}
