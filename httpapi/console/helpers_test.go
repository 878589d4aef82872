package console_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/httpapi/console"
	"github.com/portcullis/portcullis/internal/noticetest"
	"github.com/portcullis/portcullis/memstore"
	"github.com/portcullis/portcullis/policy"
)

const testToken = "test-login-token-0123456789abcdef"

// testPolicy has a CONFIRM_SESSION tool (create_element), CONFIRM_SINGLE_USE
// tools (delete_element, an unclassified tool), and send_email, which the
// validator judges and whose password argument is redacted.
const testPolicy = `version: 1
tools:
  list_elements: {endpoint: READ}
  create_element: {endpoint: CREATE, summary: "create {{.type}} {{.name}}"}
  delete_element: {endpoint: DELETE, summary: "delete {{.name}}", rationale: "Destructive operation"}
  send_email: {endpoint: CREATE, risk: external-write, summary: "send to {{.to}}, subject {{.subject}}", redact: [password]}
validator:
  provider: command
  command: [judge]
  model: judge-1
  rules: ./rules.md
elements:
  - name: Security Persona
    type: persona
    gatekeeper: {confirm: [create_element]}
`

// testClock is a clock the test moves.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// judge stands in for the validator's language model: it allows, with a
// fixed confidence.
type judge struct{}

func (judge) Validate(context.Context, portcullis.ValidationRequest) (portcullis.Verdict, error) {
	return portcullis.Verdict{Allow: true, Reasoning: "the user asked for this email", Confidence: 0.93, Provider: "command", Model: "judge-1", PromptHash: "sha256:00"}, nil
}

// both sends a notice to two notifiers.
type both [2]portcullis.Notifier

func (b both) Notify(ctx context.Context, n portcullis.Notice) error {
	err0 := b[0].Notify(ctx, n)
	err1 := b[1].Notify(ctx, n)
	if err0 != nil {
		return err0
	}
	return err1
}

// env is a console on a real HTTP server on 127.0.0.1, in front of a real
// gate over a real store. newEnv uses a memory store and a clock the test
// moves (clock); the browser tests use SQLite and the system clock.
type env struct {
	t          testing.TB
	clock      *testClock // nil on the system clock
	st         portcullis.Store
	g          *gate.Gate
	c          *console.Console
	srv        *httptest.Server
	policyPath string
	loadedAt   time.Time
	heard      *noticetest.Recorder
}

// envOption adjusts the console's options; addr is the server's host:port.
type envOption func(o *console.Options, addr string)

func newEnv(t testing.TB, opts ...envOption) *env {
	t.Helper()
	clock := &testClock{t: time.Date(2026, 11, 21, 9, 30, 0, 0, time.UTC)}
	e := build(t, memstore.New(clock), clock, opts...)
	e.clock = clock
	return e
}

