// Package mcpgw is Portcullis's MCP gateway: an MCP server to the agent's
// client and an MCP client of one or more upstream MCP servers, built on
// the official Go SDK. Everything but tools/call passes through; every
// tools/call is decided by the gate first (docs/ARCHITECTURE.md, "The MCP gateway").
//
// The same Gateway serves the stdio wrapper (`portcullis mcp -- <server>`:
// one upstream, one client session, tool names unchanged) and the HTTP
// gateway (`portcullis serve`: several upstreams on one Streamable HTTP
// endpoint, tool names prefixed per upstream, agents identified by bearer
// tokens).
//
// The package imports the root package and the SDK only; the engine is
// reached through the Gate interface, which *gate.Gate satisfies.
package mcpgw

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis/portcullis"
)

// Gate is what the gateway needs of the decision engine.
type Gate interface {
	// Decide decides a call (the one pipeline; see package gate).
	Decide(ctx context.Context, c portcullis.Call) (portcullis.Decision, error)
	// ToolLevel is the level the policy gives a tool before run state,
	// validator and grants; DENY tools are hidden from tools/list.
	ToolLevel(c portcullis.Call) portcullis.Level
	// AwaitApproval waits for a person's answer to an approval request.
	AwaitApproval(ctx context.Context, id string) (portcullis.Approval, error)
	// RecordOutcome records the outcome of an autonomous run's step.
	RecordOutcome(ctx context.Context, runID string, o portcullis.StepOutcome) error
}

// Config configures a Gateway.
type Config struct {
	// Gate decides every tools/call. Required.
	Gate Gate
	// Store keeps the tool-definition pins. Required: without pins a
	// changed tool could not be held.
	Store portcullis.Store
	// Upstreams are the MCP servers behind the gateway. At least one.
	Upstreams []Upstream
	// Name and Version identify the gateway to its clients when it fronts
	// several upstreams; with one upstream the upstream's own identity is
	// mirrored.
	Name, Version string
	// Agent is the agent identity of sessions that carry no token (the
	// stdio wrapper). With tokens (HTTP), the token names the agent.
	Agent string
	// Session is the session ID of the stdio wrapper's one client session
	// (generated when empty). HTTP sessions use their Mcp-Session-Id.
	Session string
	// Wait bounds how long a call needing a person is held open (default
	// 45 seconds, well inside common client timeouts).
	Wait time.Duration
	// ShowDenied lists tools whose level is DENY for the session in
	// tools/list too; by default they are hidden. Calling them is denied
	// either way.
	ShowDenied bool
	// Autonomous makes every call a step of an autonomous run whose ID is
	// the session: the gate's autonomy stage counts steps, and the
	// result's isError is recorded as the step's outcome.
	Autonomous bool
	// UserPresent tells the contextual validator that a person is at the
	// keyboard.
	UserPresent bool
	// ApprovalURL, when set, gives the console page of an approval request
	// (e.g. "http://127.0.0.1:8470/approvals/"+id). Clients that support
	// URL-mode elicitation are sent there while a call is held.
	ApprovalURL func(approvalID string) string
	// CallTimeout bounds one forwarded call to an upstream (default 2
	// minutes). A hung upstream yields an error result.
	CallTimeout time.Duration
	// Notifier tells people of changed tool definitions. Optional.
	Notifier portcullis.Notifier
	// Logger receives the gateway's logs (never stdout). Default: discard.
	Logger *slog.Logger
	// Clock is used for pins' timestamps (default the system clock).
	Clock portcullis.Clock
	// Observer is told of calls, upstream calls and restarts, and approval
	// waits, for metrics and traces. Optional.
	Observer Observer
	// OneClient says the gateway serves exactly one client (the stdio
	// wrapper): a request an upstream makes of its client before that
	// client has initialized (server-filesystem asks for roots at once)
	// waits for it instead of failing.
	OneClient bool
}

