// Package console is Portcullis's approval console: the web pages a person
// uses to answer what the gate asks of people — pending approvals (live,
// over server-sent events), decided approvals, danger-zone blocks with their
// challenge codes, grants, the audit log, tool definition changes and the
// policy in force. It is server-rendered HTML with its assets embedded and
// a few lines of JavaScript for live updates; it works on a phone.
//
// The console is a human channel. It is also a portcullis.Notifier: given
// to the gate (directly, or through a Notices made first), it learns the
// verification codes of new danger-zone challenges and shows them on the
// blocks page, and nowhere an agent reads. It must never be reachable with
// an agent's credentials, nor with anything a browser sends by itself to
// another port or host name of the machine: a person logs in with the human
// login token, and the session's credential never travels as a cookie — the
// console's script keeps it in the origin's storage and sends it as a header
// with every request. Every request is checked for its Host (DNS
// rebinding), every form for its Origin and CSRF token.
//
// It imports only the root package: the gate is reached through the small
// Gate interface declared here, which *gate.Gate satisfies.
package console

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/internal/guard"
)

// Gate is what the console asks of the decision engine: the actions of
// people. *gate.Gate satisfies it. Errors carry portcullis codes
// (NOT_FOUND, CONFLICT, INVALID_REQUEST, VERIFICATION_FAILED, RATE_LIMITED)
// the console maps to HTTP statuses.
type Gate interface {
	Approve(ctx context.Context, id, by string, forSession bool) (portcullis.Approval, error)
	DenyApproval(ctx context.Context, id, by, reason string) (portcullis.Approval, error)
	RevokeGrant(ctx context.Context, id, by string) error
	Unblock(ctx context.Context, agent, challengeID, code string) error
	ReissueChallenge(ctx context.Context, agent string) (string, error)
	AcceptTool(ctx context.Context, upstream, tool, by string) (portcullis.ToolPin, error)
	Policy() *portcullis.Policy
	// SessionGrantTTL is how long approving a call for the session lets
	// the session's calls of that tool through; the console says so.
	SessionGrantTTL() time.Duration
}

// Store is the part of a portcullis.Store the console reads (and the audit
// log it appends unblocks to). Any portcullis.Store satisfies it.
type Store interface {
	Approval(ctx context.Context, id string) (portcullis.Approval, error)
	Approvals(ctx context.Context, f portcullis.ApprovalFilter) ([]portcullis.Approval, error)
	PendingCounts(ctx context.Context) ([]portcullis.PendingCount, error)
	Blocks(ctx context.Context) ([]portcullis.Block, error)
	Grants(ctx context.Context, session string, now time.Time) ([]portcullis.Grant, error)
	ToolPins(ctx context.Context) ([]portcullis.ToolPin, error)
	BudgetUse(ctx context.Context, now time.Time) ([]portcullis.BudgetUsage, error)
	QueryAudit(ctx context.Context, q portcullis.AuditQuery) ([]portcullis.AuditRecord, error)
	AppendAudit(ctx context.Context, evs ...portcullis.AuditEvent) ([]portcullis.AuditRecord, error)
	Watch(ctx context.Context) (<-chan portcullis.Change, error)
}

