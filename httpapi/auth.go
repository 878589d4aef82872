package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/portcullis/portcullis"
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

// authenticate reads the bearer token and says whose it is. On failure it
// has written the answer: 401 for a missing or unknown token (an unknown
// one counts against the client's failed attempts), 429 while the client
// has failed too often.
func (a *api) authenticate(w http.ResponseWriter, r *http.Request) (tokenKind, string, bool) {
	client := clientKey(r.RemoteAddr)
	if wait, limited := a.limiter.limited(client); limited {
		w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds())+1))
		a.refuse(w, r, http.StatusTooManyRequests, portcullis.CodeRateLimited, "too many requests with a wrong token: wait a minute and try again")
		return 0, "", false
	}
	token, ok := bearer(r)
	if !ok {
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
	a.limiter.fail(client)
	w.Header().Set("WWW-Authenticate", `Bearer realm="portcullis", error="invalid_token"`)
	a.refuse(w, r, http.StatusUnauthorized, codeUnauthorized, "wrong token")
	return 0, "", false
}

// refuse answers with an error and logs the refusal as a security event.
func (a *api) refuse(w http.ResponseWriter, r *http.Request, status int, code portcullis.Code, msg string) {
	a.log.Warn("httpapi: request refused", "severity", "HIGH", "type", string(code), "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
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

// hostRule is one entry of the Host allow-list.
type hostRule struct {
	host string // lower case, no brackets, no trailing dot
	port string // empty: any port
}

func parseHostRule(s string) (hostRule, error) {
	host, port := splitHost(s)
	if host == "" {
		return hostRule{}, errors.New("empty host name")
	}
	return hostRule{host: host, port: port}, nil
}

// splitHost splits a Host header or allow-list entry into a normalized name
// and a port (empty when none).
func splitHost(s string) (host, port string) {
	s = strings.TrimSpace(s)
	if h, p, err := net.SplitHostPort(s); err == nil {
		host, port = h, p
	} else {
		host = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	}
	return strings.TrimSuffix(strings.ToLower(host), "."), port
}

func (a *api) hostAllowed(hostport string) bool {
	host, port := splitHost(hostport)
	if host == "" {
		return false
	}
	for _, rule := range a.hosts {
		if rule.host == host && (rule.port == "" || rule.port == port) {
			return true
		}
	}
	return false
}

// hostOK checks the Host header and, when present, the Origin header
// against the allow-list: a page on another site, or a name rebound to
// this address, is refused with 403.
func (a *api) hostOK(w http.ResponseWriter, r *http.Request) bool {
	if !a.hostAllowed(r.Host) {
		a.refuse(w, r, http.StatusForbidden, codeForbidden, "host "+strconv.Quote(r.Host)+" is not allowed")
		return false
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		u, err := url.Parse(origin)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || !a.hostAllowed(u.Host) {
			a.refuse(w, r, http.StatusForbidden, codeForbidden, "origin "+strconv.Quote(origin)+" is not allowed")
			return false
		}
	}
	return true
}

// clientKey names the client a failed attempt is counted against: its IP
// address, or for IPv6 its /64, which one host usually holds whole.
func clientKey(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap()
	if ip.Is6() {
		return netip.PrefixFrom(ip, 64).Masked().String()
	}
	return ip.String()
}

// The failed-token limit: a client with maxFailures wrong tokens within
// failWindow is refused (429), whatever token it sends, until the oldest of
// them leaves the window.
const (
	maxFailures  = 10
	failWindow   = time.Minute
	maxTracked   = 4096
	overflowSlot = "(many clients)"
)

// failLimiter counts wrong tokens per client. It tracks at most maxTracked
// clients; past that, new clients share one slot, so a flood of addresses
// cannot grow it without bound (and is limited together).
type failLimiter struct {
	clock portcullis.Clock
	mu    sync.Mutex
	fails map[string][]time.Time
}

func newFailLimiter(clock portcullis.Clock) *failLimiter {
	return &failLimiter{clock: clock, fails: map[string][]time.Time{}}
}

// limited reports whether the client is refused now, and for how long.
func (l *failLimiter) limited(client string) (time.Duration, bool) {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	ts := l.recent(l.slot(client, now), now)
	if len(ts) < maxFailures {
		return 0, false
	}
	return ts[0].Add(failWindow).Sub(now), true
}

func (l *failLimiter) fail(client string) {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	key := l.slot(client, now)
	ts := append(l.recent(key, now), now)
	if len(ts) > maxFailures {
		ts = ts[len(ts)-maxFailures:]
	}
	l.fails[key] = ts
}

// recent drops the client's failures older than the window.
func (l *failLimiter) recent(key string, now time.Time) []time.Time {
	ts := l.fails[key]
	i := 0
	for i < len(ts) && !now.Before(ts[i].Add(failWindow)) {
		i++
	}
	if i == len(ts) {
		delete(l.fails, key)
		return nil
	}
	ts = ts[i:]
	l.fails[key] = ts
	return ts
}

func (l *failLimiter) slot(client string, now time.Time) string {
	if _, ok := l.fails[client]; ok || len(l.fails) < maxTracked {
		return client
	}
	for k := range l.fails {
		l.recent(k, now)
	}
	if len(l.fails) < maxTracked {
		return client
	}
	return overflowSlot
}