func build(t testing.TB, st portcullis.Store, clock portcullis.Clock, opts ...envOption) *env {
	t.Helper()
	e := &env{t: t, st: st, heard: &noticetest.Recorder{}}
	dir := t.TempDir()
	e.policyPath = filepath.Join(dir, "policy.yaml")
	must(t, os.WriteFile(e.policyPath, []byte(testPolicy), 0o600))
	must(t, os.WriteFile(filepath.Join(dir, "rules.md"), []byte("Emails only to acme.com.\n"), 0o600))
	pol, _, err := policy.Load(e.policyPath)
	must(t, err)
	notices := console.NewNotices(clock)
	e.g, err = gate.New(pol, gate.WithStore(e.st), gate.WithClock(clock), gate.WithValidator(judge{}),
		gate.WithNotifier(both{notices, e.heard}))
	must(t, err)
	e.loadedAt = clock.Now()
	e.srv = httptest.NewUnstartedServer(nil)
	o := console.Options{
		Gate: e.g, Store: e.st, LoginToken: testToken, Notices: notices, Clock: clock,
		PolicyLoadedAt: func() time.Time { return e.loadedAt },
	}
	for _, f := range opts {
		f(&o, e.srv.Listener.Addr().String())
	}
	e.c, err = console.New(o)
	must(t, err)
	e.srv.Config.Handler = e.c
	e.srv.Start()
	t.Cleanup(func() {
		must(t, e.c.Close())
		e.srv.Close()
	})
	return e
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// confirm decides a call that needs a person and returns its approval ID.
func (e *env) confirm(c portcullis.Call) string {
	e.t.Helper()
	d, err := e.g.Decide(context.Background(), c)
	must(e.t, err)
	if d.Outcome != portcullis.OutcomeConfirm || d.ChallengeID == "" {
		e.t.Fatalf("Decide(%s) = %s (%s); want confirm with an approval request", c.Tool, d.Outcome, d.Reason)
	}
	return d.ChallengeID
}

func (e *env) approval(id string) portcullis.Approval {
	e.t.Helper()
	a, err := e.st.Approval(context.Background(), id)
	must(e.t, err)
	return a
}

// auditRows returns the audit events of a kind.
func (e *env) auditRows(kind portcullis.AuditKind) []portcullis.AuditEvent {
	e.t.Helper()
	recs, err := e.st.QueryAudit(context.Background(), portcullis.AuditQuery{Kind: kind, Limit: 1000})
	must(e.t, err)
	var out []portcullis.AuditEvent
	for _, r := range recs {
		ev, err := r.Event()
		must(e.t, err)
		out = append(out, ev)
	}
	return out
}

// client is an HTTP client that does what the console's script does in a
// browser: it keeps the session's credential that the login hands it and
// sends it as the X-Portcullis-Session header with every request, and the
// console's own Origin on every POST. It has a cookie jar (the login
// form's nonce) and follows no redirects.
type client struct {
	t       testing.TB
	e       *env
	hc      *http.Client
	origin  string
	session string // the credential, after login
}

func (e *env) client() *client {
	jar, err := cookiejar.New(nil)
	must(e.t, err)
	hc := &http.Client{
		Transport:     e.srv.Client().Transport,
		Jar:           jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return &client{t: e.t, e: e, hc: hc, origin: e.srv.URL}
}

func (c *client) do(req *http.Request) (*http.Response, string) {
	c.t.Helper()
	if c.session != "" && req.Header.Get(sessionHeader) == "" {
		req.Header.Set(sessionHeader, c.session)
	}
	resp, err := c.hc.Do(req)
	must(c.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must(c.t, err)
	return resp, string(b)
}

func (c *client) get(path string) (*http.Response, string) {
	c.t.Helper()
	req, err := http.NewRequest(http.MethodGet, c.e.srv.URL+path, nil)
	must(c.t, err)
	return c.do(req)
}

// page GETs a page and fails unless it is 200.
func (c *client) page(path string) string {
	c.t.Helper()
	resp, body := c.get(path)
	if resp.StatusCode != http.StatusOK {
		c.t.Fatalf("GET %s = %d; want 200\n%s", path, resp.StatusCode, body)
	}
	return body
}

func (c *client) post(path string, form url.Values) (*http.Response, string) {
	c.t.Helper()
	return c.postWith(path, form, func(r *http.Request) { r.Header.Set("Origin", c.origin) })
}

func (c *client) postWith(path string, form url.Values, edit func(*http.Request)) (*http.Response, string) {
	c.t.Helper()
	req, err := http.NewRequest(http.MethodPost, c.e.srv.URL+path, strings.NewReader(form.Encode()))
	must(c.t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if edit != nil {
		edit(req)
	}
	return c.do(req)
}

var (
	csrfRE    = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	sessionRE = regexp.MustCompile(`data-session="([^"]+)"`)
)

// sessionHeader carries the console session's credential.
const sessionHeader = "X-Portcullis-Session"

// sessionOf returns the credential the answer to a login hands the
// console's script, or "".
func sessionOf(body string) string {
	if m := sessionRE.FindStringSubmatch(body); m != nil {
		return m[1]
	}
	return ""
}

// loggedIn reports whether the answer to a login form is a new session.
func loggedIn(resp *http.Response, body string) bool {
	return resp.StatusCode == http.StatusOK && sessionOf(body) != ""
}

func csrfOf(t testing.TB, body string) string {
	t.Helper()
	m := csrfRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no CSRF token in the page:\n%s", body)
	}
	return m[1]
}

// login logs in with the token and a name, and fails unless it works.
func (c *client) login(name string) {
	c.t.Helper()
	resp, body := c.tryLogin(testToken, name)
	if !loggedIn(resp, body) {
		c.t.Fatalf("login = %d; want 200 with the session's credential\n%s", resp.StatusCode, body)
	}
}

// tryLogin submits the login form; when it logs in, the client keeps the
// credential the answer carries, as the console's script does.
func (c *client) tryLogin(token, name string) (*http.Response, string) {
	c.t.Helper()
	body := c.page("/login")
	resp, body := c.post("/login", url.Values{"csrf": {csrfOf(c.t, body)}, "token": {token}, "name": {name}})
	if s := sessionOf(body); s != "" {
		c.session = s
	}
	return resp, body
}

// csrf returns the session's CSRF token, as a page carries it.
func (c *client) csrf() string {
	c.t.Helper()
	return csrfOf(c.t, c.page("/approvals"))
}

// act posts a form with the session's CSRF token.
func (c *client) act(path string, form url.Values) (*http.Response, string) {
	c.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	form.Set("csrf", c.csrf())
	return c.post(path, form)
}

// section returns the part of body from the element with this id to the
// end of its list item or section.
func section(t testing.TB, body, id string) string {
	t.Helper()
	i := strings.Index(body, `id="`+id+`"`)
	if i < 0 {
		t.Fatalf("no element %q in the page:\n%s", id, body)
	}
	rest := body[i:]
	for _, end := range []string{"</li>", "</section>"} {
		if j := strings.Index(rest, end); j >= 0 {
			return rest[:j]
		}
	}
	return rest
}
