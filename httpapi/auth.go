package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/internal/guard"
)

// minTokenLen is the shortest human token New accepts.
const minTokenLen = 16

// ActorHeader names the person behind a request made with the human token,
// for the audit log: "ana" is recorded as "ana (token:human)". Without it
// the actor is "token:human". The name is the caller's word, not proven:
// whoever holds the human token may write any name.
const ActorHeader = "Portcullis-Actor"

type tokenKind int

const (
	tokenHuman tokenKind = iota + 1
	tokenAgent
)

// authenticate reads the bearer token and says whose it is. A right token
// is always served, however many wrong ones were sent before it from the
// same address. On failure it has written the answer and marked the
// connection to be closed: 401 for a missing or wrong token; a wrong one
// is counted against the client (guard.Failures), and once the client has
// used up its allowance the answer is 429 with Retry-After.
func (a *api) authenticate(w http.ResponseWriter, r *http.Request) (tokenKind, string, bool) {
	token, ok := bearer(r)
	if !ok {
		guard.CloseAfter(w)
		w.Header().Set("WWW-Authenticate", `Bearer realm="portcullis"`)
		writeError(w, http.StatusUnauthorized, codeUnauthorized, "missing token: send Authorization: Bearer TOKEN")
		return 0, "", false
	}
	// Hashing first makes the comparison constant-time in the token's
	// length too.
	if sum := sha256.Sum256([]byte(token)); a.hasHuman && subtle.ConstantTimeCompare(sum[:], a.human[:]) == 1 {
		return tokenHuman, "", true
	}
	if a.agentToken != nil {
		if agent, ok := a.agentToken(token); ok && agent != "" {
			return tokenAgent, agent, true
		}
	}
	f := a.gd.Failures.Fail("api", guard.ClientKey(r.RemoteAddr))
	guard.CloseAfter(w)
	if f.Limited {
		w.Header().Set("Retry-After", guard.RetryAfterSeconds(f.RetryAfter))
		if f.FirstLimited {
			a.log.Warn("httpapi: too many wrong tokens; further ones from this client are counted, not logged, until it slows down", "severity", "HIGH", "type", string(portcullis.CodeRateLimited), "client", f.Client, "remote", r.RemoteAddr)
		}
		writeError(w, http.StatusTooManyRequests, portcullis.CodeRateLimited, "too many wrong tokens from this address: wait "+guard.RetryAfterSeconds(f.RetryAfter)+"s before trying another (a right token is always served)")
		return 0, "", false
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="portcullis", error="invalid_token"`)
	a.refuse(w, r, http.StatusUnauthorized, codeUnauthorized, "wrong token")
	return 0, "", false
}

// refuse answers with an error, logs the refusal as a security event, and
// closes the connection after the answer.
func (a *api) refuse(w http.ResponseWriter, r *http.Request, status int, code portcullis.Code, msg string) {
	a.log.Warn("httpapi: request refused", "severity", "HIGH", "type", string(code), "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
	guard.CloseAfter(w)
	writeError(w, status, code, msg)
}

func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// actorOf names the person behind a human-token request for the audit log.
func actorOf(r *http.Request) (string, error) {
	name := strings.TrimSpace(r.Header.Get(ActorHeader))
	if name == "" {
		return "token:human", nil
	}
	if len(name) > 64 || !utf8.ValidString(name) || strings.ContainsFunc(name, func(c rune) bool { return !unicode.IsPrint(c) }) {
		return "", errors.New(ActorHeader + ": want a printable name of at most 64 bytes")
	}
	return name + " (token:human)", nil
}

// hostOK checks the Host header and, when present, the Origin header: a
// page on another site or another port, or a name rebound to this address,
// is refused with 403. The rules are the shared guard's.
func (a *api) hostOK(w http.ResponseWriter, r *http.Request) bool {
	if err := a.gd.Sites.CheckHost(r); err != nil {
		a.refuse(w, r, http.StatusForbidden, codeForbidden, err.Error())
		return false
	}
	if err := a.gd.Sites.CheckOrigin(r); err != nil && !errors.Is(err, guard.ErrNoOrigin) {
		a.refuse(w, r, http.StatusForbidden, codeForbidden, err.Error())
		return false
	}
	return true
}
