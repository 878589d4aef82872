package console_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/httpapi/console"
)

func TestNewRefusesMissingOptions(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		name string
		o    console.Options
		want string
	}{
		{"no gate", console.Options{Store: e.st, LoginToken: testToken}, "no gate"},
		{"no store", console.Options{Gate: e.g, LoginToken: testToken}, "no store"},
		{"no token", console.Options{Gate: e.g, Store: e.st}, "login token"},
		{"short token", console.Options{Gate: e.g, Store: e.st, LoginToken: "short"}, "login token"},
		{"bad base URL", console.Options{Gate: e.g, Store: e.st, LoginToken: testToken, BaseURL: "ftp://x"}, "base URL"},
		{"bad host", console.Options{Gate: e.g, Store: e.st, LoginToken: testToken, AllowedHosts: []string{"http://x/"}}, "allowed host"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := console.New(tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New(%s) = %v; want an error about %q", tc.name, err, tc.want)
			}
		})
	}
}

func TestPagesNeedLogin(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	id := e.confirm(portcullis.Call{Tool: "delete_element", Session: "s1", Args: map[string]any{"name": "x-secret-name"}})
	// A navigation carries no credential: it gets the page's frame, which
	// holds nothing of the page (its script fetches it with the credential,
	// or opens the login).
	for _, p := range []string{"/", "/approvals", "/approvals/decided", "/approvals/" + id, "/blocks", "/grants", "/audit", "/audit/1", "/tools", "/budgets", "/policy"} {
		resp, body := c.get(p)
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, `id="shell"`) {
			t.Errorf("GET %s without a session = %d; want 200 with the page's frame\n%s", p, resp.StatusCode, body)
		}
		for _, leak := range []string{id, "x-secret-name", "delete_element", `name="csrf"`, "Log out", "pending-count"} {
			if strings.Contains(body, leak) {
				t.Errorf("GET %s without a session shows %q:\n%s", p, leak, body)
			}
		}
	}
	// A fetch that names no live session gets 401: the script opens the
	// login.
	for _, edit := range []func(*http.Request){
		func(r *http.Request) { r.Header.Set("X-Portcullis-Fragment", "1") },
		func(r *http.Request) { r.Header.Set(sessionHeader, "not-a-session-0123456789abcdef0123456789") },
	} {
		req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/approvals/"+id, nil)
		edit(req)
		if resp, body := c.do(req); resp.StatusCode != http.StatusUnauthorized || strings.Contains(body, "x-secret-name") {
			t.Errorf("GET %s with %v = %d; want 401\n%s", req.URL.Path, req.Header, resp.StatusCode, body)
		}
	}
	if resp, _ := c.get("/events"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /events without a session = %d; want 401", resp.StatusCode)
	}
	for _, p := range []string{"/approvals/" + id + "/approve", "/approvals/" + id + "/deny", "/blocks/unblock", "/grants/g/revoke", "/tools/accept", "/logout"} {
		resp, _ := c.post(p, url.Values{"scope": {"once"}, "csrf": {"x"}})
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("POST %s without a session = %d; want 401", p, resp.StatusCode)
		}
	}
	if a := e.approval(id); a.Status != portcullis.ApprovalPending {
		t.Fatalf("approval after refused posts is %s; want pending", a.Status)
	}
}

