package servecmd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/httpapi/console"
	"github.com/portcullis/portcullis/internal/cmd/cmdutil"
	"github.com/portcullis/portcullis/mcpgw"
	"github.com/portcullis/portcullis/notify"
	"github.com/portcullis/portcullis/server"
)

// runServe runs the HTTP gateway: the MCP endpoint on /mcp in front of the
// configured upstreams, for agents with tokens.
func runServe(ctx context.Context, env *cmdutil.Env, o *serveOptions, pos []string, stdout, stderr io.Writer) error {
	of := &o.obs
	if len(pos) > 0 {
		return cmdutil.UsageError("serve takes no arguments; unexpected %q", pos[0])
	}
	cfg, err := server.LoadConfig(o.config)
	if errors.Is(err, os.ErrNotExist) {
		return configMissing(o.config, o.configGiven)
	}
	if err != nil {
		return &cmdutil.ExitError{Code: 2, Msg: err.Error()}
	}
	log, err := of.Logger(stderr)
	if err != nil {
		return err
	}
	cmdutil.TuneGC(env)
	obs := &cmdutil.Observability{Log: log}
	flushTraces, err := obs.StartTracing(ctx)
	if err != nil {
		return err
	}
	defer flushTraces()
	// The configuration's desktop and webhook channels; the terminal and
	// the console are the server's own.
	nf := cmdutil.NotifyFlags{Desktop: cfg.Notify.Desktop, Webhook: cfg.Notify.Webhook.URL, WebhookFormat: cmp.Or(cfg.Notify.Webhook.Format, notify.FormatJSON), WebhookHuman: cfg.Notify.Webhook.Human}
	extra, cleanup, err := nf.Notifier(log)
	if err != nil {
		return err
	}
	defer cleanup()
	srv := server.New(server.Options{
		Config: cfg, Listen: o.listen, Terminal: stdout, Stderr: stderr, Logger: log, Version: cmdutil.ModuleVersion(),
		OpenStore: func(ctx context.Context, state, store string) (portcullis.Store, string, error) {
			sf := cmdutil.StateFlags{State: state, Store: store}
			st, err := sf.Open(ctx, env, log)
			if err != nil {
				return nil, "", err
			}
			dir, err := sf.Dir(env, true)
			if err != nil {
				st.Close()
				return nil, "", err
			}
			return st, dir, nil
		},
		LoadGate: func(path string, opts ...gate.Option) (*gate.Gate, error) {
			return cmdutil.BuildGate(env, path, stderr, opts...)
		},
		Notifier:         extra,
		GateOptions:      obs.GateOptions(),
		GatewayObservers: obs.GatewayObservers(),
	})
	signals, stopSignals := env.WatchInterrupts()
	defer stopSignals()
	if err := srv.Open(ctx); err != nil {
		var ce *server.ConfigError
		if errors.As(err, &ce) {
			return &cmdutil.ExitError{Code: 2, Msg: err.Error()}
		}
		return err
	}
	defer srv.Close()
	srv.WriteBanner(stdout)
	base := srv.URL()
	hg := server.Held{Gateway: srv.Gateway(), Gate: srv.Gate(), Stderr: stderr, Answer: func(h mcpgw.HeldCall) string {
		return " | " + base + console.ApprovalPath(h.ApprovalID)
	}}
	if _, err := server.UntilStopped(ctx, signals, hg, srv.Failed()); err != nil {
		return err
	}
	return srv.Close()
}

// exampleConfig is the gateway configuration to start from, in the
// repository and in the release archives.
const exampleConfig = "examples/gateway/portcullis.yaml"

// configMissing says which configuration file serve looked for when it is
// not there, and how to name another one.
func configMissing(path string, named bool) error {
	if named {
		return &cmdutil.ExitError{Code: 2, Msg: fmt.Sprintf("no gateway configuration at %s (--config): check the path, or start from %s", path, exampleConfig)}
	}
	return &cmdutil.ExitError{Code: 2, Msg: fmt.Sprintf("no gateway configuration at %s (the default of --config) in this directory: pass --config FILE, or start from %s", path, exampleConfig)}
}
