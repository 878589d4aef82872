// Package server is `portcullis serve`: the HTTP gateway as one
// long-lived component. A Server reads nothing from the command line or
// the environment of its own accord (beyond $VARIABLES its configuration
// names); it takes a loaded Config and the few things only the binary
// wires (how to open a store URL, how to build the gate with its
// validator), and owns everything else: the store, the gate, the policy
// watcher, the human channels, the MCP gateway, the decision and
// approvals API, the console, the metrics, the witnesses and the
// listener. Open starts them in order; Close ends them in reverse, once
// the last request has been answered.
//
// It prints nothing of its own accord but the human notices the gateway's
// terminal is given (Options.Terminal); WriteBanner writes the banner the
// command shows once the server is open.
//
// Wrapper is `portcullis mcp`, the stdio wrapper of one upstream server,
// as a component of the same shape; UntilStopped is how both stop on the
// signals the command reads and passes in.
package server

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"syscall"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/httpapi"
	"github.com/portcullis/portcullis/httpapi/console"
	"github.com/portcullis/portcullis/internal/guard"
	"github.com/portcullis/portcullis/mcpgw"
	"github.com/portcullis/portcullis/metrics"
	"github.com/portcullis/portcullis/notify"
)

// ShutdownTimeout bounds how long Close waits for requests in flight.
const ShutdownTimeout = 10 * time.Second

// Options is what a Server is given besides its configuration.
type Options struct {
	// Config is the configuration (LoadConfig's). Required.
	Config *Config
	// Listen, when set, replaces Config.Listen (a HOST:PORT).
	Listen string
	// Terminal is the gateway's own terminal: a human channel that is
	// told every notice, block codes included. Nil: none.
	Terminal io.Writer
	// Stderr receives the heads of `stderr` witnesses. Nil: discarded.
	Stderr io.Writer
	// Logger receives the logs. Nil: discarded.
	Logger *slog.Logger
	// Version is the binary's version, told to MCP clients.
	Version string
	// OpenStore opens the store the configuration names (its state
	// directory and store URL, either may be empty) and returns it with
	// the state directory, created. Required. The server closes the store.
	OpenStore func(ctx context.Context, state, store string) (portcullis.Store, string, error)
	// LoadGate builds the gate of the policy file with opts (the server's
	// store, notifier, protected paths and observers). Required.
	LoadGate func(policyPath string, opts ...gate.Option) (*gate.Gate, error)
	// Notifier is told every notice besides the terminal and the console
	// (the configuration's desktop and webhook channels). Optional; its
	// owner closes it after Close.
	Notifier portcullis.Notifier
	// GateOptions are further options of the gate (a decision log,
	// traces); GatewayObservers further observers of the MCP gateway.
	// The server adds its metrics to both.
	GateOptions      []gate.Option
	GatewayObservers []mcpgw.Observer
}

// ConfigError is a fault of the configuration, or of what the command
// line put in its place, found by Open: nothing was started.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// Server is a running gateway. Its methods other than Open and Close may
// be called only after Open succeeded.
type Server struct {
	opts Options
	cfg  *Config
	log  *slog.Logger

	store   portcullis.Store
	dir     string
	gate    *gate.Gate
	gw      *mcpgw.Gateway
	metrics *metrics.Metrics
	base    string
	agents  int
	created []string

	// closers end what Open started, in reverse order.
	closers []func() error
	errc    chan error
	closed  bool
}

// New returns a Server for opts; Open starts it.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Stderr == nil {
		opts.Stderr = io.Discard
	}
	return &Server{opts: opts, cfg: opts.Config, log: opts.Logger, errc: make(chan error, 1)}
}

// onClose adds what Close must end, after everything added later.
func (s *Server) onClose(f func() error) { s.closers = append(s.closers, f) }

