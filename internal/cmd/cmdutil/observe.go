package cmdutil

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"time"

	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/mcpgw"
	"github.com/portcullis/portcullis/server"
	"github.com/portcullis/portcullis/tracing"
	"github.com/portcullis/portcullis/witness"

	"github.com/spf13/pflag"
)

// ObsFlags are the observability flags of serve and mcp.
type ObsFlags struct {
	LogFormat   string
	MetricsAddr string // mcp only
}

// Register declares --log-format, and --metrics-addr when metricsAddr is
// set.
func (o *ObsFlags) Register(fs *pflag.FlagSet, metricsAddr bool) {
	fs.StringVar(&o.LogFormat, "log-format", "text", "log `format`: text or json")
	if metricsAddr {
		fs.StringVar(&o.MetricsAddr, "metrics-addr", "", "serve Prometheus metrics on this `address` (e.g. 127.0.0.1:9464), with the token in metrics.token of the state directory")
	}
}

// Logger returns the process's logger in the chosen format, at info level.
func (o *ObsFlags) Logger(w io.Writer) (*slog.Logger, error) {
	log, err := server.NewLogger(w, o.LogFormat)
	if err != nil {
		return nil, UsageError("--log-format %q: want text or json", o.LogFormat)
	}
	return log, nil
}

// Observability is what a long-running command gives operators
// (server.Observability): traces and one log line per decision.
type Observability struct {
	Tracer *tracing.Tracer // nil: tracing is off
	Log    *slog.Logger
}

// StartTracing turns traces on when the OTEL_* variables ask for them
// (tracing.Start). The returned function flushes the spans not yet sent;
// call it before exiting.
func (o *Observability) StartTracing(ctx context.Context) (func(), error) {
	tr, flush, err := tracing.Start(ctx, ModuleVersion(), o.Log)
	o.Tracer = tr
	return flush, err
}

func (o *Observability) server() server.Observability {
	return server.Observability{Log: o.Log, Tracer: o.Tracer}
}

// GateOptions are the gate's options that report each decision.
func (o *Observability) GateOptions() []gate.Option { return o.server().GateOptions() }

// GatewayObservers are the MCP gateway's observers of each call.
func (o *Observability) GatewayObservers() []mcpgw.Observer { return o.server().GatewayObservers() }

// WitnessFlags are the witness flags of `portcullis mcp`.
type WitnessFlags struct {
	Specs    []string
	Interval time.Duration
}

// Register declares --witness and --witness-interval.
func (f *WitnessFlags) Register(fs *pflag.FlagSet) {
	fs.Func("witness", "publish the audit chain's head to this witness: an http(s) `URL`, a file, or stderr (repeatable)", func(s string) error {
		f.Specs = append(f.Specs, s)
		return nil
	})
	fs.DurationVar(&f.Interval, "witness-interval", time.Minute, "how often the head is published to the witnesses")
}

// Witnesses are the witnesses --witness names.
func (f *WitnessFlags) Witnesses(stderr io.Writer) ([]witness.Witness, error) {
	ws, err := witness.ParseAll(f.Specs, stderr)
	if err != nil {
		return nil, UsageError("--witness: %v", err)
	}
	return ws, nil
}

// Logger logs what a person running a command should see: warnings and
// errors, not routine events such as a migration.
func Logger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// LogFile is the log of --log FILE (appended to), else stderr.
func LogFile(path string, stderr io.Writer) (io.Writer, func(), error) {
	if path == "" {
		return stderr, func() {}, nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("--log: %w", err)
	}
	return f, func() { f.Close() }, nil
}

// TuneGC makes the garbage collector run less often in the long-running
// gateway processes (unless $GOGC says otherwise). The MCP SDK allocates a
// fresh 32 KiB decoding buffer for every JSON value it decodes, so a
// gateway allocates a lot of short-lived memory while its live heap stays
// small (a few MB): collecting at 400% growth instead of 100% roughly
// triples the HTTP gateway's throughput (docs/BENCHMARKS.md) for a heap
// that still stays in the tens of megabytes.
func TuneGC(env *Env) {
	if env.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
}

// ModuleVersion is the binary's module version, as the gateway reports it
// to MCP clients and upstreams.
func ModuleVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