// Gateway is an MCP server that gates the tools of its upstreams.
type Gateway struct {
	cfg    Config
	log    *slog.Logger
	server *mcp.Server
	// send is the SDK's own sending handler, captured so the gateway can
	// forward any notification an upstream sends (list changes, resource
	// updates, log messages, progress) to its clients.
	send mcp.MethodHandler

	ups    []*upstream
	byName map[string]*upstream

	mu       sync.Mutex
	tools    map[string]*toolEntry // by exposed name
	clashes  map[string]bool       // exposed name and upstream not served, logged
	sessions map[*mcp.ServerSession]*session
	byID     map[string]*session      // sessions with a transport's id (HTTP), for the HTTP fast path
	openedBy map[string]opened        // by transport's session id: the HTTP sessions (httpfast.go)
	progress map[string]progressRoute // gateway token → client's
	held     map[string]HeldCall      // by approval ID
	inflight int                      // tools/call being answered
	// posts counts the HTTP POSTs being answered: a tools/call's answer
	// is written after its handler returns, on the POST's own stream,
	// which closing the session would end unanswered.
	posts int

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	seq    uint64

	// httpFast counts the calls the HTTP fast path answered; noHTTPFast
	// turns it off (both for tests).
	httpFast   atomic.Uint64
	noHTTPFast atomic.Bool

	// ready is closed when the first client session has initialized.
	ready     chan struct{}
	readyOnce sync.Once
}

// session is one client session of the gateway.
type session struct {
	ss    *mcp.ServerSession
	id    string
	agent string
	// inflight counts calls forwarded to each upstream, so that a request
	// an upstream makes of its client (sampling, elicitation, roots) goes
	// to the session it is serving.
	inflight map[*upstream]int
	// initialized says the client sent notifications/initialized: from
	// then on the stdio fast path may answer its tools/call (fast.go).
	initialized atomic.Bool
	// sdkAt is when a request of the session last went through the SDK's
	// HTTP handler (Unix nanoseconds), whose idle timer it reset.
	sdkAt atomic.Int64
	// ids are the request ids (idKey) in flight on an HTTP session, of
	// the fast path's calls and of the requests it left to the SDK's
	// handler, which the session refuses to a second request as the
	// SDK's handler does (httpfast.go).
	idsMu sync.Mutex
	ids   map[string]struct{}
}

// holdID records a request id in flight on the session, or says it is
// already.
func (s *session) holdID(key string) bool {
	s.idsMu.Lock()
	defer s.idsMu.Unlock()
	if _, held := s.ids[key]; held {
		return false
	}
	if s.ids == nil {
		s.ids = map[string]struct{}{}
	}
	s.ids[key] = struct{}{}
	return true
}

func (s *session) releaseID(key string) {
	s.idsMu.Lock()
	delete(s.ids, key)
	s.idsMu.Unlock()
}

type progressRoute struct {
	ss    *mcp.ServerSession
	token any
}

// ErrNoUpstream is returned by New when no upstream is configured.
var ErrNoUpstream = errors.New("mcpgw: no upstream server configured")

