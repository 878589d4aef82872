package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// The console's cookies. All are HttpOnly and SameSite=Strict, and Secure
// when the console is served over TLS.
const (
	sessionCookie = "portcullis_session" // the login session
	csrfCookie    = "portcullis_csrf"    // the session's CSRF token (double submit)
	loginCookie   = "portcullis_login"   // the login form's nonce, before a session exists
)

// Limits of the login and of sessions.
const (
	sessionLife       = 12 * time.Hour
	maxSessions       = 64
	loginWindow       = time.Minute
	maxClientFailures = 5  // failed logins per client address per window
	maxTotalFailures  = 20 // failed logins from everywhere per window
	maxFormBytes      = 64 << 10
	maxNameLength     = 64
)

// session is a logged-in browser. Its CSRF token is bound to it: an HMAC of
// the session's secret under the console's key.
type session struct {
	key     string // the hash of the cookie's value
	user    string // the name given at login ("" when none)
	csrf    string
	expires time.Time
	flash   *flash
	done    chan struct{} // closed when the session ends
}

// actor names the person behind an action in the audit log.
func (s *session) actor() string {
	if s.user == "" {
		return "console"
	}
	return "console:" + s.user
}

// flash is a one-time message shown on the next page, kept in the session
// (never in the URL).
type flash struct {
	Error bool
	Text  string
}

func (c *Console) secure(r *http.Request) bool {
	return r.TLS != nil || (c.base != nil && c.base.Scheme == "https")
}

func (c *Console) setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: name, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.secure(r),
	})
}