// Options configure a Console.
type Options struct {
	// Gate answers people's actions. Required.
	Gate Gate
	// Store is read for the pages and watched for live updates. Required.
	Store Store
	// LoginToken is the human login token (kept in a 0600 file in the state
	// directory; `portcullis serve` prints it). Required: at least 16
	// characters. It is compared in constant time.
	LoginToken string
	// AllowedHosts are the Host header values the console answers
	// ("127.0.0.1:8080", "localhost:8080", or a bare host name for any
	// port). Any other Host is refused, which defeats DNS rebinding. Empty:
	// the loopback names (127.0.0.1, localhost, ::1) on any port, and the
	// host of BaseURL.
	AllowedHosts []string
	// BaseURL is the console's public address ("http://127.0.0.1:8080"),
	// used for links and accepted as the Origin of forms; with an https
	// scheme the cookies are Secure even behind a TLS-terminating proxy.
	BaseURL string
	// PolicyLoadedAt tells when the policy in force was loaded; nil: unknown.
	PolicyLoadedAt func() time.Time
	// PolicyProblem, when set, says why the newest version of the policy
	// file was rejected ("" when the file's newest version is in force);
	// every page shows it as a banner.
	PolicyProblem func() string
	// Logger receives security events (failed logins, refused requests).
	// Nil discards.
	Logger *slog.Logger
	// Notices is where the console learns challenge codes. Give the same
	// Notices to the gate as (part of) its notifier when the gate is built
	// before the console; nil: the console makes its own, and is itself
	// the notifier to give the gate.
	Notices *Notices
	// Clock tells the time for sessions, login rate limits and code expiry;
	// nil: the system clock.
	Clock portcullis.Clock
	// Guard, when set, is the server's shared guard (Host and Origin
	// rules, the count of wrong tokens), and AllowedHosts is not used: one
	// `portcullis serve` gives the console, the API and the MCP endpoint
	// the same one. Nil: the console makes its own from AllowedHosts and
	// BaseURL.
	Guard *guard.Guard
}

// Console is the approval console: an http.Handler for the pages, and a
// portcullis.Notifier for challenge codes. It is safe for concurrent use.
type Console struct {
	gate     Gate
	store    Store
	token    []byte
	gd       *guard.Guard
	base     *url.URL
	loadedAt func() time.Time
	// policyProblem: see Options.PolicyProblem.
	policyProblem func() string
	log           *slog.Logger
	notices       *Notices
	clock         portcullis.Clock
	key           []byte // HMAC key of CSRF tokens; new at every start
	mux           *http.ServeMux
	pages         func() (map[string]*template.Template, error) // parsed on first use
	assets        map[string]asset

	mu       sync.Mutex
	sessions map[string]*session // by the hash of the cookie's value
	done     chan struct{}       // closed by Close: live streams end
	closed   bool
}

var (
	_ http.Handler        = (*Console)(nil)
	_ portcullis.Notifier = (*Console)(nil)
)

// minTokenLength bounds how weak a login token New accepts.
const minTokenLength = 16

// New returns a console. It fails when a required option is missing.
func New(o Options) (*Console, error) {
	switch {
	case o.Gate == nil:
		return nil, errors.New("console: no gate")
	case o.Store == nil:
		return nil, errors.New("console: no store")
	case len(o.LoginToken) < minTokenLength:
		return nil, fmt.Errorf("console: the login token is %d characters; want at least %d", len(o.LoginToken), minTokenLength)
	}
	c := &Console{
		gate:          o.Gate,
		store:         o.Store,
		token:         []byte(o.LoginToken),
		loadedAt:      o.PolicyLoadedAt,
		policyProblem: o.PolicyProblem,
		log:           o.Logger,
		notices:       o.Notices,
		clock:         o.Clock,
		sessions:      map[string]*session{},
		done:          make(chan struct{}),
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.clock == nil {
		c.clock = portcullis.SystemClock{}
	}
	if c.notices == nil {
		c.notices = NewNotices(c.clock)
	}
	if o.BaseURL != "" {
		u, err := url.Parse(o.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("console: base URL %q: want http(s)://host[:port]", o.BaseURL)
		}
		c.base = u
	}
	c.gd = o.Guard
	if c.gd == nil {
		hosts, origins := o.AllowedHosts, []string(nil)
		if c.base != nil {
			origins = append(origins, c.base.Scheme+"://"+c.base.Host)
			if len(hosts) == 0 {
				hosts = append(guard.LoopbackHosts(), c.base.Host)
			}
		}
		g, err := guard.New(guard.Options{Hosts: hosts, Origins: origins, Failures: guard.FailureOptions{Now: c.clock.Now}})
		if err != nil {
			return nil, fmt.Errorf("console: %w", err)
		}
		c.gd = g
	}
	c.key = make([]byte, 32)
	if _, err := rand.Read(c.key); err != nil {
		return nil, fmt.Errorf("console: csrf key: %w", err)
	}
	// The templates are parsed when the first page is shown: a gateway
	// whose console nobody opens does not hold them (about 0.8 MB of heap).
	c.pages = sync.OnceValues(func() (map[string]*template.Template, error) { return parseTemplates(c.funcs()) })
	var err error
	if c.assets, err = loadAssets(); err != nil {
		return nil, err
	}
	c.routes()
	return c, nil
}

// Notify records a danger-zone challenge's code for the blocks page and
// wakes the pages that show what the notice is about. It returns at once;
// it never fails.
func (c *Console) Notify(ctx context.Context, n portcullis.Notice) error {
	return c.notices.Notify(ctx, n)
}

// Close ends the live-update streams, so an http.Server can shut down
// without waiting for them (register it with Server.RegisterOnShutdown).
// Pages keep working; a browser reconnects to a new server.
func (c *Console) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.closed = true
		close(c.done)
	}
	return nil
}