// New starts the gateway: it connects to every upstream (a failing
// upstream is retried in the background with backoff; its tools are
// unavailable meanwhile), pins their tools, and builds the MCP server its
// clients talk to. Close stops it.
func New(ctx context.Context, cfg Config) (*Gateway, error) {
	if cfg.Gate == nil || cfg.Store == nil {
		return nil, errors.New("mcpgw: a gate and a store are required")
	}
	if len(cfg.Upstreams) == 0 {
		return nil, ErrNoUpstream
	}
	if err := CheckUpstreams(cfg.Upstreams); err != nil {
		return nil, fmt.Errorf("mcpgw: %w", err)
	}
	if cfg.Wait <= 0 {
		cfg.Wait = 45 * time.Second
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 2 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = portcullis.SystemClock{}
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	if cfg.Name == "" {
		cfg.Name = "portcullis"
	}
	g := &Gateway{
		cfg:      cfg,
		log:      cfg.Logger,
		byName:   map[string]*upstream{},
		tools:    map[string]*toolEntry{},
		clashes:  map[string]bool{},
		sessions: map[*mcp.ServerSession]*session{},
		byID:     map[string]*session{},
		openedBy: map[string]opened{},
		progress: map[string]progressRoute{},
		held:     map[string]HeldCall{},
		ready:    make(chan struct{}),
	}
	single := len(cfg.Upstreams) == 1
	for i := range cfg.Upstreams {
		u := cfg.Upstreams[i]
		if u.Prefix == nil && !single {
			p := u.Name + "__"
			u.Prefix = &p
		}
		up := &upstream{g: g, cfg: u, tools: map[string]*toolEntry{}}
		for _, prev := range g.ups {
			if prev.prefix() == up.prefix() {
				g.log.Info("two upstreams share a tool-name prefix: a name both offer is served by the first in the configuration, never the other",
					"prefix", up.prefix(), "first", prev.cfg.Name, "second", u.Name)
			}
		}
		g.ups = append(g.ups, up)
		g.byName[u.Name] = up
	}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	// Pin changes are followed from before the gateway reads any pin: a
	// definition a person accepts between a read and the subscription
	// would otherwise not reach clients until the next change.
	pins, pinsErr := g.cfg.Store.Watch(g.ctx)
	if err := g.knownTools(ctx); err != nil {
		g.cancel()
		return nil, err
	}

	// Connect to every upstream before serving, so the first client's
	// initialize sees their capabilities. A failing upstream does not
	// stop the gateway: it is retried in the background.
	var wg sync.WaitGroup
	for _, up := range g.ups {
		wg.Go(func() {
			if err := up.connect(ctx); err != nil {
				g.log.Warn("upstream unavailable; retrying in the background", "upstream", up.cfg.Name, "err", err)
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		g.Close()
		return nil, err
	}
	for _, up := range g.ups {
		g.wg.Go(func() { up.supervise(g.ctx) })
	}
	g.wg.Go(func() { g.watchPins(pins, pinsErr) })
	g.server = g.newServer()
	return g, nil
}

// Close ends the clients' sessions, disconnects from the upstreams
// (stopping the processes the gateway started) and ends its background
// work.
func (g *Gateway) Close() error {
	g.cancel()
	g.closeSessions()
	var errs []error
	for _, up := range g.ups {
		if err := up.close(); err != nil {
			errs = append(errs, err)
		}
	}
	g.wg.Wait()
	return errors.Join(errs...)
}

// Drain waits until no tools/call is being answered and no HTTP POST is
// still writing its answers (or ctx ends), then closes the clients'
// sessions, which ends their streams: an HTTP server shutting down waits
// for the answers in flight, not for streams that never end. The gateway
// keeps its upstreams; Close ends them.
func (g *Gateway) Drain(ctx context.Context) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		g.mu.Lock()
		n := g.inflight + g.posts
		g.mu.Unlock()
		if n == 0 {
			break
		}
		select {
		case <-ctx.Done():
			g.closeSessions()
			return ctx.Err()
		case <-t.C:
		}
	}
	g.closeSessions()
	return nil
}

func (g *Gateway) closeSessions() {
	g.mu.Lock()
	open := make([]*mcp.ServerSession, 0, len(g.sessions)+len(g.openedBy))
	for ss := range g.sessions {
		open = append(open, ss)
	}
	for _, o := range g.openedBy {
		if g.sessions[o.ss] == nil {
			open = append(open, o.ss) // initialized never
		}
	}
	g.mu.Unlock()
	for _, ss := range open {
		ss.Close()
	}
}

// Server is the MCP server the gateway's clients talk to. Connect it to a
// transport (Run over stdio, or a Streamable HTTP handler).
func (g *Gateway) Server() *mcp.Server { return g.server }

func (g *Gateway) newServer() *mcp.Server {
	impl := &mcp.Implementation{Name: g.cfg.Name, Version: g.cfg.Version}
	var instructions []string
	if len(g.ups) == 1 {
		if ir := g.ups[0].initResult(); ir != nil && ir.ServerInfo != nil {
			mirrored := *ir.ServerInfo
			impl = &mirrored
		}
	}
	for _, up := range g.ups {
		if ir := up.initResult(); ir != nil && ir.Instructions != "" {
			instructions = append(instructions, ir.Instructions)
		}
	}
	s := mcp.NewServer(impl, &mcp.ServerOptions{
		Instructions: strings.Join(instructions, "\n\n"),
		Logger:       g.log,
		Capabilities: g.capabilities(),
		InitializedHandler: func(ctx context.Context, req *mcp.InitializedRequest) {
			g.sessionOf(req.Session, nil).initialized.Store(true)
			g.readyOnce.Do(func() { close(g.ready) })
			// With one client (the stdio wrapper), the upstreams were
			// started before it: if it offers roots, tell them to ask.
			if ip := req.Session.InitializeParams(); len(g.ups) == 1 && g.sessionCount() == 1 && ip != nil && ip.Capabilities != nil && ip.Capabilities.RootsV2 != nil {
				go g.ups[0].rootsChanged(context.WithoutCancel(ctx))
			}
		},
		SubscribeHandler: func(ctx context.Context, req *mcp.SubscribeRequest) error {
			up, err := g.resourceUpstream(req.Params.URI)
			if err != nil {
				return err
			}
			cs, err := up.client()
			if err != nil {
				return err
			}
			return cs.Subscribe(ctx, req.Params)
		},
		UnsubscribeHandler: func(ctx context.Context, req *mcp.UnsubscribeRequest) error {
			up, err := g.resourceUpstream(req.Params.URI)
			if err != nil {
				return err
			}
			cs, err := up.client()
			if err != nil {
				return err
			}
			return cs.Unsubscribe(ctx, req.Params)
		},
	})
	s.AddSendingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		g.send = next
		return next
	})
	s.AddReceivingMiddleware(g.receive)
	return s
}