// Open starts the gateway and serves on its listen address until Close.
// When it fails, whatever it had started is ended again. A fault of the
// configuration is a *ConfigError.
func (s *Server) Open(ctx context.Context) (err error) {
	if s.cfg == nil || s.opts.OpenStore == nil || s.opts.LoadGate == nil {
		return errors.New("server: a configuration, OpenStore and LoadGate are required")
	}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	listen := s.cfg.Listen
	if s.opts.Listen != "" {
		listen = s.opts.Listen
	}
	if _, _, err := net.SplitHostPort(listen); err != nil {
		return &ConfigError{fmt.Errorf("listen address %q: the form is HOST:PORT, such as 127.0.0.1:8470 (:8470 for every interface)", listen)}
	}
	tokens, created, err := agentTokens(s.cfg.Agents)
	if err != nil {
		return &ConfigError{err}
	}
	s.agents, s.created = len(tokens), created
	ws, err := s.cfg.Audit.witnesses(s.cfg.rel, s.opts.Stderr)
	if err != nil {
		return &ConfigError{fmt.Errorf("%s: %w", s.cfg.path, err)}
	}

	st, dir, err := s.opts.OpenStore(ctx, s.cfg.State, s.cfg.Store)
	if err != nil {
		return err
	}
	s.onClose(st.Close)
	s.dir = dir
	s.metrics = metrics.New(metrics.Options{State: st})
	s.store = s.metrics.Store(st)

	// Human channels: the gateway's own terminal (it shows the codes of
	// blocks, and nothing an agent reads is written there), the console
	// (it shows them to the person who logs in), and what the
	// configuration asks for. Every notice links to the console page
	// where a person acts on it; base is set once the listener is open,
	// before anything is decided.
	notices := console.NewNotices(nil)
	human := notify.Multi{notices}
	if s.opts.Terminal != nil {
		human = append(notify.Multi{notify.NewWriter(s.opts.Terminal)}, human...)
	}
	if s.opts.Notifier != nil {
		human = append(human, s.opts.Notifier)
	}
	linked := notify.Linked{Next: human, Link: s.link}

	opts := append(append([]gate.Option{}, s.opts.GateOptions...),
		gate.WithObserver(s.metrics), gate.WithStore(s.store), gate.WithLogger(s.log),
		gate.WithProtectedPaths(dir, s.cfg.path), gate.WithNotifier(linked))
	s.gate, err = s.opts.LoadGate(s.cfg.Policy, opts...)
	if err != nil {
		return err
	}
	watcher := NewPolicyWatcher(s.cfg.Policy, s.gate, s.store, s.log, s.metrics)
	wctx, stopWatching := context.WithCancel(context.WithoutCancel(ctx))
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		watcher.Run(wctx)
	}()
	s.onClose(func() error { stopWatching(); <-watched; return nil })
	metricsToken, err := secretIn(dir, "metrics.token")
	if err != nil {
		return fmt.Errorf("metrics token: %w", err)
	}
	// The people's token: the console's login token and the approvals
	// API's bearer token, 0600 in the state directory.
	humanToken, err := secretIn(dir, "admin.token")
	if err != nil {
		return fmt.Errorf("human token: %w", err)
	}

	ln, err := net.Listen("tcp", listen)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("listen on %s: the address is in use; a `portcullis serve` may already run there: stop it, or pass another --listen HOST:PORT", listen)
		}
		return fmt.Errorf("listen on %s: %w", listen, err)
	}
	s.onClose(func() error {
		if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			return err
		}
		return nil
	})
	s.base = s.cfg.PublicURL
	if s.base == "" {
		s.base = "http://" + ln.Addr().String()
	}
	s.gw, err = mcpgw.New(ctx, mcpgw.Config{
		Gate: s.gate, Store: s.store, Upstreams: s.cfg.gatewayUpstreams(),
		Name: "portcullis", Version: s.opts.Version,
		Wait:        s.gate.Policy().Approvals.Wait,
		ShowDenied:  s.cfg.ShowDenied,
		Notifier:    linked,
		Logger:      s.log,
		ApprovalURL: func(id string) string { return s.base + console.ApprovalPath(id) },
		Observer:    append(mcpgw.Observers{s.metrics}, s.opts.GatewayObservers...),
	})
	if err != nil {
		return err
	}
	s.onClose(s.gw.Close)
	agentOf := func(tok string) (string, bool) {
		a, ok := tokens[TokenHash(tok)]
		return a.Name, ok
	}
	var hosts, origins []string
	if u, err := url.Parse(s.base); err == nil && u.Host != "" && s.cfg.PublicURL != "" {
		// A public name replaces the loopback default; a gateway that
		// listens on loopback keeps answering there too (the CLI on the
		// same machine). Pages of the public URL are the gateway's own
		// origin even behind a TLS-terminating proxy.
		hosts = append(hosts, u.Host)
		if isLoopback(ln.Addr()) {
			hosts = append(hosts, guard.LoopbackHosts()...)
		}
		origins = append(origins, u.Scheme+"://"+u.Host)
	}
	// One guard for the API, the console and the MCP endpoint: the same
	// Host and Origin rules, and one count of wrong credentials per
	// client whichever entry they are tried on.
	gd, err := guard.New(guard.Options{Hosts: hosts, Origins: origins, Failures: guard.FailureOptions{
		Report: func(f guard.Failure) { s.metrics.AuthFailure(f.Entry, f.Limited) },
	}})
	if err != nil {
		return &ConfigError{fmt.Errorf("%s: publicURL: %v", s.cfg.path, err)}
	}
	mcpHandler, err := s.gw.Handler(mcpgw.HTTPOptions{
		AgentOf: agentOf,
		Guard:   gd,
		// Listening on a public address with no publicURL, the MCP
		// endpoint answers any Host name, as before the guard.
		AllowRemoteHosts: !isLoopback(ln.Addr()) && s.cfg.PublicURL == "",
	})
	if err != nil {
		return err
	}
	api, err := httpapi.New(httpapi.Options{
		Gate: s.gate, Store: s.store, AgentToken: agentOf, HumanToken: humanToken, Guard: gd, Logger: s.log,
		Ready: func(ctx context.Context) error {
			_, err := s.store.Blocks(ctx)
			return err
		},
	})
	if err != nil {
		return err
	}
	con, err := console.New(console.Options{
		Gate: s.gate, Store: s.store, LoginToken: humanToken, Guard: gd, BaseURL: s.base, Notices: notices, Logger: s.log,
		PolicyLoadedAt: watcher.LoadedAt, PolicyProblem: watcher.Problem,
	})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcpHandler)
	mux.Handle("/mcp/", mcpHandler)
	for _, p := range httpapi.MountPoints() {
		mux.Handle(p, api)
	}
	mux.Handle("/metrics", MetricsHandler(s.metrics, metricsToken))
	mux.Handle("/", con)
	stopWitnesses, err := StartWitnesses(ctx, s.store, dir, ws, s.cfg.Audit.WitnessInterval, s.log, s.metrics)
	if err != nil {
		return err
	}
	// The last head is published once no more calls are decided: after
	// the HTTP server below has shut down.
	s.onClose(func() error { stopWitnesses(); return nil })

	// No client holds a connection for free: headers and bodies have
	// deadlines, idle connections are closed, and every refusal closes
	// its connection (the handlers mark it). Answers have no deadline: a
	// call held for a person, a long poll and the console's live stream
	// last as long as they need.
	srv := &http.Server{
		Handler:           guard.BodyDeadline(mux, s.cfg.HTTP.BodyTimeout),
		ReadHeaderTimeout: s.cfg.HTTP.ReadHeaderTimeout,
		IdleTimeout:       s.cfg.HTTP.IdleTimeout,
	}
	srv.RegisterOnShutdown(func() { con.Close() }) // end the console's live streams
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			s.errc <- err
		}
	}()
	s.onClose(func() error {
		// Stop accepting, let the calls in flight be answered, then end
		// the MCP sessions' streams so the shutdown need not wait for
		// them.
		shut, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- srv.Shutdown(shut) }()
		s.gw.Drain(shut)
		if err := <-done; err != nil {
			s.log.Warn("requests still open at shutdown were cut off", "err", err)
		}
		return nil
	})
	return nil
}

