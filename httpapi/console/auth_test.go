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
	for _, p := range []string{"/", "/approvals", "/approvals/decided", "/approvals/apr_x", "/blocks", "/grants", "/audit", "/audit/1", "/tools", "/policy"} {
		resp, _ := c.get(p)
		if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/login?next=") {
			t.Errorf("GET %s without a session = %d, Location %q; want 303 to /login", p, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/approvals", nil)
	req.Header.Set("X-Portcullis-Fragment", "1")
	if resp, _ := c.do(req); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("live refresh without a session = %d; want 401", resp.StatusCode)
	}
	if resp, _ := c.get("/events"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /events without a session = %d; want 401", resp.StatusCode)
	}
	id := e.confirm(portcullis.Call{Tool: "delete_element", Session: "s1", Args: map[string]any{"name": "x"}})
	for _, p := range []string{"/approvals/" + id + "/approve", "/approvals/" + id + "/deny", "/blocks/unblock", "/grants/g/revoke", "/tools/accept", "/logout"} {
		resp, _ := c.post(p, url.Values{"scope": {"once"}, "csrf": {"x"}})
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("POST %s without a session = %d; want 403", p, resp.StatusCode)
		}
	}
	if a := e.approval(id); a.Status != portcullis.ApprovalPending {
		t.Fatalf("approval after refused posts is %s; want pending", a.Status)
	}
}

func TestLogin(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	resp, _ := c.get("/approvals/decided?status=denied")
	next := resp.Header.Get("Location")
	body := c.page(next)
	resp, body = c.post("/login", url.Values{"csrf": {csrfOf(t, body)}, "token": {testToken}, "name": {"Alice Doe"}, "next": {"/approvals/decided?status=denied"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/approvals/decided?status=denied" {
		t.Fatalf("login = %d to %q; want 303 back to the page asked for\n%s", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	cookies := map[string]*http.Cookie{}
	for _, ck := range resp.Cookies() {
		cookies[ck.Name] = ck
	}
	for _, name := range []string{"portcullis_session", "portcullis_csrf"} {
		ck := cookies[name]
		switch {
		case ck == nil:
			t.Fatalf("login set no %s cookie", name)
		case !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode:
			t.Errorf("cookie %s: HttpOnly %v, SameSite %v; want HttpOnly and Strict", name, ck.HttpOnly, ck.SameSite)
		case ck.Secure:
			t.Errorf("cookie %s is Secure over plain HTTP: the browser would drop it", name)
		}
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
	if resp.StatusCode != http.StatusSeeOther {
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
			for _, ck := range resp.Cookies() {
				if ck.Name == "portcullis_session" && ck.Value != "" {
					t.Fatalf("a refused login set a session cookie")
				}
			}
			if resp, _ := c.get("/approvals"); resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("after a refused login GET /approvals = %d; want 303 to the login", resp.StatusCode)
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

func TestLoginRateLimited(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	for i := range 5 {
		if resp, _ := c.tryLogin("wrong-token-0123456789abcdef", ""); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("failed login %d = %d; want 401", i+1, resp.StatusCode)
		}
	}
	// Now even the right token is refused: the limit is checked first.
	resp, body := c.tryLogin(testToken, "")
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, "Too many failed logins") {
		t.Fatalf("login after 5 failures = %d; want 429\n%s", resp.StatusCode, body)
	}
	e.clock.Add(61 * time.Second)
	if resp, body := c.tryLogin(testToken, ""); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login a minute later = %d; want 303\n%s", resp.StatusCode, body)
	}
}

func TestLoginRateLimitedForEveryone(t *testing.T) {
	e := newEnv(t)
	// 20 failures in a minute, from any number of addresses, lock the
	// login for everyone until the minute passes.
	for i := range 20 {
		if got := loginFrom(t, e.c, fmt.Sprintf("10.0.0.%d:4000", i/4), "wrong-token-0123456789abcdef"); got != http.StatusUnauthorized {
			t.Fatalf("failed login %d = %d; want 401", i+1, got)
		}
	}
	if got := loginFrom(t, e.c, "10.0.1.1:4000", testToken); got != http.StatusTooManyRequests {
		t.Fatalf("login from a new address after 20 failures = %d; want 429", got)
	}
	e.clock.Add(time.Minute)
	if got := loginFrom(t, e.c, "10.0.1.1:4000", testToken); got != http.StatusSeeOther {
		t.Fatalf("login a minute later = %d; want 303", got)
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
	u, _ := url.Parse(e.srv.URL)
	var session string
	for _, ck := range c.hc.Jar.Cookies(u) {
		if ck.Name == "portcullis_session" {
			session = ck.Value
		}
	}
	resp, _ := c.post("/logout", url.Values{"csrf": {token}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		t.Fatalf("logout = %d to %q; want 303 to /login", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, _ := c.get("/approvals"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("GET /approvals after logout = %d; want 303 to the login", resp.StatusCode)
	}
	// The old cookie, replayed, is dead.
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/approvals", nil)
	req.AddCookie(&http.Cookie{Name: "portcullis_session", Value: session})
	resp, err := e.srv.Client().Do(req)
	must(t, err)
	resp.Body.Close()
	if resp.Request.URL.Path != "/login" {
		t.Fatalf("the session cookie replayed after logout reached %s; want the login", resp.Request.URL.Path)
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
	if resp.StatusCode != http.StatusSeeOther {
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
	for _, tc := range []struct {
		name string
		form string
		edit func(*http.Request)
	}{
		{"missing", "", nil},
		{"wrong", "x" + mine[1:], nil},
		{"another session's", otherToken, nil},
		{"CSRF cookie missing", mine, func(r *http.Request) { r.Header.Del("Cookie") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			form := url.Values{"scope": {"once"}}
			if tc.form != "" {
				form.Set("csrf", tc.form)
			}
			cl := c
			if tc.edit != nil {
				// Without the jar: the request carries the session cookie
				// and not the CSRF cookie.
				cl = &client{t: t, e: e, hc: &http.Client{Transport: e.srv.Client().Transport, CheckRedirect: c.hc.CheckRedirect}, origin: c.origin}
			}
			resp, body := cl.postWith("/approvals/"+id+"/approve", form, func(r *http.Request) {
				r.Header.Set("Origin", c.origin)
				if tc.edit != nil {
					tc.edit(r)
					u, _ := url.Parse(e.srv.URL)
					for _, ck := range c.hc.Jar.Cookies(u) {
						if ck.Name == "portcullis_session" {
							r.AddCookie(ck)
						}
					}
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
