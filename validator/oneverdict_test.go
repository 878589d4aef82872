package validator_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/validator"
	"github.com/portcullis/portcullis/validator/anthropic"
	"github.com/portcullis/portcullis/validator/command"
	"github.com/portcullis/portcullis/validator/openai"
)

// part is one piece of a scripted reply: a verdict object or free text.
type part struct {
	verdict string // the verdict's JSON, or
	text    string // text
}

func verdictPart(v string) part { return part{verdict: v} }
func textPart(s string) part    { return part{text: s} }

// outcome is what the validator makes of a reply.
type outcome string

const (
	gotAllow      outcome = "allow"
	gotDeny       outcome = "deny"
	gotFailClosed outcome = "fail-closed deny"
)

func outcomeOf(t *testing.T, vd portcullis.Verdict) outcome {
	t.Helper()
	switch {
	case vd.Allow && vd.FailClosed:
		t.Fatalf("verdict is allow with FailClosed; never both")
	case vd.Allow:
		return gotAllow
	case vd.FailClosed:
		return gotFailClosed
	}
	return gotDeny
}

// oneVerdictReplies is the one table of replies every provider is tested
// with: a reply is one verdict or none, whatever the wire format.
var oneVerdictReplies = []struct {
	name  string
	parts []part
	want  outcome
}{
	{"one allow", []part{verdictPart(allowJSON)}, gotAllow},
	{"one deny", []part{verdictPart(denyJSON)}, gotDeny},
	{"allow then deny", []part{verdictPart(allowJSON), verdictPart(denyJSON)}, gotFailClosed},
	{"deny then allow", []part{verdictPart(denyJSON), verdictPart(allowJSON)}, gotFailClosed},
	{"allow twice", []part{verdictPart(allowJSON), verdictPart(allowJSON)}, gotFailClosed},
	{"allow beside DENY", []part{verdictPart(allowJSON), textPart("DENY")}, gotFailClosed},
	{"DENY beside allow", []part{textPart("DENY: this sends data outside"), verdictPart(allowJSON)}, gotFailClosed},
	{"deny beside ALLOW", []part{verdictPart(denyJSON), textPart("ALLOW")}, gotFailClosed},
	{"text only", []part{textPart("allow")}, gotFailClosed},
	{"allow and a blank line", []part{verdictPart(allowJSON), textPart("\n")}, gotAllow},
}

// replyServer is a fake provider: it answers every request with the body
// reply renders, and records the prompts it was sent.
type replyServer struct {
	t      *testing.T
	render func(parts []part) string
	parts  []part
}

func (s *replyServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if _, err := w.Write([]byte(s.render(s.parts))); err != nil {
		s.t.Errorf("write the reply: %v", err)
	}
}

// anthropicReply renders parts as a Messages API response: a verdict is a
// record_verdict tool call, text a text block.
func anthropicReply(parts []part) string {
	var blocks []string
	for i, p := range parts {
		if p.verdict != "" {
			blocks = append(blocks, `{"type":"tool_use","id":"toolu_0`+string(rune('1'+i))+`","name":"record_verdict","input":`+p.verdict+`}`)
			continue
		}
		blocks = append(blocks, `{"type":"text","text":`+jsonString(p.text)+`}`)
	}
	return `{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","model":"claude-haiku-4-5-20251001",` +
		`"content":[` + strings.Join(blocks, ",") + `],"stop_reason":"tool_use","stop_sequence":null,` +
		`"usage":{"input_tokens":412,"output_tokens":87}}`
}

// openaiReply renders parts as one Chat Completions message whose content
// is the parts one after another.
func openaiReply(parts []part) string {
	return completionOf([]string{joined(parts)})
}

// openaiChoicesReply renders each part as a choice of its own.
func openaiChoicesReply(parts []part) string {
	var contents []string
	for _, p := range parts {
		contents = append(contents, p.verdict+p.text)
	}
	return completionOf(contents)
}

