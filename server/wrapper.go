package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/mcpgw"
	"github.com/portcullis/portcullis/metrics"
	"github.com/portcullis/portcullis/notify"
	"github.com/portcullis/portcullis/witness"
)

// WrapperOptions configure a Wrapper: `portcullis mcp`, the stdio MCP
// wrapper of one upstream server.
type WrapperOptions struct {
	// Command is the upstream MCP server's command line. Required.
	Command []string
	// Name is the upstream's name in pins and the audit (default:
	// mcpgw.UpstreamName of Command).
	Name string
	// Agent is the agent identity of the one client (default: Name).
	Agent string
	// TrustAnnotations lets the upstream's tool annotations classify the
	// tools the policy does not name; ShowDenied, Autonomous and
	// UserPresent are the gateway's (mcpgw.Config).
	TrustAnnotations, ShowDenied, Autonomous, UserPresent bool
	// Policy is the policy file, watched and reloaded when it changes;
	// empty is the built-in default policy, which never changes.
	Policy string
	// OpenStore opens the store and returns it with the state directory,
	// created. Required. The wrapper closes the store.
	OpenStore func(ctx context.Context) (portcullis.Store, string, error)
	// LoadGate builds the gate of the policy file with opts. Required.
	LoadGate func(policyPath string, opts ...gate.Option) (*gate.Gate, error)
	// ProtectedPaths are files an agent's calls must not touch besides
	// the state directory (the clients' configuration files).
	ProtectedPaths []string
	// Notifier tells people of calls held for them; Channels names its
	// channels for the log. Without one, desktop notifications are used
	// when the desktop can be reached.
	Notifier portcullis.Notifier
	Channels []string
	// Metrics, when set, is the listener /metrics is served on, with the
	// token in metrics.token of the state directory. The wrapper closes
	// it.
	Metrics net.Listener
	// Witnesses are published the audit chain's head every
	// WitnessInterval.
	Witnesses       []witness.Witness
	WitnessInterval time.Duration
	// GateOptions are further options of the gate (a decision log,
	// traces); GatewayObservers further observers of the MCP gateway.
	// The wrapper adds its metrics to both.
	GateOptions      []gate.Option
	GatewayObservers []mcpgw.Observer
	// Logger receives the logs (never stdout). Nil: discarded.
	Logger *slog.Logger
	// Version is the binary's version, told to MCP clients.
	Version string
	// Stderr is the terminal of the person who stops the wrapper (Run's
	// messages about held calls). Nil: discarded.
	Stderr io.Writer
}

// Wrapper is the stdio MCP wrapper: an MCP server on stdin and stdout
// that starts one upstream server and gates its tools. Open starts the
// store, the gate, the policy watcher, the upstream, the metrics and the
// witnesses; Run serves one client until it leaves or the wrapper is
// stopped; Close ends everything in reverse.
type Wrapper struct {
	opts    WrapperOptions
	log     *slog.Logger
	gate    *gate.Gate
	gw      *mcpgw.Gateway
	closers []func()
}

// NewWrapper returns a Wrapper for opts; Open starts it.
func NewWrapper(opts WrapperOptions) *Wrapper {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Stderr == nil {
		opts.Stderr = io.Discard
	}
	return &Wrapper{opts: opts, log: opts.Logger}
}