func TestLogin(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	body := c.page("/login?next=" + url.QueryEscape("/approvals/decided?status=denied"))
	resp, body := c.post("/login", url.Values{"csrf": {csrfOf(t, body)}, "token": {testToken}, "name": {"Alice Doe"}, "next": {"/approvals/decided?status=denied"}})
	if !loggedIn(resp, body) || !strings.Contains(body, `data-next="/approvals/decided?status=denied"`) {
		t.Fatalf("login = %d; want 200 handing the script the credential and the page asked for\n%s", resp.StatusCode, body)
	}
	c.session = sessionOf(body)
	// The credential is never a cookie: the only cookie the login sets
	// removes the login form's nonce.
	for _, ck := range resp.Cookies() {
		if ck.Name != "portcullis_login" || ck.MaxAge >= 0 {
			t.Errorf("login set cookie %s=%q (max-age %d); want none but the nonce's removal", ck.Name, ck.Value, ck.MaxAge)
		}
		if ck.Value != "" && strings.Contains(ck.Value, c.session) {
			t.Errorf("cookie %s carries the session's credential", ck.Name)
		}
	}
	if h := resp.Header.Get("Cache-Control"); h != "no-store" {
		t.Errorf("the login's answer has Cache-Control %q; want no-store", h)
	}
	if body := c.page("/approvals"); !strings.Contains(body, "console:Alice Doe") {
		t.Errorf("the page does not name the person logged in:\n%s", body)
	}
	// Logged in, the login page sends the person on.
	if resp, _ := c.get("/login"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("GET /login with a session = %d; want 303", resp.StatusCode)
	}
}

func TestLoginOverTLSSetsSecureCookies(t *testing.T) {
	e := newEnv(t)
	srv := httptest.NewTLSServer(e.c)
	defer srv.Close()
	e.srv = srv
	c := e.client()
	c.origin = srv.URL
	resp, body := c.tryLogin(testToken, "")
	if !loggedIn(resp, body) {
		t.Fatalf("login over TLS = %d\n%s", resp.StatusCode, body)
	}
	for _, ck := range resp.Cookies() {
		if !ck.Secure {
			t.Errorf("cookie %s over TLS is not Secure", ck.Name)
		}
	}
}

func TestLoginRefusals(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		name   string
		token  string
		userNm string
		status int
		says   string
	}{
		{"wrong token", "wrong-token-0123456789abcdef-xyz", "", http.StatusUnauthorized, "Wrong token"},
		{"empty token", "", "", http.StatusUnauthorized, "Wrong token"},
		{"token prefix", testToken[:len(testToken)-1], "", http.StatusUnauthorized, "Wrong token"},
		{"token plus", testToken + "x", "", http.StatusUnauthorized, "Wrong token"},
		{"bad name", testToken, "<script>", http.StatusBadRequest, "A name has at most"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := e.client()
			resp, body := c.tryLogin(tc.token, tc.userNm)
			if resp.StatusCode != tc.status || !strings.Contains(body, tc.says) {
				t.Fatalf("login = %d; want %d saying %q\n%s", resp.StatusCode, tc.status, tc.says, body)
			}
			if c.session != "" {
				t.Fatalf("a refused login handed out a session's credential:\n%s", body)
			}
			for _, ck := range resp.Cookies() {
				if ck.Name != "portcullis_login" {
					t.Fatalf("a refused login set cookie %s", ck.Name)
				}
			}
			if resp, body := c.get("/approvals"); resp.StatusCode != http.StatusOK || !strings.Contains(body, `id="shell"`) {
				t.Fatalf("after a refused login GET /approvals = %d; want the page's frame only\n%s", resp.StatusCode, body)
			}
		})
	}
}

func TestLoginCSRF(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	body := c.page("/login")
	other := e.client()
	otherToken := csrfOf(t, other.page("/login"))
	for _, tc := range []struct {
		name string
		csrf string
	}{
		{"missing", ""},
		{"another browser's", otherToken},
		{"made up", "AAAA" + csrfOf(t, body)[4:]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := c.post("/login", url.Values{"csrf": {tc.csrf}, "token": {testToken}})
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "expired") {
				t.Fatalf("login with a %s CSRF token = %d; want 403\n%s", tc.name, resp.StatusCode, body)
			}
		})
	}
}