// link is the console page where a person acts on a notice.
func (s *Server) link(n portcullis.Notice) string {
	switch n.Kind {
	case portcullis.NoticeApproval:
		if n.ChallengeID != "" {
			return s.base + console.ApprovalPath(n.ChallengeID)
		}
	case portcullis.NoticeBlock:
		return s.base + "/blocks"
	case portcullis.NoticeToolChange:
		return s.base + "/tools"
	case portcullis.NoticePendingLimit:
		return s.base + "/approvals?agent=" + url.QueryEscape(n.Agent)
	}
	return s.base + "/"
}

// Close stops accepting requests, waits (at most ShutdownTimeout) for the
// ones in flight, publishes the audit chain's last head to the
// witnesses, and ends everything Open started. It may be called more than
// once.
func (s *Server) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	for i := len(s.closers) - 1; i >= 0; i-- {
		if err := s.closers[i](); err != nil {
			errs = append(errs, err)
		}
	}
	s.closers = nil
	return errors.Join(errs...)
}

// Failed reports an error that stopped the server from serving.
func (s *Server) Failed() <-chan error { return s.errc }

// URL is the gateway's base URL: its publicURL, else http:// and the
// address it listens on.
func (s *Server) URL() string { return s.base }

// StateDir is the state directory (tokens, the SQLite store).
func (s *Server) StateDir() string { return s.dir }

// Agents is how many agents hold a token.
func (s *Server) Agents() int { return s.agents }

// CreatedTokens lists the agent token files made at this start, as
// "agent: path".
func (s *Server) CreatedTokens() []string { return s.created }

// Gate is the gateway's decision engine.
func (s *Server) Gate() *gate.Gate { return s.gate }

// Gateway is the MCP gateway.
func (s *Server) Gateway() *mcpgw.Gateway { return s.gw }

// Upstreams is how many upstream MCP servers the gateway fronts.
func (s *Server) Upstreams() int { return len(s.cfg.Upstreams) }

// MetricsHandler serves the metrics to a scraper that sends the metrics
// token as a bearer token (compared in constant time). The metrics name
// the policy's tools, upstreams and how often calls are denied: they are
// not for anyone who can reach the port. The token is its own, not the
// people's: a scraper holding it can read metrics and do nothing else.
func MetricsHandler(m *metrics.Metrics, token string) http.Handler {
	h := m.Handler()
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if token == "" || subtle.ConstantTimeCompare(got, want) != 1 {
			guard.CloseAfter(w)
			w.Header().Set("WWW-Authenticate", `Bearer realm="portcullis metrics"`)
			http.Error(w, "send the metrics token (metrics.token in the state directory) as Authorization: Bearer <token>", http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "GET only", http.StatusMethodNotAllowed)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func isLoopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}