func completionOf(contents []string) string {
	var choices []string
	for i, c := range contents {
		choices = append(choices, `{"index":`+string(rune('0'+i))+`,"message":{"role":"assistant","content":`+jsonString(c)+`,"refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}`)
	}
	return `{"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion","created":1741570283,"model":"gpt-5-mini-2025-08-07",` +
		`"choices":[` + strings.Join(choices, ",") + `],"usage":{"prompt_tokens":412,"completion_tokens":87,"total_tokens":499}}`
}

// joined is the parts as one text, as a program would print them.
func joined(parts []part) string {
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p.verdict + p.text)
	}
	return b.String()
}

func jsonString(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// providerUnderTest makes a Model that answers with the given reply.
type providerUnderTest struct {
	name  string
	model func(t *testing.T, parts []part) portcullis.Model
}

func httpProvider(render func([]part) string, newModel func(t *testing.T, url string, c *http.Client) portcullis.Model) func(*testing.T, []part) portcullis.Model {
	return func(t *testing.T, parts []part) portcullis.Model {
		srv := httptest.NewServer(&replyServer{t: t, render: render, parts: parts})
		t.Cleanup(srv.Close)
		return newModel(t, srv.URL, srv.Client())
	}
}

func newAnthropic(t *testing.T, url string, c *http.Client) portcullis.Model {
	m, err := anthropic.New(anthropic.Options{Model: "claude-haiku-4-5", APIKey: "sk-ant-api03-test", BaseURL: url, Timeout: 5 * time.Second, HTTPClient: c})
	if err != nil {
		t.Fatalf("anthropic.New: %v", err)
	}
	return m
}

func newOpenAI(t *testing.T, url string, c *http.Client) portcullis.Model {
	m, err := openai.New(openai.Options{Model: "gpt-5-mini", APIKey: "sk-proj-test", BaseURL: url + "/v1", Timeout: 5 * time.Second, HTTPClient: c})
	if err != nil {
		t.Fatalf("openai.New: %v", err)
	}
	return m
}

// commandModel runs a program that prints the reply.
func commandModel(t *testing.T, parts []part) portcullis.Model {
	if runtime.GOOS == "windows" {
		t.Skip("the command provider's test program is a shell script: run it on a Unix system")
	}
	dir := t.TempDir()
	reply := filepath.Join(dir, "reply.txt")
	if err := os.WriteFile(reply, []byte(joined(parts)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	prog := filepath.Join(dir, "judge.sh")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\ncat > /dev/null\ncat \"$1\"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	m, err := command.New([]string{prog, reply}, command.Options{})
	if err != nil {
		t.Fatalf("command.New: %v", err)
	}
	return m
}

var providersUnderTest = []providerUnderTest{
	{"anthropic", httpProvider(anthropicReply, newAnthropic)},
	{"openai", httpProvider(openaiReply, newOpenAI)},
	{"openai choices", httpProvider(openaiChoicesReply, newOpenAI)},
	{"command", commandModel},
	{"anthropic through portcullis-provider", httpProvider(anthropicReply, withKey(throughProgram("anthropic"), "sk-ant-api03-test"))},
	{"openai choices through portcullis-provider", httpProvider(openaiChoicesReply, withKey(throughProgram("openai"), "sk-proj-test"))},
}

// withKey is newModel with the key given.
func withKey(newModel func(t *testing.T, url, key string, c *http.Client) portcullis.Model, key string) func(t *testing.T, url string, c *http.Client) portcullis.Model {
	return func(t *testing.T, url string, c *http.Client) portcullis.Model { return newModel(t, url, key, c) }
}

// TestOneVerdictOrNone: on every provider, a reply that carries more than
// one verdict, or a verdict and text beside it, is a fail-closed deny.
func TestOneVerdictOrNone(t *testing.T) {
	for _, p := range providersUnderTest {
		for _, tc := range oneVerdictReplies {
			t.Run(p.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				v := newValidator(t, p.model(t, tc.parts), validator.Config{Retries: -1})
				vd, err := v.Validate(context.Background(), pingRequest)
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				if got := outcomeOf(t, vd); got != tc.want {
					t.Errorf("Validate(%s reply %q) = %s (%s); want %s", p.name, joined(tc.parts), got, vd.Reasoning, tc.want)
				}
			})
		}
	}
}