// mac is an HMAC of the parts under the console's key, for CSRF tokens.
func (c *Console) mac(parts ...string) string {
	m := hmac.New(sha256.New, c.key)
	for _, p := range parts {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func randomToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		// crypto/rand does not fail on supported platforms; if it does,
		// nothing secure can be made.
		panic("console: crypto/rand: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func hashKey(v string) string {
	sum := sha256.Sum256([]byte(v))
	return hex.EncodeToString(sum[:])
}

func equal(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// currentSession returns the request's live session, or nil.
func (c *Console) currentSession(r *http.Request) *session {
	ck, err := r.Cookie(sessionCookie)
	if err != nil || ck.Value == "" {
		return nil
	}
	key := hashKey(ck.Value)
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sessions[key]
	if s == nil {
		return nil
	}
	if !c.clock.Now().Before(s.expires) {
		c.endSessionLocked(s)
		return nil
	}
	return s
}

func (c *Console) endSessionLocked(s *session) {
	if c.sessions[s.key] == s {
		delete(c.sessions, s.key)
		close(s.done)
	}
}

// newSession starts a session and returns the cookie value that names it.
func (c *Console) newSession(user string) (string, *session) {
	secret := randomToken()
	now := c.clock.Now()
	s := &session{
		key:     hashKey(secret),
		user:    user,
		csrf:    c.mac("csrf", secret),
		expires: now.Add(sessionLife),
		done:    make(chan struct{}),
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, old := range c.sessions {
		if !now.Before(old.expires) {
			c.endSessionLocked(old)
		}
	}
	for len(c.sessions) >= maxSessions {
		var oldest *session
		for _, old := range c.sessions {
			if oldest == nil || old.expires.Before(oldest.expires) {
				oldest = old
			}
		}
		c.endSessionLocked(oldest)
	}
	c.sessions[s.key] = s
	return secret, s
}

func (c *Console) setFlash(s *session, isErr bool, text string) {
	c.mu.Lock()
	s.flash = &flash{Error: isErr, Text: text}
	c.mu.Unlock()
}

func (c *Console) takeFlash(s *session) *flash {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := s.flash
	s.flash = nil
	return f
}

// isFragment reports whether the page's script asks for the page's main
// region only (a live refresh).
func isFragment(r *http.Request) bool { return r.Header.Get("X-Portcullis-Fragment") == "1" }

// page wraps a page's handler: a visitor without a session is sent to the
// login (a live refresh gets 401), and no page is stored by any cache.
func (c *Console) page(fn func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		s := c.currentSession(r)
		if s == nil {
			if isFragment(r) {
				http.Error(w, "not logged in", http.StatusUnauthorized)
				return
			}
			http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		fn(w, r, s)
	}
}

// action wraps a form's handler: it needs a session, and a CSRF token in
// the form that equals both the CSRF cookie and the session's own token.
// The Origin was checked in ServeHTTP.
func (c *Console) action(fn func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		s := c.currentSession(r)
		if s == nil {
			c.refuse(w, r, http.StatusForbidden, "You are not logged in (or your session ended). Log in and try again.")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		if err := r.ParseForm(); err != nil {
			c.refuse(w, r, http.StatusBadRequest, "The form could not be read.")
			return
		}
		form := r.PostFormValue("csrf")
		ck, err := r.Cookie(csrfCookie)
		if form == "" || err != nil || !equal(form, ck.Value) || !equal(form, s.csrf) {
			c.log.Warn("console: request refused", "severity", "HIGH", "type", "CSRF_MISMATCH", "path", r.URL.Path, "remote", r.RemoteAddr)
			c.refuse(w, r, http.StatusForbidden, "Refused: the form's security token does not match your session. Reload the page and try again.")
			return
		}
		fn(w, r, s)
	}
}

type loginView struct {
	CSRF  string
	Next  string
	Error string
	Name  string
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	next := localPath(r.URL.Query().Get("next"), "/approvals")
	if c.currentSession(r) != nil {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	c.renderLogin(w, r, http.StatusOK, loginView{Next: next})
}

func (c *Console) renderLogin(w http.ResponseWriter, r *http.Request, status int, v loginView) {
	nonce := randomToken()
	c.setCookie(w, r, loginCookie, nonce, 3600)
	v.CSRF = c.mac("login", nonce)
	c.render(w, r, nil, status, pageInfo{name: "login", title: "Log in"}, v)
}

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		c.refuse(w, r, http.StatusBadRequest, "The form could not be read.")
		return
	}
	v := loginView{Next: localPath(r.PostFormValue("next"), "/approvals"), Name: r.PostFormValue("name")}
	ck, err := r.Cookie(loginCookie)
	if form := r.PostFormValue("csrf"); form == "" || err != nil || !equal(form, c.mac("login", ck.Value)) {
		c.log.Warn("console: login refused", "severity", "HIGH", "type", "CSRF_MISMATCH", "remote", r.RemoteAddr)
		v.Error = "The login form expired. Try again."
		c.renderLogin(w, r, http.StatusForbidden, v)
		return
	}
	client := clientAddr(r)
	now := c.clock.Now()
	c.mu.Lock()
	limited := c.limiter.limited(client, now)
	c.mu.Unlock()
	if limited {
		c.log.Warn("console: login refused", "severity", "HIGH", "type", "LOGIN_RATE_LIMITED", "remote", r.RemoteAddr)
		v.Error = "Too many failed logins. Wait a minute, then try again."
		c.renderLogin(w, r, http.StatusTooManyRequests, v)
		return
	}
	given := sha256.Sum256([]byte(r.PostFormValue("token")))
	want := sha256.Sum256(c.token)
	if subtle.ConstantTimeCompare(given[:], want[:]) != 1 {
		c.mu.Lock()
		c.limiter.fail(client, now)
		c.mu.Unlock()
		c.log.Warn("console: login failed", "severity", "HIGH", "type", "LOGIN_FAILED", "remote", r.RemoteAddr)
		v.Error = "Wrong token. The login token is in the file portcullis serve names when it starts (admin.token in its state directory)."
		c.renderLogin(w, r, http.StatusUnauthorized, v)
		return
	}
	name, ok := cleanName(v.Name)
	if !ok {
		v.Error = "A name has at most 64 letters, digits, spaces and . - _ @ characters."
		c.renderLogin(w, r, http.StatusBadRequest, v)
		return
	}
	c.mu.Lock()
	c.limiter.reset(client)
	c.mu.Unlock()
	secret, s := c.newSession(name)
	c.setCookie(w, r, sessionCookie, secret, 0)
	c.setCookie(w, r, csrfCookie, s.csrf, 0)
	c.setCookie(w, r, loginCookie, "", -1)
	c.log.Info("console: logged in", "user", s.actor(), "remote", r.RemoteAddr)
	http.Redirect(w, r, v.Next, http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request, s *session) {
	c.mu.Lock()
	c.endSessionLocked(s)
	c.mu.Unlock()
	c.setCookie(w, r, sessionCookie, "", -1)
	c.setCookie(w, r, csrfCookie, "", -1)
	c.log.Info("console: logged out", "user", s.actor(), "remote", r.RemoteAddr)
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// cleanName checks the name a person gives at login, for the audit log.
func cleanName(name string) (string, bool) {
	name = strings.TrimSpace(name)
	if utf8.RuneCountInString(name) > maxNameLength {
		return "", false
	}
	for _, r := range name {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && !strings.ContainsRune(" .-_@", r) {
			return "", false
		}
	}
	return name, true
}

// localPath returns p when it is a path on this console, else def: a
// redirect never leaves the console.
func localPath(p, def string) string {
	if p == "" || p[0] != '/' || strings.HasPrefix(p, "//") || strings.ContainsAny(p, "\\\r\n") {
		return def
	}
	u, err := url.Parse(p)
	if err != nil || u.Scheme != "" || u.Host != "" {
		return def
	}
	return p
}

func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// loginLimiter counts failed logins in a sliding window, per client
// address and in total. Guarded by Console.mu.
type loginLimiter struct {
	clients map[string][]time.Time
	all     []time.Time
}

func recent(ts []time.Time, now time.Time) []time.Time {
	i := 0
	for i < len(ts) && !now.Before(ts[i].Add(loginWindow)) {
		i++
	}
	return ts[i:]
}

func (l *loginLimiter) limited(client string, now time.Time) bool {
	l.all = recent(l.all, now)
	return len(l.all) >= maxTotalFailures || len(recent(l.clients[client], now)) >= maxClientFailures
}

func (l *loginLimiter) fail(client string, now time.Time) {
	if l.clients == nil {
		l.clients = map[string][]time.Time{}
	}
	for k, ts := range l.clients {
		if len(recent(ts, now)) == 0 {
			delete(l.clients, k)
		}
	}
	l.clients[client] = append(recent(l.clients[client], now), now)
	l.all = append(recent(l.all, now), now)
}

func (l *loginLimiter) reset(client string) { delete(l.clients, client) }

// hostAllowed reports whether the console answers requests for this Host.
func (c *Console) hostAllowed(host string) bool {
	host = strings.ToLower(host)
	if host == "" {
		return false
	}
	name := hostname(host)
	if c.loopback && (name == "127.0.0.1" || name == "localhost" || name == "::1") {
		return true
	}
	for _, h := range c.hosts {
		if h == host {
			return true
		}
		if _, _, err := net.SplitHostPort(h); err != nil && strings.Trim(h, "[]") == name {
			return true
		}
	}
	return false
}

func hostname(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return strings.Trim(hostport, "[]")
}

// originProblem says why a form's Origin is not the console's own ("" when
// it is).
func (c *Console) originProblem(r *http.Request) string {
	o := r.Header.Get("Origin")
	switch {
	case o == "":
		return "the request names no Origin"
	case o == "null":
		return "the request's Origin is opaque"
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if strings.EqualFold(o, scheme+"://"+r.Host) {
		return ""
	}
	if c.base != nil && strings.EqualFold(o, c.base.Scheme+"://"+c.base.Host) {
		return ""
	}
	return "the form came from another origin"
}