// capabilities are the upstreams' own, merged: the gateway offers what its
// upstreams offer and nothing more. Tools are always offered (a client
// lists them, even if none is available yet).
func (g *Gateway) capabilities() *mcp.ServerCapabilities {
	caps := &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}}
	for _, up := range g.ups {
		ir := up.initResult()
		if ir == nil || ir.Capabilities == nil {
			continue
		}
		c := ir.Capabilities
		if c.Prompts != nil {
			caps.Prompts = &mcp.PromptCapabilities{ListChanged: c.Prompts.ListChanged || (caps.Prompts != nil && caps.Prompts.ListChanged)}
		}
		if c.Resources != nil {
			prev := caps.Resources
			caps.Resources = &mcp.ResourceCapabilities{ListChanged: c.Resources.ListChanged, Subscribe: c.Resources.Subscribe}
			if prev != nil {
				caps.Resources.ListChanged = caps.Resources.ListChanged || prev.ListChanged
				caps.Resources.Subscribe = caps.Resources.Subscribe || prev.Subscribe
			}
		}
		if c.Completions != nil {
			caps.Completions = &mcp.CompletionCapabilities{}
		}
		if c.Logging != nil {
			caps.Logging = &mcp.LoggingCapabilities{}
		}
		if len(c.Experimental) > 0 {
			if caps.Experimental == nil {
				caps.Experimental = map[string]any{}
			}
			maps.Copy(caps.Experimental, c.Experimental)
		}
	}
	return caps
}