// Open starts the wrapper. An upstream command that cannot start is
// refused before anything else. When Open fails, whatever it had started
// is ended again.
func (w *Wrapper) Open(ctx context.Context) (err error) {
	o := w.opts
	if len(o.Command) == 0 || o.OpenStore == nil || o.LoadGate == nil {
		return errors.New("server: a command, OpenStore and LoadGate are required")
	}
	defer func() {
		if err != nil {
			w.Close()
		}
	}()
	if o.Metrics != nil {
		w.closers = append(w.closers, func() { o.Metrics.Close() })
	}
	// A server that cannot start would never come up: say so now.
	if err := CommandStarts(o.Command[0], ""); err != nil {
		return err
	}
	name := o.Name
	if name == "" {
		name = mcpgw.UpstreamName(o.Command)
	}
	agent := o.Agent
	if agent == "" {
		agent = name
	}
	st, dir, err := o.OpenStore(ctx)
	if err != nil {
		return err
	}
	w.closers = append(w.closers, func() { st.Close() })
	var m *metrics.Metrics
	var rm ReloadMetrics
	gateOpts := append([]gate.Option{}, o.GateOptions...)
	observers := append(mcpgw.Observers{}, o.GatewayObservers...)
	if o.Metrics != nil {
		m = metrics.New(metrics.Options{State: st})
		st, rm = m.Store(st), m
		gateOpts = append(gateOpts, gate.WithObserver(m))
		observers = append(observers, m)
		token, err := secretIn(dir, "metrics.token")
		if err != nil {
			return fmt.Errorf("metrics token: %w", err)
		}
		w.serveMetrics(MetricsHandler(m, token))
	}
	// The people who approve calls are told out of band: never on stderr,
	// which an MCP client may show to the model or keep in a log it reads.
	n, channels := o.Notifier, o.Channels
	if n == nil {
		// A desktop client shows no terminal: the desktop is where its
		// person looks, when it can be reached.
		if d, ok := notify.NewDesktop(notify.DesktopOptions{Logger: w.log}); ok {
			n = d
			w.closers = append(w.closers, func() { d.Close(context.Background()) })
			channels = append(channels, "desktop notifications")
		}
	}
	// Say at start where a person will hear of a held call.
	if len(channels) == 0 {
		w.log.Warn("no human channel for approvals: a held call waits unseen; answer it with `portcullis approvals` and `portcullis approve`, or pass --notify-desktop or --notify-webhook")
	} else {
		w.log.Info("calls held for a person are told through "+strings.Join(channels, " and ")+"; answer them with `portcullis approve ID` or `portcullis deny ID`", "channels", len(channels))
	}
	gateOpts = append(gateOpts, gate.WithStore(st), gate.WithLogger(w.log), gate.WithProtectedPaths(dir),
		gate.WithProtectedPaths(o.ProtectedPaths...))
	if n != nil {
		gateOpts = append(gateOpts, gate.WithNotifier(n))
	}
	if w.gate, err = o.LoadGate(o.Policy, gateOpts...); err != nil {
		return err
	}
	if o.Policy != "" {
		// The built-in default policy never changes: only a file is watched.
		watcher := NewPolicyWatcher(o.Policy, w.gate, st, w.log, rm)
		wctx, stopWatching := context.WithCancel(context.WithoutCancel(ctx))
		w.closers = append(w.closers, stopWatching)
		go watcher.Run(wctx)
	}
	var observer mcpgw.Observer
	if len(observers) > 0 {
		observer = observers
	}
	w.gw, err = mcpgw.New(ctx, mcpgw.Config{
		Gate:        w.gate,
		Store:       st,
		Upstreams:   []mcpgw.Upstream{{Name: name, Command: o.Command, TrustAnnotations: o.TrustAnnotations}},
		Agent:       agent,
		Wait:        w.gate.Policy().Approvals.Wait,
		ShowDenied:  o.ShowDenied,
		Autonomous:  o.Autonomous,
		UserPresent: o.UserPresent,
		Notifier:    n,
		Logger:      w.log,
		Version:     o.Version,
		Observer:    observer,
		OneClient:   true,
	})
	if err != nil {
		return err
	}
	w.closers = append(w.closers, func() { w.gw.Close() })
	stopWitnesses, err := StartWitnesses(ctx, st, dir, o.Witnesses, o.WitnessInterval, w.log, m)
	if err != nil {
		return err
	}
	w.closers = append(w.closers, stopWitnesses)
	return nil
}

// serveMetrics serves /metrics on the metrics listener until Close.
func (w *Wrapper) serveMetrics(h http.Handler) {
	ln := w.opts.Metrics
	mux := http.NewServeMux()
	mux.Handle("/metrics", h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			w.log.Error("metrics server stopped", "err", err)
		}
	}()
	w.closers = append(w.closers, func() {
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(shut); err != nil {
			w.log.Warn("metrics server shutdown", "err", err)
		}
	})
	w.log.Info("serving metrics", "url", "http://"+ln.Addr().String()+"/metrics")
}

// Run serves the client on stdin and stdout until it leaves (nil, also
// when it closed the connection) or the wrapper is stopped by a signal
// (see UntilStopped; a first Ctrl-C with calls held for a person keeps
// them waiting). Nothing but MCP messages is written to stdout.
func (w *Wrapper) Run(ctx context.Context, stdin io.Reader, stdout io.Writer, signals <-chan os.Signal) error {
	// Serving does not end with ctx: see UntilStopped.
	sctx, stopServing := context.WithCancel(context.WithoutCancel(ctx))
	defer stopServing()
	served := make(chan error, 1)
	go func() { served <- w.gw.ServeStdio(sctx, readCloser(stdin), writeCloser(stdout)) }()
	ended, err := UntilStopped(ctx, signals, Held{Gateway: w.gw, Gate: w.gate, Stderr: w.opts.Stderr}, served)
	if !ended {
		// Stopped: the session is closed, and the gateway and its
		// upstream are ended by Close. Serving is not waited for: it may
		// be blocked reading a stdin the client keeps open.
		return nil
	}
	if err != nil && !isClosed(err) {
		return err
	}
	return nil
}

// Close ends what Open started, in reverse order. It may be called more
// than once.
func (w *Wrapper) Close() {
	for i := len(w.closers) - 1; i >= 0; i-- {
		w.closers[i]()
	}
	w.closers = nil
}

type nopCloseReader struct{ io.Reader }

func (nopCloseReader) Close() error { return nil }

type nopCloseWriter struct{ io.Writer }

func (nopCloseWriter) Close() error { return nil }

func readCloser(r io.Reader) io.ReadCloser {
	if rc, ok := r.(io.ReadCloser); ok {
		return rc
	}
	return nopCloseReader{r}
}

func writeCloser(w io.Writer) io.WriteCloser {
	if wc, ok := w.(io.WriteCloser); ok {
		return wc
	}
	return nopCloseWriter{w}
}

// isClosed reports whether a session ended because its client closed
// the connection.
func isClosed(err error) bool {
	s := err.Error()
	return strings.Contains(s, "closed") || strings.Contains(s, "EOF")
}