// Wrong login tokens from one address are limited; the right token is
// always let in, during the flood too, so guessing cannot keep people out.
func TestLoginRateLimitedRightTokenServed(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	for i := range 10 {
		if resp, _ := c.tryLogin("wrong-token-0123456789abcdef", ""); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("failed login %d = %d; want 401", i+1, resp.StatusCode)
		}
	}
	resp, body := c.tryLogin("wrong-token-0123456789abcdef", "")
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, "Too many failed logins") || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("the 11th failed login = %d (Retry-After %q); want 429 with Retry-After\n%s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	// The right token from the same address is let in at once.
	if resp, body := c.tryLogin(testToken, ""); !loggedIn(resp, body) {
		t.Fatalf("the right token after 11 failures from the same address = %d; want 200 with a session\n%s", resp.StatusCode, body)
	}
	// The allowance comes back with time.
	e.clock.Add(7 * time.Second)
	if got := loginFrom(t, e.c, "127.0.0.1:4000", "wrong-token-0123456789abcdef"); got != http.StatusUnauthorized {
		t.Fatalf("a failed login after the client earned one more attempt = %d; want 401", got)
	}
}

// Failures from many addresses lock no one out: there is no limit for
// everyone at once, and a person at any address logs in.
func TestLoginFailuresFromEverywhereLockNoOneOut(t *testing.T) {
	e := newEnv(t)
	for i := range 200 {
		remote := fmt.Sprintf("10.0.%d.%d:4000", i/50, i%50)
		if got := loginFrom(t, e.c, remote, "wrong-token-0123456789abcdef"); got != http.StatusUnauthorized && got != http.StatusTooManyRequests {
			t.Fatalf("failed login %d = %d; want 401 or 429", i+1, got)
		}
		// Each address guessing, and the right token from those same
		// addresses, still let in.
		if i%40 == 0 {
			if got := loginFrom(t, e.c, remote, testToken); got != http.StatusOK {
				t.Fatalf("the right token from %s during the flood = %d; want 200", remote, got)
			}
		}
	}
	if got := loginFrom(t, e.c, "10.0.9.1:4000", testToken); got != http.StatusOK {
		t.Fatalf("login from a new address after 200 failures from everywhere = %d; want 200", got)
	}
	// IPv6 clients are counted by their /64: rotating addresses in it
	// does not buy more guesses.
	for i := range 10 {
		loginFrom(t, e.c, fmt.Sprintf("[2001:db8:1:2::%x]:4000", i+1), "wrong-token-0123456789abcdef")
	}
	if got := loginFrom(t, e.c, "[2001:db8:1:2::ffff]:4000", "wrong-token-0123456789abcdef"); got != http.StatusTooManyRequests {
		t.Fatalf("the 11th failure from one /64 = %d; want 429", got)
	}
}

// loginFrom logs in through the handler as a client at remote (a real
// server shows every test client at 127.0.0.1) and returns the status.
func loginFrom(t *testing.T, c *console.Console, remote, token string) int {
	t.Helper()
	get := httptest.NewRequest(http.MethodGet, "http://127.0.0.1:8080/login", nil)
	get.RemoteAddr = remote
	rec := httptest.NewRecorder()
	c.ServeHTTP(rec, get)
	form := url.Values{"csrf": {csrfOf(t, rec.Body.String())}, "token": {token}}
	post := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8080/login", strings.NewReader(form.Encode()))
	post.RemoteAddr = remote
	post.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	post.Header.Set("Origin", "http://127.0.0.1:8080")
	for _, ck := range rec.Result().Cookies() {
		post.AddCookie(ck)
	}
	rec = httptest.NewRecorder()
	c.ServeHTTP(rec, post)
	return rec.Code
}

func TestLogout(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	c.login("")
	token := c.csrf()
	session := c.session
	resp, _ := c.post("/logout", url.Values{"csrf": {token}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		t.Fatalf("logout = %d to %q; want 303 to /login", resp.StatusCode, resp.Header.Get("Location"))
	}
	// The old credential, replayed, is dead.
	if resp, _ := c.get("/approvals"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET /approvals with the credential after logout = %d; want 401", resp.StatusCode)
	}
	c.session = ""
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/events", nil)
	req.Header.Set(sessionHeader, session)
	if resp, _ := c.do(req); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET /events with the credential after logout = %d; want 401", resp.StatusCode)
	}
}

