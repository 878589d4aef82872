package gatecmd

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/hook"
	"github.com/portcullis/portcullis/internal/cmd/cmdutil"
	"github.com/portcullis/portcullis/server"
	"github.com/portcullis/portcullis/shellgate"
	"github.com/portcullis/portcullis/state"
)

// runExec is `portcullis exec` (and portcullis-sh): classify, decide, wait
// for a person when one must approve, then run the command with the
// caller's stdio and exit with its status.
func runExec(ctx context.Context, env *cmdutil.Env, o *execOptions, spec shellgate.Spec, stdin io.Reader, stdout, stderr io.Writer) error {
	command, err := spec.Command()
	if err != nil {
		return cmdutil.UsageError("exec: %v", err)
	}
	req := o.Request
	req.Command, req.UserPresent = command, shellgate.IsTerminal(stdin)
	req.Agent = cmp.Or(o.Agent, strings.TrimSpace(env.Getenv("PORTCULLIS_AGENT")), "shell")
	req.Session = cmp.Or(o.Session, strings.TrimSpace(env.Getenv("PORTCULLIS_SESSION")))
	d, err := execDecide(ctx, env, o, req, stderr)
	if err != nil {
		return err
	}
	if code := spec.RunDecided(ctx, d, stdin, stdout, stderr); code != 0 {
		return &cmdutil.ExitError{Code: code}
	}
	return nil
}

// execDecide decides the command under the policy's shell tool, waiting
// for a person unless --no-wait. The store is closed before it returns:
// the command runs without Portcullis holding its state open.
func execDecide(ctx context.Context, env *cmdutil.Env, o *execOptions, req shellgate.Request, stderr io.Writer) (portcullis.Decision, error) {
	g, pol, cleanup, err := openAgentGate(ctx, env, o.policy, &o.state, &o.notify, cmdutil.Logger(stderr), stderr)
	if err != nil {
		return portcullis.Decision{}, err
	}
	defer cleanup()
	name, arg, err := shellgate.Tool(pol, o.tool)
	if err != nil {
		return portcullis.Decision{}, cmdutil.UsageError("exec: %v", err)
	}
	sg := shellgate.Gate{Decider: g, Tool: name, Arg: arg, Wait: pol.Approvals.Wait, OnWait: shellgate.SayWaiting(stderr)}
	if !o.noWait {
		sg.Holder = hook.WaitThenDecide{Waiter: g, Decider: g}
	}
	d, err := sg.Decide(ctx, req)
	if err != nil {
		return d, &cmdutil.ExitError{Code: shellgate.ExitDenied, Msg: "not run: " + err.Error()}
	}
	return d, nil
}

// runMCP is the stdio wrapper (server.Wrapper): an MCP server on stdin
// and stdout that starts the upstream server named after "--" and gates
// its tools. Nothing but MCP messages is written to stdout; logs go to
// stderr or --log.
func runMCP(ctx context.Context, env *cmdutil.Env, o *mcpOptions, pos []string, stdin io.Reader, stdout, stderr io.Writer) error {
	sf, nf, of := &o.state, &o.notify, &o.obs
	if len(pos) == 0 {
		return cmdutil.UsageError("mcp needs the upstream server's command after --, e.g. portcullis mcp -- npx -y @modelcontextprotocol/server-filesystem ~/work")
	}
	path := cmdutil.AgentPolicyPath(env, o.policy, stderr)
	logw, closeLog, err := cmdutil.LogFile(o.log, stderr)
	if err != nil {
		return err
	}
	defer closeLog()
	log, err := of.Logger(logw)
	if err != nil {
		return err
	}
	cmdutil.TuneGC(env)
	ws, err := o.witness.Witnesses(stderr)
	if err != nil {
		return err
	}
	obs := &cmdutil.Observability{Log: log}
	flushTraces, err := obs.StartTracing(ctx)
	if err != nil {
		return err
	}
	defer flushTraces()
	n, cleanup, err := nf.Notifier(log)
	if err != nil {
		return err
	}
	defer cleanup()
	var channels []string
	if nf.Desktop {
		channels = append(channels, "desktop notifications")
	}
	if nf.Webhook != "" {
		channels = append(channels, "the webhook "+state.RedactURL(nf.Webhook))
	}
	opts := o.WrapperOptions
	opts.Command, opts.Policy = pos, path
	opts.Agent = cmp.Or(o.Agent, strings.TrimSpace(env.Getenv("PORTCULLIS_AGENT")))
	opts.OpenStore = func(ctx context.Context) (portcullis.Store, string, error) { return sf.OpenState(ctx, env, log) }
	opts.LoadGate = func(path string, opts ...gate.Option) (*gate.Gate, error) {
		g, _, err := loadAgentGate(env, path, stderr, opts...)
		return g, err
	}
	opts.ProtectedPaths, opts.Notifier, opts.Channels = hookEnv(env, env.Dir()).ClientFiles(), n, channels
	opts.Witnesses, opts.WitnessInterval = ws, o.witness.Interval
	opts.GateOptions, opts.GatewayObservers = obs.GateOptions(), obs.GatewayObservers()
	opts.Logger, opts.Version, opts.Stderr = log, cmdutil.ModuleVersion(), stderr
	if of.MetricsAddr != "" {
		if opts.Metrics, err = net.Listen("tcp", of.MetricsAddr); err != nil {
			return fmt.Errorf("--metrics-addr: %w", err)
		}
	}
	w := server.NewWrapper(opts)
	signals, stopSignals := env.WatchInterrupts()
	defer stopSignals()
	if err := w.Open(ctx); err != nil {
		return err
	}
	defer w.Close()
	return w.Run(ctx, stdin, stdout, signals)
}
