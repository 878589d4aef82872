// Package httpapi is Portcullis's HTTP API. Agents call the decision API —
// POST /v1/decide, POST /v1/outcomes and GET /v1/decisions/{id}/wait — with
// agent tokens that fix their identity; people call the approvals API —
// /v1/approvals, /v1/blocks and /v1/grants — with the human token. It also
// serves /healthz, /readyz and its own OpenAPI document at
// /v1/openapi.json.
//
// It must never let an agent act as a person: an agent token is refused on
// every people's endpoint, an agent's request cannot name another agent or
// carry its own grants, and no response an agent can read carries a
// verification code. It sees the engine through the small Gate interface
// (which *gate.Gate satisfies) and never imports package gate.
package httpapi

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/internal/guard"
)

// Gate is what the API needs of the decision engine; *gate.Gate satisfies
// it. Errors carry the root package's codes: INVALID_REQUEST, NOT_FOUND,
// CONFLICT, VERIFICATION_FAILED and RATE_LIMITED become 400, 404, 409, 400
// and 429; anything else is a 500 whose detail goes to the log only.
type Gate interface {
	// Decide decides one call (portcullis.Decider).
	Decide(ctx context.Context, c portcullis.Call) (portcullis.Decision, error)
	// RecordOutcome records how a step of an autonomous run ended.
	RecordOutcome(ctx context.Context, runID string, o portcullis.StepOutcome) error
	// AwaitApproval waits until a person answers an approval request, it
	// expires, or ctx ends.
	AwaitApproval(ctx context.Context, id string) (portcullis.Approval, error)
	// Approve approves a pending request on behalf of a person (by), once
	// or for the session; CONFLICT when it is no longer pending.
	Approve(ctx context.Context, id, by string, forSession bool) (portcullis.Approval, error)
	// DenyApproval denies a pending request; the reason is shown to the agent.
	DenyApproval(ctx context.Context, id, by, reason string) (portcullis.Approval, error)
	// RevokeGrant revokes a grant on behalf of a person; NOT_FOUND when
	// there is none.
	RevokeGrant(ctx context.Context, id, by string) error
	// Unblock clears an agent's danger-zone block with its challenge's code.
	Unblock(ctx context.Context, agent, challengeID, code string) error
}

// Options configure the API. Gate and Store are required.
type Options struct {
	// Gate decides calls and carries out people's actions.
	Gate Gate
	// Store is read for the lists people see (approvals, grants, blocks),
	// to find the approval request behind a decision, and to audit an
	// unblock with who did it.
	Store portcullis.Store
	// AgentToken maps an agent bearer token to the agent it identifies.
	// The identity it returns replaces any "agent" in a request body. It
	// should compare tokens in constant time. Nil refuses every agent.
	AgentToken func(token string) (agent string, ok bool)
	// HumanToken is the people's bearer token (the state directory's
	// admin.token), compared in constant time. Empty refuses every
	// people's request; otherwise it must be at least 16 characters.
	HumanToken string
	// AllowedHosts is the allow-list of Host header values, the defence
	// against DNS rebinding: "name" allows the name on any port,
	// "name:port" on that port only. Empty allows the loopback names only
	// (localhost, 127.0.0.1, ::1). A request with an Origin header (a
	// browser's) must come from the gateway's own origin: the scheme, host
	// and port of its allowed Host. /healthz and /readyz are not checked.
	AllowedHosts []string
	// Ready reports whether the gateway can decide (its store answers, its
	// policy is loaded); /readyz answers 503 while it returns an error. Nil
	// means always ready.
	Ready func(ctx context.Context) error
	// Logger receives refused requests and internal errors. Nil discards.
	Logger *slog.Logger
	// Clock tells the time for the grant list and the failed-token limit.
	// Nil is the system clock.
	Clock portcullis.Clock
	// Guard, when set, is the server's shared guard (Host and Origin
	// rules, the count of wrong tokens), and AllowedHosts is not used: one
	// `portcullis serve` gives the API, the console and the MCP endpoint
	// the same one. Nil: the API makes its own from AllowedHosts.
	Guard *guard.Guard
}

