package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"runtime/debug"
	"strings"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/server"
)

// runMCP is the stdio wrapper (server.Wrapper): an MCP server on stdin
// and stdout that starts the upstream server named after "--" and gates
// its tools. Nothing but MCP messages is written to stdout; logs go to
// stderr or --log.
func runMCP(ctx context.Context, o *mcpOptions, pos []string, stdin io.Reader, stdout, stderr io.Writer) error {
	sf, nf, of := &o.state, &o.notify, &o.obs
	if len(pos) == 0 {
		return usageError("mcp needs the upstream server's command after --, e.g. portcullis mcp -- npx -y @modelcontextprotocol/server-filesystem ~/work")
	}
	path := agentPolicyPath(o.policy, stderr)
	logw, closeLog, err := logFile(o.log, stderr)
	if err != nil {
		return err
	}
	defer closeLog()
	log, err := of.logger(logw)
	if err != nil {
		return err
	}
	tuneGC()
	ws, err := o.witness.witnesses(stderr)
	if err != nil {
		return err
	}
	obs := &observability{log: log}
	flushTraces, err := obs.startTracing(ctx)
	if err != nil {
		return err
	}
	defer flushTraces()
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
	opts := o.WrapperOptions
	opts.Command, opts.Policy = pos, path
	opts.Agent = firstNonEmpty(o.Agent, strings.TrimSpace(os.Getenv("PORTCULLIS_AGENT")))
	opts.OpenStore = func(ctx context.Context) (portcullis.Store, string, error) { return openState(ctx, sf, log) }
	opts.LoadGate = func(path string, opts ...gate.Option) (*gate.Gate, error) {
		g, _, err := loadAgentGate(path, stderr, opts...)
		return g, err
	}
	opts.ProtectedPaths, opts.Notifier, opts.Channels = hookEnv(workDir()).ClientFiles(), n, channels
	opts.Witnesses, opts.WitnessInterval = ws, o.witness.interval
	opts.GateOptions, opts.GatewayObservers = obs.gateOptions(), obs.gatewayObservers()
	opts.Logger, opts.Version, opts.Stderr = log, moduleVersion(), stderr
	if of.metricsAddr != "" {
		if opts.Metrics, err = net.Listen("tcp", of.metricsAddr); err != nil {
			return fmt.Errorf("--metrics-addr: %w", err)
		}
	}
	w := server.NewWrapper(opts)
	in := watchInterrupts()
	defer in.stop()
	if err := w.Open(ctx); err != nil {
		return err
	}
	defer w.Close()
	return w.Run(ctx, stdin, stdout, in.ch)
}

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
