package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/hook"
	"github.com/portcullis/portcullis/mcpgw"
	"github.com/portcullis/portcullis/metrics"
	"github.com/portcullis/portcullis/notify"
	"github.com/portcullis/portcullis/server"
)

// runMCP is the stdio wrapper: an MCP server on stdin and stdout that
// starts the upstream server named after "--" and gates its tools.
// Nothing but MCP messages is written to stdout; logs go to stderr or
// --log.
func runMCP(ctx context.Context, o *mcpOptions, pos []string, stdin io.Reader, stdout, stderr io.Writer) error {
	sf, nf, of, wf := &o.state, &o.notify, &o.obs, &o.witness
	var err error
	if len(pos) == 0 {
		return usageError("mcp needs the upstream server's command after --, e.g. portcullis mcp -- npx -y @modelcontextprotocol/server-filesystem ~/work")
	}
	path := agentPolicyPath(o.policy, stderr)
	logw := stderr
	if o.log != "" {
		f, err := os.OpenFile(o.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			return fmt.Errorf("--log: %w", err)
		}
		defer f.Close()
		logw = f
	}
	log, err := of.logger(logw)
	if err != nil {
		return err
	}
	tuneGC()

	upName := o.name
	if upName == "" {
		upName = mcpgw.UpstreamName(pos)
	}
	who := o.agent
	if who == "" {
		who = strings.TrimSpace(os.Getenv("PORTCULLIS_AGENT"))
	}
	if who == "" {
		who = upName
	}

	// A server that cannot start would never come up: say so now.
	if err := server.CommandStarts(pos[0], ""); err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	st, err := sf.open(ctx, log)
	if err != nil {
		return err
	}
	defer st.Close()
	dir, err := sf.dir(true)
	if err != nil {
		return err
	}
	obs := &observability{log: log}
	flushTraces, err := obs.startTracing(ctx)
	if err != nil {
		return err
	}
	defer flushTraces()
	if of.metricsAddr != "" {
		obs.metrics = metrics.New(metrics.Options{State: st})
		st = obs.store(st)
		token, err := secretFile(dir, "metrics.token")
		if err != nil {
			return fmt.Errorf("metrics token: %w", err)
		}
		if _, err := serveMetrics(ctx, of.metricsAddr, metricsHandler(obs.metrics, token), log); err != nil {
			return err
		}
	}
	// The people who approve calls are told out of band: never on stderr,
	// which an MCP client may show to the model or keep in a log it reads.
	n, cleanup, err := nf.notifier(log)
	if err != nil {
		return err
	}
	defer cleanup()
	var channels []string
	if nf.desktop {
		channels = append(channels, "desktop notifications")
	}
	if nf.webhook != "" {
		channels = append(channels, "the webhook "+redactURL(nf.webhook))
	}
	if n == nil {
		// A desktop client shows no terminal: the desktop is where its
		// person looks, when it can be reached.
		if d, ok := notify.NewDesktop(notify.DesktopOptions{Logger: log}); ok {
			n = d
			defer d.Close(context.Background())
			channels = append(channels, "desktop notifications")
		}
	}
	// Say at start where a person will hear of a held call.
	if len(channels) == 0 {
		log.Warn("no human channel for approvals: a held call waits unseen; answer it with `portcullis approvals` and `portcullis approve`, or pass --notify-desktop or --notify-webhook")
	} else {
		log.Info("calls held for a person are told through "+strings.Join(channels, " and ")+"; answer them with `portcullis approve ID` or `portcullis deny ID`", "channels", len(channels))
	}
	opts := append(obs.gateOptions(), gate.WithStore(st), gate.WithLogger(log), gate.WithProtectedPaths(dir),
		gate.WithProtectedPaths(clientConfigFiles()...))
	if n != nil {
		opts = append(opts, gate.WithNotifier(n))
	}
	g, pol, err := loadAgentGate(path, stderr, opts...)
	if err != nil {
		return err
	}
	var rm server.ReloadMetrics
	if obs.metrics != nil {
		rm = obs.metrics
	}
	if path != "" {
		// The built-in default policy never changes: only a file is watched.
		watcher := server.NewPolicyWatcher(path, g, st, log, rm)
		wctx, stopWatching := context.WithCancel(context.WithoutCancel(ctx))
		defer stopWatching()
		go watcher.Run(wctx)
	}
	gw, err := mcpgw.New(ctx, mcpgw.Config{
		Gate:        g,
		Store:       st,
		Upstreams:   []mcpgw.Upstream{{Name: upName, Command: pos, TrustAnnotations: o.trustAnnotations}},
		Agent:       who,
		Wait:        pol.Approvals.Wait,
		ShowDenied:  o.showDenied,
		Autonomous:  o.autonomous,
		UserPresent: o.userPresent,
		Notifier:    n,
		Logger:      log,
		Version:     moduleVersion(),
		Observer:    obs.gatewayObserver(),
		OneClient:   true,
	})
	if err != nil {
		return err
	}
	defer gw.Close()
	ws, err := wf.witnesses(stderr)
	if err != nil {
		return err
	}
	stopWitnesses, err := startWitnesses(ctx, st, dir, ws, wf.interval, log, obs.metrics)
	if err != nil {
		return err
	}
	defer stopWitnesses()
	// Serving does not end with ctx: a first Ctrl-C with calls held for
	// a person keeps them waiting (untilStopped).
	sctx, stopServing := context.WithCancel(context.WithoutCancel(ctx))
	defer stopServing()
	served := make(chan error, 1)
	in := watchInterrupts()
	defer in.stop()
	go func() { served <- gw.ServeStdio(sctx, readCloser(stdin), writeCloser(stdout)) }()
	hg := heldGateway{gw: gw, gate: g, answer: func(mcpgw.HeldCall) string { return "" }}
	ended, err := untilStopped(ctx, in, hg, served, stderr)
	if !ended {
		// Stopped: the session is closed, and the gateway and its
		// upstream are ended on return. Serving is not waited for: it
		// may be blocked reading a stdin the client keeps open.
		stopServing()
		return nil
	}
	if err != nil && !isClosed(err) {
		return err
	}
	return nil
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

func isClosed(err error) bool {
	s := err.Error()
	return strings.Contains(s, "closed") || strings.Contains(s, "EOF")
}

var _ portcullis.Notifier = (*notify.Writer)(nil)

// tuneGC makes the garbage collector run less often in the long-running
// gateway processes (unless $GOGC says otherwise). The MCP SDK allocates a
// fresh 32 KiB decoding buffer for every JSON value it decodes, so a
// gateway allocates a lot of short-lived memory while its live heap stays
// small (a few MB): collecting at 400% growth instead of 100% roughly
// triples the HTTP gateway's throughput (docs/BENCHMARKS.md) for a heap
// that still stays in the tens of megabytes.
func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
}

// moduleVersion is the binary's module version, as the gateway reports it
// to MCP clients and upstreams.
func moduleVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// clientConfigFiles are the clients' configuration files for the user and
// for the project the wrapper was started in (its client starts it there).
func clientConfigFiles() []string {
	home, err := os.UserHomeDir()
	if err != nil {
		home = "" // no home: the project's files only
	}
	conf, err := os.UserConfigDir()
	if err != nil {
		conf = ""
	}
	return hook.ClientConfigFiles(home, workDir(), strings.TrimSpace(os.Getenv("CLAUDE_CONFIG_DIR")), conf)
}