// DefaultWait and MaxWait bound GET /v1/decisions/{id}/wait: a server that
// mounts the API needs a WriteTimeout longer than MaxWait.
const (
	DefaultWait = 30 * time.Second
	MaxWait     = 60 * time.Second
)

// MountPoints are the paths under which New's handler serves: mount it at
// each of them beside other handlers (the MCP gateway, the console).
func MountPoints() []string { return []string{"/v1/", "/healthz", "/readyz"} }

//go:embed openapi.json
var openapiDoc []byte

// OpenAPI returns the API's OpenAPI 3.1 document, as served at
// /v1/openapi.json.
func OpenAPI() []byte { return slices.Clone(openapiDoc) }

// audience says who may call a route.
type audience int

const (
	public audience = iota // no token; /healthz, /readyz and the OpenAPI document
	agents                 // an agent token
	people                 // the human token
)

// principal is who made an authenticated request.
type principal struct {
	agent string // the agent an agent token names
	actor string // who a person is, for the audit log
}

type route struct {
	pattern string // "METHOD /path", as ServeMux and the OpenAPI document write it
	who     audience
	anyHost bool // skip the Host and Origin checks (health probes)
	handle  func(a *api, w http.ResponseWriter, r *http.Request, p principal)
}

// routes is every endpoint; the OpenAPI document lists exactly these (a
// test holds them together).
var routes = []route{
	{pattern: "GET /healthz", who: public, anyHost: true, handle: (*api).healthz},
	{pattern: "GET /readyz", who: public, anyHost: true, handle: (*api).readyz},
	{pattern: "GET /v1/openapi.json", who: public, handle: (*api).openapi},

	{pattern: "POST /v1/decide", who: agents, handle: (*api).decide},
	{pattern: "POST /v1/outcomes", who: agents, handle: (*api).outcome},
	{pattern: "GET /v1/decisions/{id}/wait", who: agents, handle: (*api).wait},

	{pattern: "GET /v1/approvals", who: people, handle: (*api).approvals},
	{pattern: "GET /v1/approvals/{id}", who: people, handle: (*api).approval},
	{pattern: "POST /v1/approvals/{id}/approve", who: people, handle: (*api).approve},
	{pattern: "POST /v1/approvals/{id}/deny", who: people, handle: (*api).deny},
	{pattern: "GET /v1/blocks", who: people, handle: (*api).blocks},
	{pattern: "POST /v1/blocks/{agent}/unblock", who: people, handle: (*api).unblock},
	{pattern: "GET /v1/grants", who: people, handle: (*api).grants},
	{pattern: "DELETE /v1/grants/{id}", who: people, handle: (*api).revokeGrant},
}

type api struct {
	gate       Gate
	store      portcullis.Store
	agentToken func(string) (string, bool)
	human      [sha256.Size]byte // SHA-256 of the human token; compared in constant time
	hasHuman   bool
	gd         *guard.Guard
	ready      func(context.Context) error
	log        *slog.Logger
	clock      portcullis.Clock
	mux        *http.ServeMux
}

