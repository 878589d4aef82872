package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/portcullis/portcullis/internal/guard"
)

// The console's session credential travels only in this request header,
// never as a cookie. Browsers send a host's cookies to every port of it,
// and some to every name that resolves to it: a page an agent serves on
// another port of 127.0.0.1, or on another *.localhost name, would receive
// a session cookie and could replay it. A header is sent only by the
// console's own script, which keeps the credential in the console's
// origin's localStorage (scheme, host and port: no other port can read it).
const sessionHeader = "X-Portcullis-Session"

// loginCookie is the login form's nonce, before a session exists: HttpOnly,
// SameSite=Strict, Secure when the console is served over TLS. It lets
// nobody act; it only ties the login form to the browser that asked for it.
const loginCookie = "portcullis_login"

// Limits of the login and of sessions. Wrong login tokens are counted by
// the shared guard (guard.Failures), per client.
const (
	sessionLife   = 12 * time.Hour
	maxSessions   = 64
	maxFormBytes  = 64 << 10
	maxNameLength = 64
)

// session is a logged-in browser. Its CSRF token is bound to it: an HMAC of
// the session's secret under the console's key.
type session struct {
	key     string // the hash of the credential
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
	// Denied: the message confirms a denial, which is not shown as a
	// success.
	Denied bool
	Text   string
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

// currentSession returns the live session whose credential the request
// carries in the session header, or nil. Cookies play no part.
func (c *Console) currentSession(r *http.Request) *session {
	secret := r.Header.Get(sessionHeader)
	if secret == "" {
		return nil
	}
	key := hashKey(secret)
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

// newSession starts a session and returns the credential that names it.
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

// page wraps a page's handler, and no page is stored by any cache. A
// request without the session header — a navigation, a link opened in a
// new tab, or anything else that carries only what a browser attaches by
// itself — gets the shell: the page's frame without any of its data, whose
// script fetches the page again with the credential, or sends the person
// to the login. A request that names a session that is not live (a live
// refresh, a fetch with an ended session) gets 401.
func (c *Console) page(fn func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		s := c.currentSession(r)
		if s == nil {
			if isFragment(r) || r.Header.Get(sessionHeader) != "" {
				c.unauthorized(w)
				return
			}
			c.render(w, r, nil, http.StatusOK, pageInfo{name: "shell", title: "Portcullis"}, nil)
			return
		}
		fn(w, r, s)
	}
}

// unauthorized answers a request that needs a session and has none.
func (c *Console) unauthorized(w http.ResponseWriter) {
	w.Header().Set("Cache-Control", "no-store")
	http.Error(w, "not logged in", http.StatusUnauthorized)
}

// action wraps a form's handler: it needs a session, named by the session
// header (which only the console's own script sends), and a CSRF token in
// the form that equals the session's own token. The Origin was checked in
// ServeHTTP.
func (c *Console) action(fn func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		s := c.currentSession(r)
		if s == nil {
			c.log.Warn("console: request refused", "severity", "HIGH", "type", "NO_SESSION", "path", r.URL.Path, "remote", r.RemoteAddr)
			c.refuse(w, r, http.StatusUnauthorized, "You are not logged in (or your session ended). Log in and try again.")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		if err := r.ParseForm(); err != nil {
			c.refuse(w, r, http.StatusBadRequest, "The form could not be read.")
			return
		}
		form := r.PostFormValue("csrf")
		if form == "" || !equal(form, s.csrf) {
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
	// The right token is always let in, however many wrong ones were
	// tried before it; a wrong one is counted against the client, and past
	// its allowance answered 429.
	given := sha256.Sum256([]byte(r.PostFormValue("token")))
	want := sha256.Sum256(c.token)
	if subtle.ConstantTimeCompare(given[:], want[:]) != 1 {
		f := c.gd.Failures.Fail("console", guard.ClientKey(r.RemoteAddr))
		guard.CloseAfter(w)
		if f.Limited {
			if f.FirstLimited {
				c.log.Warn("console: too many failed logins; further ones from this client are counted, not logged, until it slows down", "severity", "HIGH", "type", "LOGIN_RATE_LIMITED", "client", f.Client, "remote", r.RemoteAddr)
			}
			w.Header().Set("Retry-After", guard.RetryAfterSeconds(f.RetryAfter))
			v.Error = "Too many failed logins from this address. Wait " + guard.RetryAfterSeconds(f.RetryAfter) + " seconds, then try again: the right token is always accepted."
			c.renderLogin(w, r, http.StatusTooManyRequests, v)
			return
		}
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
	secret, s := c.newSession(name)
	c.setCookie(w, r, loginCookie, "", -1)
	c.log.Info("console: logged in", "user", s.actor(), "remote", r.RemoteAddr)
	// The credential goes to the console's script in this page, the
	// answer to the login form, and never into a cookie or a URL; the
	// script keeps it and opens the page asked for.
	c.render(w, r, nil, http.StatusOK, pageInfo{name: "session", title: "Logged in"}, sessionView{Secret: secret, Next: v.Next})
}

// sessionView is the page that answers a successful login: it hands the
// session's credential to the console's script.
type sessionView struct {
	Secret string
	Next   string
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request, s *session) {
	c.mu.Lock()
	c.endSessionLocked(s)
	c.mu.Unlock()
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

// hostAllowed reports whether the console answers requests for this Host:
// the shared guard's allow-list.
func (c *Console) hostAllowed(r *http.Request) bool {
	return c.gd.Sites.HostAllowed(r.Host, r.TLS != nil)
}

// originProblem says why a form's Origin is not the console's own ("" when
// it is): a form must name its Origin, and it must be the console's (the
// request's own Host, or BaseURL's).
func (c *Console) originProblem(r *http.Request) string {
	err := c.gd.Sites.CheckOrigin(r)
	switch {
	case err == nil:
		return ""
	case errors.Is(err, guard.ErrNoOrigin):
		return "the request names no Origin"
	case r.Header.Get("Origin") == "null":
		return "the request's Origin is opaque"
	}
	return "the form came from another origin"
}
