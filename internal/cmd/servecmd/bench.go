package servecmd

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/approvals"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/internal/cmd/cmdutil"
	"github.com/portcullis/portcullis/internal/secret"
	"github.com/portcullis/portcullis/loadgen"
)

// runBench drives a running gateway with concurrent agent sessions (package
// loadgen) and reports throughput, latency and the audit log's account of
// the run.
func runBench(ctx context.Context, env *cmdutil.Env, o *benchOptions, pos []string, stdout, stderr io.Writer) error {
	sf := &o.state
	var err error
	if len(pos) > 0 {
		return cmdutil.UsageError("bench takes no arguments; unexpected %q", pos[0])
	}
	cfg := o.cfg
	cfg.BaseURL = strings.TrimRight(cmp.Or(cfg.BaseURL, strings.TrimSpace(env.Getenv("PORTCULLIS_GATEWAY")), loadgen.DefaultURL), "/")
	if cfg.Via, err = loadgen.ParseVia(o.via); err != nil {
		return cmdutil.UsageError("--via %v", err)
	}
	if cfg.Mix, err = loadgen.ParseMix(o.mix); err != nil {
		return cmdutil.UsageError("--mix: %v", err)
	}
	if cfg.Mix[loadgen.Shell] > 0 && cfg.Tools.Shell == "" {
		cfg.Mix[loadgen.Shell] = 0 // no shell tool named: no shell commands
	}
	if cfg.AgentToken, err = benchToken(env, o.tokenFile); err != nil {
		return err
	}
	if cfg.Mix[loadgen.Write] > 0 {
		if cfg.HumanToken, err = benchHumanToken(env, sf, o.humanTokenFile); err != nil {
			return err
		}
	}
	if cfg.ProgressEvery > 0 {
		cfg.Progress = func(s loadgen.Snapshot) { s.WriteProgress(stderr) }
	}
	if o.gatewayPID > 0 {
		p := o.gatewayPID
		cfg.Sample = func() (int64, bool) { return loadgen.ProcessRSS(p) }
	}
	rep, err := loadgen.Run(ctx, cfg)
	if err != nil {
		return cmdutil.UsageError("%v", err)
	}
	var check *loadgen.AuditCheck
	if o.audit {
		// Open only an existing store: a new empty one would report
		// every decision missing.
		if err := sf.Place(env).Missing(); err != nil {
			return fmt.Errorf("the gateway's store: %w (pass the gateway's --state or --store, or --audit=false)", err)
		}
		st, err := sf.Open(ctx, env, cmdutil.Logger(stderr))
		if err != nil {
			return fmt.Errorf("open the store to check the audit log: %w (pass --state or --store, or --audit=false)", err)
		}
		check, err = rep.CheckAudit(ctx, st)
		st.Close()
		if err != nil {
			return err
		}
	}
	if err := rep.Write(stdout, o.json); err != nil {
		return err
	}
	if check != nil && !check.Complete() {
		return &cmdutil.ExitError{Code: 1, Msg: "the audit log is not complete for this run"}
	}
	return nil
}

func benchToken(env *cmdutil.Env, file string) (string, error) {
	if file == "" {
		if t := strings.TrimSpace(env.Getenv("PORTCULLIS_AGENT_TOKEN")); t != "" {
			return t, nil
		}
		return "", cmdutil.UsageError("no agent token: pass --token-file FILE or set PORTCULLIS_AGENT_TOKEN")
	}
	t, err := secret.ReadToken(file)
	if err != nil {
		return "", cmdutil.UsageError("agent token: %v", err)
	}
	return t, nil
}

func benchHumanToken(env *cmdutil.Env, sf *cmdutil.StateFlags, file string) (string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", cmdutil.UsageError("human token: %v", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	dir, err := sf.Dir(env, false)
	if err != nil {
		return "", err
	}
	t, err := secret.ReadToken(filepath.Join(dir, "admin.token"))
	if err != nil {
		return "", cmdutil.UsageError("writes in the mix need a person's approval: %v (pass --human-token-file, or --mix without write)", err)
	}
	return t, nil
}

// runTools lists the pinned MCP tool definitions, and accepts a changed
// one on behalf of a person after showing what changed.
func runTools(ctx context.Context, env *cmdutil.Env, o *toolsOptions, pos []string, stdout, stderr io.Writer) error {
	sf := &o.state
	log := cmdutil.Logger(stderr)
	st, err := sf.Open(ctx, env, log)
	if err != nil {
		return err
	}
	defer st.Close()
	if len(pos) == 0 {
		return approvals.ListPins(ctx, stdout, st, o.changed)
	}
	if pos[0] != "accept" || len(pos) != 3 {
		return cmdutil.UsageError("usage: portcullis tools accept UPSTREAM TOOL")
	}
	dir, err := sf.Dir(env, true)
	if err != nil {
		return err
	}
	g, err := gate.New(&portcullis.Policy{Version: 1}, gate.WithStore(st), gate.WithLogger(log), gate.WithProtectedPaths(dir))
	if err != nil {
		return err
	}
	return approvals.AcceptTool(ctx, stdout, st, g, pos[1], pos[2], cmp.Or(o.as, env.Getenv("USER"), "cli"))
}
