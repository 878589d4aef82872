// Package failure is what the LLM providers share in reporting a request
// that failed: which failures may succeed if asked again, how long the
// server asked to wait, and keeping the API key out of every message.
package failure

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Unanswered describes a request that got no error status from the API:
// the caller's context ended (not retryable: nobody waits for the answer;
// the cause is the context's error), the request's own timeout expired
// (retryable), no answer came at all — a refused or dropped connection,
// DNS, TLS — (retryable), or an answer came that does not decode (not
// retryable: asking again is not expected to help). The message is to be
// prefixed with the provider and model, and scrubbed.
func Unanswered(ctx context.Context, err error) (msg string, retryable bool, cause error) {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return "request abandoned: " + ctxErr.Error(), false, ctxErr
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "no answer within the timeout: " + err.Error(), true, err
	}
	var urlErr *url.Error
	var netErr net.Error
	if errors.As(err, &urlErr) || errors.As(err, &netErr) {
		return err.Error(), true, err
	}
	return "malformed response: " + err.Error(), false, err
}

// RetryAfter reads how long the server asked the caller to wait:
// retry-after-ms (OpenAI's), then retry-after in seconds or as an HTTP
// date. Zero when it did not say.
func RetryAfter(h http.Header) time.Duration {
	if ms, err := strconv.ParseFloat(h.Get("Retry-After-Ms"), 64); err == nil && ms > 0 {
		return time.Duration(ms * float64(time.Millisecond))
	}
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil && secs > 0 {
		return time.Duration(secs * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := time.Until(t); d > 0 {
			return d
		}
	}
	return 0
}

// Scrub removes the API key from a message, wherever a server or a
// library may have echoed it: the key itself in any letter case, URL-encoded,
// or in part (any run of MinFragment or more of its characters); and
// anything else that looks like a credential (see Mask).
func Scrub(s, key string) string {
	if key != "" {
		s = maskKey(s, key)
	}
	return Mask(s)
}

// MaxText bounds the text of a provider's error kept in a message.
const MaxText = 1000

// Cut bounds a provider's error text to MaxText bytes, marking the cut.
func Cut(s string) string {
	if len(s) <= MaxText {
		return s
	}
	return strings.ToValidUTF8(s[:MaxText], "") + "…"
}

// MinFragment is the shortest run of a key's characters that Scrub masks
// on its own: a key echoed cut short, or split, is still masked.
const MinFragment = 8

// redacted replaces what is masked.
const redacted = "[redacted]"

// maskKey masks every occurrence of the key, or of a run of at least
// MinFragment of its characters, in any letter case and URL-encoded.
func maskKey(s, key string) string {
	variants := []string{key, url.QueryEscape(key), url.PathEscape(key)}
	lower := strings.ToLower(s)
	mask := make([]bool, len(s))
	for _, v := range variants {
		v = strings.ToLower(v)
		min := min(MinFragment, len(v))
		for i := 0; i < len(lower); i++ {
			for j := 0; j < len(v); j++ {
				n := 0
				for i+n < len(lower) && j+n < len(v) && lower[i+n] == v[j+n] {
					n++
				}
				if n >= min {
					for k := i; k < i+n; k++ {
						mask[k] = true
					}
				}
			}
		}
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if !mask[i] {
			b.WriteByte(s[i])
			continue
		}
		if i == 0 || !mask[i-1] {
			b.WriteString(redacted)
		}
	}
	return b.String()
}

// credentials are what looks like a secret in a message: API keys of the
// usual shapes, authorization headers, name=value pairs whose name says
// secret, credentials in a URL's query or user info, and long opaque
// tokens. The first group, when there is one, is kept. Compiled when first
// needed, not at start: a process that never masks a message (a gateway
// with no validator) does not pay for them.
var credentials = sync.OnceValue(func() []*regexp.Regexp {
	return []*regexp.Regexp{
		regexp.MustCompile(`(?i)\b(?:sk|pk|rk)-[a-z0-9_\-]{6,}`),
		regexp.MustCompile(`(?i)\b(?:AKIA|ASIA)[A-Z0-9]{12,}`),
		regexp.MustCompile(`(?i)\b((?:bearer|basic)\s+)[a-z0-9._~+/=%\-]{6,}`),
		regexp.MustCompile(`(?i)\b((?:x-)?(?:api[_-]?key|access[_-]?token|auth[_-]?token|token|secret|password|passwd|authorization)["']?\s*[:=]\s*["']?)[^\s"'&,;}]{4,}`),
		regexp.MustCompile(`(?i)([?&](?:key|api_key|apikey|token|access_token|sig|signature|code)=)[^&\s"'#]+`),
		regexp.MustCompile(`(?i)(://)[^/\s:@]+:[^/\s@]+@`),
		regexp.MustCompile(`\b[A-Za-z0-9_\-+/]*(?:[0-9][A-Za-z_\-+/]|[A-Za-z_\-+/][0-9])[A-Za-z0-9_\-+/]*={0,2}`),
	}
})

// Mask replaces anything in s that looks like a credential with
// "[redacted]", whatever key it belongs to: for text from a provider or a
// program (an error body, a program's standard error) that goes to a log.
func Mask(s string) string {
	res := credentials()
	for i, re := range res {
		if i == len(res)-1 {
			s = re.ReplaceAllStringFunc(s, func(m string) string {
				if len(m) < 32 {
					return m
				}
				return redacted
			})
			continue
		}
		if re.NumSubexp() > 0 {
			s = re.ReplaceAllString(s, "${1}"+redacted)
		} else {
			s = re.ReplaceAllString(s, redacted)
		}
	}
	return s
}
