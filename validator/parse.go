package validator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/portcullis/portcullis"
)

// verdictSchema is the JSON schema of the answer. Every field is required
// and no other field is allowed; parseAnswer enforces the same shape on
// every answer, whether or not the provider constrained it.
var verdictSchema = []byte(`{
  "type": "object",
  "properties": {
    "verdict": {"type": "string", "enum": ["allow", "deny"], "description": "allow only when the rules clearly permit the action; deny when they forbid it or you are unsure"},
    "reasoning": {"type": "string", "description": "why, in one or two sentences, naming the rule that decided"},
    "whatWouldAuthorize": {"type": "string", "description": "for a deny: what the user would have to say or change for the action to pass; empty for an allow"},
    "confidence": {"type": "number", "minimum": 0, "maximum": 1, "description": "how sure you are of the verdict, from 0 to 1"}
  },
  "required": ["verdict", "reasoning", "whatWouldAuthorize", "confidence"],
  "additionalProperties": false
}`)

// VerdictSchema returns the JSON schema of the verdict object, as passed to
// the model in ModelPrompt.Schema. The caller may keep the slice; it is a
// copy.
func VerdictSchema() []byte { return bytes.Clone(verdictSchema) }

// maxReasoning bounds the reasoning and whatWouldAuthorize kept from an
// answer (in bytes); longer text is cut, not rejected.
const maxReasoning = 2000

// answer is a parsed, well-formed verdict.
type answer struct {
	allow              bool
	reasoning          string
	whatWouldAuthorize string
	confidence         float64
}

// parseAnswer parses the model's answer strictly. It returns an error, which
// the caller turns into a fail-closed deny, for anything that is not exactly
// one well-formed verdict object: a refusal, a truncated or empty answer,
// prose, two objects, trailing text, a missing or unknown field, a duplicate
// key, a verdict other than "allow" or "deny", a confidence outside 0..1, or
// any other part beside the answer (a second tool call or choice, text
// beside a structured verdict: ModelAnswer.Others).
// Surrounding whitespace is allowed; when the answer is not Structured, so is
// one ```json fenced block holding the object and nothing else.
func parseAnswer(a portcullis.ModelAnswer) (answer, error) {
	switch {
	case a.Refused:
		return answer{}, fmt.Errorf("the model refused to answer")
	case a.Truncated:
		return answer{}, fmt.Errorf("the model's answer was cut off")
	}
	for _, o := range a.Others {
		if strings.TrimSpace(o) != "" {
			return answer{}, fmt.Errorf("the model's answer holds more than its one verdict (another verdict, or text beside it): %s", quoteStart(strings.TrimSpace(o)))
		}
	}
	text := strings.TrimSpace(a.Text)
	if text == "" {
		return answer{}, fmt.Errorf("the model's answer was empty")
	}
	if !a.Structured && strings.HasPrefix(text, "```") {
		inner, ok := unfence(text)
		if !ok {
			return answer{}, fmt.Errorf("the model's answer is not one ```json block and nothing else")
		}
		text = inner
	}
	return parseVerdictJSON(text)
}

// unfence returns the body of "```json\n...\n```"; the body must not hold
// another fence.
func unfence(text string) (string, bool) {
	rest, ok := strings.CutPrefix(text, "```json")
	if !ok {
		return "", false
	}
	nl := strings.IndexByte(rest, '\n')
	if nl < 0 || strings.TrimSpace(rest[:nl]) != "" {
		return "", false
	}
	body, ok := strings.CutSuffix(rest[nl+1:], "```")
	if !ok || strings.Contains(body, "```") {
		return "", false
	}
	return strings.TrimSpace(body), true
}

func parseVerdictJSON(text string) (answer, error) {
	if !strings.HasPrefix(text, "{") {
		return answer{}, fmt.Errorf("the model's answer is not a JSON object: %s", quoteStart(text))
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil { // the '{'
		return answer{}, fmt.Errorf("the model's answer is malformed JSON")
	}
	var (
		out        answer
		seen       = map[string]bool{}
		verdict    string
		confidence json.Number
	)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return answer{}, fmt.Errorf("the model's answer is malformed JSON")
		}
		key, _ := tok.(string)
		if seen[key] {
			return answer{}, fmt.Errorf("the model's answer repeats the field %q", key)
		}
		seen[key] = true
		val, err := dec.Token()
		if err != nil {
			return answer{}, fmt.Errorf("the model's answer is malformed JSON")
		}
		switch key {
		case "verdict", "reasoning", "whatWouldAuthorize":
			s, ok := val.(string)
			if !ok {
				return answer{}, fmt.Errorf("the model's answer: %q is not a string", key)
			}
			switch key {
			case "verdict":
				verdict = s
			case "reasoning":
				out.reasoning = cut(s, maxReasoning)
			default:
				out.whatWouldAuthorize = cut(s, maxReasoning)
			}
		case "confidence":
			n, ok := val.(json.Number)
			if !ok {
				return answer{}, fmt.Errorf("the model's answer: \"confidence\" is not a number")
			}
			confidence = n
		default:
			return answer{}, fmt.Errorf("the model's answer has an unknown field %q", cut(key, 40))
		}
	}
	if _, err := dec.Token(); err != nil { // the '}'
		return answer{}, fmt.Errorf("the model's answer is malformed JSON")
	}
	if _, err := dec.Token(); err != io.EOF {
		return answer{}, fmt.Errorf("the model's answer has text after the verdict object")
	}
	for _, k := range []string{"verdict", "reasoning", "whatWouldAuthorize", "confidence"} {
		if !seen[k] {
			return answer{}, fmt.Errorf("the model's answer lacks %q", k)
		}
	}
	switch verdict {
	case "allow":
		out.allow = true
	case "deny":
	default:
		return answer{}, fmt.Errorf("the model's verdict %q is neither \"allow\" nor \"deny\"", cut(verdict, 40))
	}
	c, err := strconv.ParseFloat(string(confidence), 64)
	if err != nil || math.IsNaN(c) || c < 0 || c > 1 {
		return answer{}, fmt.Errorf("the model's confidence %s is not between 0 and 1", cut(string(confidence), 40))
	}
	out.confidence = c
	return out, nil
}

// quoteStart quotes the beginning of an answer for a reason.
func quoteStart(s string) string { return strconv.Quote(cut(s, 60)) }

// cut shortens s to at most n bytes, on a rune boundary, marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
