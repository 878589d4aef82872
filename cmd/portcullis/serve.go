package main

import (
	"context"
	"errors"
	"io"
	"os"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/httpapi/console"
	"github.com/portcullis/portcullis/mcpgw"
	"github.com/portcullis/portcullis/notify"
	"github.com/portcullis/portcullis/server"
)

// runServe runs the HTTP gateway: the MCP endpoint on /mcp in front of the
// configured upstreams, for agents with tokens.
func runServe(ctx context.Context, o *serveOptions, pos []string, stdout, stderr io.Writer) error {
	of := &o.obs
	if len(pos) > 0 {
		return usageError("serve takes no arguments; unexpected %q", pos[0])
	}
	cfg, err := server.LoadConfig(o.config)
	if errors.Is(err, os.ErrNotExist) {
		return configMissing(o.config, o.configGiven)
	}
	if err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	log, err := of.logger(stderr)
	if err != nil {
		return err
	}
	tuneGC()
	obs := &observability{log: log}
	flushTraces, err := obs.startTracing(ctx)
	if err != nil {
		return err
	}
	defer flushTraces()
	// The configuration's desktop and webhook channels; the terminal and
	// the console are the server's own.
	nf := notifyFlags{desktop: cfg.Notify.Desktop, webhook: cfg.Notify.Webhook.URL, webhookFormat: firstNonEmpty(cfg.Notify.Webhook.Format, notify.FormatJSON), webhookHuman: cfg.Notify.Webhook.Human}
	extra, cleanup, err := nf.notifier(log)
	if err != nil {
		return err
	}
	defer cleanup()
	srv := server.New(server.Options{
		Config: cfg, Listen: o.listen, Terminal: stdout, Stderr: stderr, Logger: log, Version: moduleVersion(),
		OpenStore: func(ctx context.Context, state, store string) (portcullis.Store, string, error) {
			sf := stateFlags{state: state, store: store}
			st, err := sf.open(ctx, log)
			if err != nil {
				return nil, "", err
			}
			dir, err := sf.dir(true)
			if err != nil {
				st.Close()
				return nil, "", err
			}
			return st, dir, nil
		},
		LoadGate: func(path string, opts ...gate.Option) (*gate.Gate, error) {
			return buildGate(path, stderr, opts...)
		},
		Notifier:         extra,
		GateOptions:      obs.gateOptions(),
		GatewayObservers: obs.gatewayObservers(),
	})
	in := watchInterrupts()
	defer in.stop()
	if err := srv.Open(ctx); err != nil {
		var ce *server.ConfigError
		if errors.As(err, &ce) {
			return &exitError{code: 2, msg: err.Error()}
		}
		return err
	}
	defer srv.Close()
	srv.WriteBanner(stdout)
	base := srv.URL()
	hg := server.Held{Gateway: srv.Gateway(), Gate: srv.Gate(), Stderr: stderr, Answer: func(h mcpgw.HeldCall) string {
		return " | " + base + console.ApprovalPath(h.ApprovalID)
	}}
	if _, err := server.UntilStopped(ctx, in.ch, hg, srv.Failed()); err != nil {
		return err
	}
	return srv.Close()
}