// New returns the API's handler. It serves the paths of MountPoints.
func New(o Options) (http.Handler, error) {
	if o.Gate == nil {
		return nil, errors.New("httpapi: no gate")
	}
	if o.Store == nil {
		return nil, errors.New("httpapi: no store")
	}
	a := &api{
		gate: o.Gate, store: o.Store, agentToken: o.AgentToken, ready: o.Ready,
		log: o.Logger, clock: o.Clock,
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if a.clock == nil {
		a.clock = portcullis.SystemClock{}
	}
	if o.HumanToken != "" {
		if len(o.HumanToken) < minTokenLen {
			return nil, fmt.Errorf("httpapi: the human token is %d characters; want at least %d", len(o.HumanToken), minTokenLen)
		}
		a.human, a.hasHuman = sha256.Sum256([]byte(o.HumanToken)), true
	}
	a.gd = o.Guard
	if a.gd == nil {
		g, err := guard.New(guard.Options{Hosts: o.AllowedHosts, Failures: guard.FailureOptions{Now: a.clock.Now}})
		if err != nil {
			return nil, fmt.Errorf("httpapi: %w", err)
		}
		a.gd = g
	}

	a.mux = http.NewServeMux()
	methods := map[string][]string{}
	var paths []string
	for _, rt := range routes {
		a.mux.Handle(rt.pattern, a.guard(rt))
		method, path, _ := strings.Cut(rt.pattern, " ")
		if methods[path] == nil {
			paths = append(paths, path)
		}
		methods[path] = append(methods[path], method)
	}
	// Any other method on a known path is a 405 that says what is allowed;
	// any other path a 404, both as JSON errors.
	for _, path := range paths {
		a.mux.Handle(path, a.methodNotAllowed(methods[path]))
	}
	a.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if !a.hostOK(w, r) {
			return
		}
		guard.CloseAfter(w)
		writeError(w, http.StatusNotFound, portcullis.CodeNotFound, "no endpoint "+r.Method+" "+r.URL.Path+"; the API is described at /v1/openapi.json")
	})
	return a, nil
}

// ServeHTTP serves one request. A panic in a handler is a 500, never a
// dropped connection with a half-written answer.
func (a *api) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			a.log.Error("httpapi: panic", "method", r.Method, "path", r.URL.Path, "panic", v)
			writeError(w, http.StatusInternalServerError, codeInternal, "internal error; the gateway's log has the detail")
		}
	}()
	a.mux.ServeHTTP(w, r)
}

// guard checks a route's Host, Origin and token before its handler runs.
func (a *api) guard(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !rt.anyHost && !a.hostOK(w, r) {
			return
		}
		var p principal
		switch rt.who {
		case agents:
			kind, agent, ok := a.authenticate(w, r)
			if !ok {
				return
			}
			if kind != tokenAgent {
				a.refuse(w, r, http.StatusForbidden, codeForbidden, "the human token is not an agent's: agents call the decision API with their own token")
				return
			}
			p.agent = agent
		case people:
			kind, _, ok := a.authenticate(w, r)
			if !ok {
				return
			}
			if kind != tokenHuman {
				a.refuse(w, r, http.StatusForbidden, codeForbidden, "agent tokens are refused here: only a person, with the human token, may use this endpoint")
				return
			}
			actor, err := actorOf(r)
			if err != nil {
				writeError(w, http.StatusBadRequest, portcullis.CodeInvalidRequest, err.Error())
				return
			}
			p.actor = actor
		}
		rt.handle(a, w, r, p)
	})
}

func (a *api) methodNotAllowed(allowed []string) http.Handler {
	allow := strings.Join(allowed, ", ")
	if slices.Contains(allowed, http.MethodGet) {
		allow += ", HEAD"
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !a.hostOK(w, r) {
			return
		}
		w.Header().Set("Allow", allow)
		guard.CloseAfter(w)
		writeError(w, http.StatusMethodNotAllowed, codeMethodNotAllowed, r.Method+" is not allowed on "+r.URL.Path+" (allowed: "+allow+")")
	})
}

func (a *api) healthz(w http.ResponseWriter, _ *http.Request, _ principal) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (a *api) readyz(w http.ResponseWriter, r *http.Request, _ principal) {
	if a.ready != nil {
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		if err := a.ready(ctx); err != nil {
			// The detail (a store address, say) is for the log, not for an
			// unauthenticated probe.
			a.log.Warn("httpapi: not ready", "err", err)
			writeError(w, http.StatusServiceUnavailable, codeUnavailable, "not ready")
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func (a *api) openapi(w http.ResponseWriter, _ *http.Request, _ principal) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(openapiDoc) // the client went away: nothing to do
}