// ApprovalPath is the console path of an approval request's page, for
// links in notifications: BaseURL + ApprovalPath(id).
func ApprovalPath(id string) string { return "/approvals/" + url.PathEscape(id) }

func (c *Console) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /{$}", c.page(func(w http.ResponseWriter, r *http.Request, s *session) {
		http.Redirect(w, r, "/approvals", http.StatusSeeOther)
	}))
	m.HandleFunc("GET /login", c.loginPage)
	m.HandleFunc("POST /login", c.login)
	m.HandleFunc("POST /logout", c.action(c.logout))

	m.HandleFunc("GET /approvals", c.page(c.pendingPage))
	m.HandleFunc("GET /approvals/decided", c.page(c.decidedPage))
	m.HandleFunc("GET /approvals/{id}", c.page(c.approvalPage))
	m.HandleFunc("POST /approvals/{id}/approve", c.action(c.approve))
	m.HandleFunc("POST /approvals/{id}/deny", c.action(c.deny))

	m.HandleFunc("GET /blocks", c.page(c.blocksPage))
	m.HandleFunc("POST /blocks/unblock", c.action(c.unblock))
	m.HandleFunc("POST /blocks/reissue", c.action(c.reissue))

	m.HandleFunc("GET /grants", c.page(c.grantsPage))
	m.HandleFunc("POST /grants/{id}/revoke", c.action(c.revoke))

	m.HandleFunc("GET /audit", c.page(c.auditPage))
	m.HandleFunc("GET /audit/{seq}", c.page(c.auditRowPage))

	m.HandleFunc("GET /tools", c.page(c.toolsPage))
	m.HandleFunc("POST /tools/accept", c.action(c.acceptTool))

	m.HandleFunc("GET /budgets", c.page(c.budgetsPage))

	m.HandleFunc("GET /policy", c.page(c.policyPage))

	m.HandleFunc("GET /events", c.events)
	m.HandleFunc("GET /static/{file}", c.static)
	m.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/static/favicon.svg", http.StatusMovedPermanently)
	})
	c.mux = m
}

// ServeHTTP answers a request: security headers on every response, the
// Host checked before anything else, the Origin of every POST.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=()")
	h.Set("Cache-Control", "no-store")
	if !c.hostAllowed(r) {
		guard.CloseAfter(w)
		c.log.Warn("console: request refused", "severity", "HIGH", "type", "HOST_NOT_ALLOWED", "host", r.Host, "remote", r.RemoteAddr)
		http.Error(w, "Host not allowed: open the console at the address portcullis serve printed.", http.StatusForbidden)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if why := c.originProblem(r); why != "" {
			guard.CloseAfter(w)
			c.log.Warn("console: request refused", "severity", "HIGH", "type", "ORIGIN_MISMATCH", "why", why, "origin", r.Header.Get("Origin"), "path", r.URL.Path, "remote", r.RemoteAddr)
			c.refuse(w, r, http.StatusForbidden, "Refused: "+why+". Forms are accepted only from the console's own pages.")
			return
		}
	}
	c.mux.ServeHTTP(w, r)
}