// sessionOf returns the gateway's state of a client session, creating it
// on first sight. The agent comes from the token (HTTP) or the
// configuration (stdio), never from the model.
func (g *Gateway) sessionOf(ss *mcp.ServerSession, extra *mcp.RequestExtra) *session {
	g.mu.Lock()
	defer g.mu.Unlock()
	if s, ok := g.sessions[ss]; ok {
		if s.agent == "" && extra != nil && extra.TokenInfo != nil {
			s.agent = extra.TokenInfo.UserID
		}
		return s
	}
	s := &session{ss: ss, id: ss.ID(), agent: g.cfg.Agent, inflight: map[*upstream]int{}}
	if extra != nil && extra.TokenInfo != nil && extra.TokenInfo.UserID != "" {
		s.agent = extra.TokenInfo.UserID
	}
	if tid := ss.ID(); tid != "" {
		if s.agent == "" {
			// The agent whose token opened the session, as the SDK's
			// handler bound it (bindOwner); its requests carry that token.
			s.agent = g.openedBy[tid].agent
		}
		s.sdkAt.Store(time.Now().UnixNano()) // in a request the SDK serves
		g.byID[tid] = s
	}
	if s.id == "" {
		s.id = g.cfg.Session
	}
	if s.id == "" {
		g.seq++
		s.id = fmt.Sprintf("mcp-%d-%d", time.Now().UnixNano(), g.seq)
	}
	g.sessions[ss] = s
	g.wg.Go(func() {
		_ = ss.Wait()
		g.mu.Lock()
		delete(g.sessions, ss)
		if g.byID[ss.ID()] == s {
			delete(g.byID, ss.ID())
		}
		for k, r := range g.progress {
			if r.ss == ss {
				delete(g.progress, k)
			}
		}
		g.mu.Unlock()
	})
	return s
}

func (g *Gateway) sessionCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.sessions)
}

// ownerOf is the client session an upstream's request (sampling,
// elicitation, roots) belongs to: the only session with a call in flight
// to that upstream, or with one client session, that session.
func (g *Gateway) ownerOf(up *upstream) (*mcp.ServerSession, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var owner *mcp.ServerSession
	n := 0
	for ss, s := range g.sessions {
		if s.inflight[up] > 0 {
			owner, n = ss, n+1
		}
	}
	if n == 1 {
		return owner, nil
	}
	if n == 0 && len(g.sessions) == 1 {
		for ss := range g.sessions {
			return ss, nil
		}
	}
	return nil, fmt.Errorf("upstream %q asked its client for something, but the gateway cannot tell which of its %d client sessions it serves", up.cfg.Name, len(g.sessions))
}

// broadcast sends a notification to client sessions: to every session, or
// to those with a call in flight to up when the notification concerns one
// session's work (logs).
func (g *Gateway) broadcast(ctx context.Context, method string, mk func(*mcp.ServerSession) mcp.Request, only *upstream) {
	g.mu.Lock()
	var targets []*mcp.ServerSession
	for ss, s := range g.sessions {
		if only == nil || s.inflight[only] > 0 || len(g.sessions) == 1 {
			targets = append(targets, ss)
		}
	}
	g.mu.Unlock()
	for _, ss := range targets {
		if _, err := g.send(ctx, method, mk(ss)); err != nil {
			g.log.Debug("forward notification", "method", method, "session", ss.ID(), "err", err)
		}
	}
}

// Tools lists the tools the gateway offers, by exposed name, with their
// upstream and pin state: what `portcullis tools` shows.
func (g *Gateway) Tools() []ToolState {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]ToolState, 0, len(g.tools))
	for _, t := range g.tools {
		out = append(out, ToolState{Name: t.exposed, Upstream: t.up.cfg.Name, Tool: t.name, Changed: t.info.Changed})
	}
	slices.SortFunc(out, func(a, b ToolState) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// ToolState is one tool the gateway offers.
type ToolState struct {
	Name     string // as the client sees it
	Upstream string
	Tool     string // as the upstream names it
	Changed  bool   // its definition changed and waits for a person
}