func TestHostChecked(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	c.login("")
	for _, host := range []string{"evil.example", "evil.example:80", "127.0.0.1.evil.example", "attacker.localhost.example:8080"} {
		for _, p := range []string{"/login", "/approvals", "/static/console.css", "/events"} {
			req, _ := http.NewRequest(http.MethodGet, e.srv.URL+p, nil)
			req.Host = host
			resp, body := c.do(req)
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "Host not allowed") {
				t.Errorf("GET %s with Host %q = %d; want 403", p, host, resp.StatusCode)
			}
		}
	}
}

func TestAllowedHosts(t *testing.T) {
	e := newEnv(t)
	port := e.srv.URL[strings.LastIndex(e.srv.URL, ":")+1:]
	for _, tc := range []struct {
		hosts []string
		host  string
		ok    bool
	}{
		{nil, "127.0.0.1:" + port, true},
		{nil, "localhost:9999", true},
		{nil, "[::1]:1234", true},
		{nil, "example.com", false},
		{[]string{"127.0.0.1:8080"}, "127.0.0.1:8080", true},
		{[]string{"127.0.0.1:8080"}, "127.0.0.1:8081", false},
		{[]string{"127.0.0.1:8080"}, "localhost:8080", false},
		{[]string{"Console.Example"}, "console.example:443", true},
		{[]string{"console.example"}, "CONSOLE.EXAMPLE", true},
		{[]string{"console.example"}, "evil.console.example", false},
	} {
		c, err := console.New(console.Options{Gate: e.g, Store: e.st, LoginToken: testToken, AllowedHosts: tc.hosts})
		must(t, err)
		req := httptest.NewRequest(http.MethodGet, "/login", nil)
		req.Host = tc.host
		rec := httptest.NewRecorder()
		c.ServeHTTP(rec, req)
		if got := rec.Code != http.StatusForbidden; got != tc.ok {
			t.Errorf("AllowedHosts %q, Host %q: answered %v (status %d); want %v", tc.hosts, tc.host, got, rec.Code, tc.ok)
		}
	}
}

func TestBaseURLHostAndOrigin(t *testing.T) {
	e := newEnv(t, func(o *console.Options, _ string) { o.BaseURL = "https://gate.example.com" })
	c := e.client()
	// The base URL's host is allowed besides the loopback names, and its
	// origin is accepted for forms (a TLS-terminating proxy in front).
	req := httptest.NewRequest(http.MethodGet, "/login", nil)
	req.Host = "gate.example.com"
	rec := httptest.NewRecorder()
	e.c.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /login with the base URL's host = %d; want 200", rec.Code)
	}
	c.origin = "https://gate.example.com"
	resp, body := c.tryLogin(testToken, "")
	if !loggedIn(resp, body) {
		t.Fatalf("login from the base URL's origin = %d\n%s", resp.StatusCode, body)
	}
	for _, ck := range resp.Cookies() {
		if !ck.Secure {
			t.Errorf("cookie %s under an https base URL is not Secure", ck.Name)
		}
	}
}

func TestSecurityHeaders(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	check := func(what string, resp *http.Response, page bool) {
		t.Helper()
		h := resp.Header
		csp := h.Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") || !strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "default-src 'none'") {
			t.Errorf("%s: Content-Security-Policy %q", what, csp)
		}
		if h.Get("X-Frame-Options") != "DENY" || h.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: X-Frame-Options %q, X-Content-Type-Options %q", what, h.Get("X-Frame-Options"), h.Get("X-Content-Type-Options"))
		}
		if page && h.Get("Cache-Control") != "no-store" {
			t.Errorf("%s: Cache-Control %q; want no-store", what, h.Get("Cache-Control"))
		}
	}
	resp, body := c.get("/login")
	check("login page", resp, true)
	if strings.Contains(body, "<script>") || strings.Contains(body, " on") && strings.Contains(body, "onclick") {
		t.Errorf("the login page has inline script")
	}
	c.login("")
	for _, p := range []string{"/approvals", "/blocks", "/audit", "/policy", "/nonexistent"} {
		resp, body := c.get(p)
		check(p, resp, true)
		if strings.Contains(body, "<script>") || strings.Contains(body, "onclick=") || strings.Contains(body, "javascript:") {
			t.Errorf("%s has inline script", p)
		}
	}
	resp, _ = c.get("/static/console.js")
	check("script", resp, false)
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Type"), "javascript") {
		t.Errorf("GET /static/console.js = %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/static/console.js", nil)
	req.Header.Set("If-None-Match", resp.Header.Get("ETag"))
	if resp, _ := c.do(req); resp.StatusCode != http.StatusNotModified {
		t.Errorf("GET /static/console.js with its ETag = %d; want 304", resp.StatusCode)
	}
}

func TestOriginChecked(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	c.login("")
	id := e.confirm(portcullis.Call{Tool: "delete_element", Session: "s1", Args: map[string]any{"name": "x"}})
	token := c.csrf()
	form := url.Values{"csrf": {token}, "scope": {"once"}}
	for _, tc := range []struct {
		name   string
		origin string
	}{
		{"no Origin", ""},
		{"opaque Origin", "null"},
		{"another site", "http://evil.example"},
		{"another port", "http://127.0.0.1:1"},
		{"another scheme", strings.Replace(e.srv.URL, "http:", "https:", 1)},
		{"a prefix", e.srv.URL + ".evil.example"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := c.postWith("/approvals/"+id+"/approve", form, func(r *http.Request) {
				if tc.origin != "" {
					r.Header.Set("Origin", tc.origin)
				}
			})
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "Refused") {
				t.Fatalf("approve with %s = %d; want 403\n%s", tc.name, resp.StatusCode, body)
			}
			if a := e.approval(id); a.Status != portcullis.ApprovalPending {
				t.Fatalf("approval after a refused POST is %s; want pending", a.Status)
			}
		})
	}
	// The login form is checked too.
	other := e.client()
	body := other.page("/login")
	resp, _ := other.postWith("/login", url.Values{"csrf": {csrfOf(t, body)}, "token": {testToken}}, func(r *http.Request) { r.Header.Set("Origin", "http://evil.example") })
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("login from another origin = %d; want 403", resp.StatusCode)
	}
	resp, _ = c.post("/approvals/"+id+"/approve", form)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("approve from the console's own origin = %d; want 303", resp.StatusCode)
	}
}

func TestCSRFChecked(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	c.login("alice")
	id := e.confirm(portcullis.Call{Tool: "delete_element", Session: "s1", Args: map[string]any{"name": "x"}})
	other := e.client()
	other.login("mallory")
	otherToken := other.csrf()
	mine := c.csrf()
	// A token one character off this session's own (never equal to it:
	// a token may start with any character).
	wrong := "x" + mine[1:]
	if wrong == mine {
		wrong = "y" + mine[1:]
	}
	for _, tc := range []struct {
		name    string
		form    string
		session string // the credential sent; "" the client's own
	}{
		{"missing", "", ""},
		{"wrong", wrong, ""},
		{"another session's", otherToken, ""},
		{"this session's, with another session's credential", mine, other.session},
	} {
		t.Run(tc.name, func(t *testing.T) {
			form := url.Values{"scope": {"once"}}
			if tc.form != "" {
				form.Set("csrf", tc.form)
			}
			resp, body := c.postWith("/approvals/"+id+"/approve", form, func(r *http.Request) {
				r.Header.Set("Origin", c.origin)
				if tc.session != "" {
					r.Header.Set(sessionHeader, tc.session)
				}
			})
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "security token") {
				t.Fatalf("approve with a %s CSRF token = %d; want 403\n%s", tc.name, resp.StatusCode, body)
			}
			if a := e.approval(id); a.Status != portcullis.ApprovalPending {
				t.Fatalf("approval after a refused POST is %s; want pending", a.Status)
			}
		})
	}
}
