package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/portcullis/portcullis/loadgen"
	"github.com/portcullis/portcullis/state"
)

// runBench drives a running gateway with concurrent agent sessions (package
// loadgen) and reports throughput, latency and the audit log's account of
// the run.
func runBench(ctx context.Context, o *benchOptions, pos []string, stdout, stderr io.Writer) error {
	sf := &o.state
	var err error
	if len(pos) > 0 {
		return usageError("bench takes no arguments; unexpected %q", pos[0])
	}
	cfg := o.cfg
	cfg.BaseURL = strings.TrimRight(firstNonEmpty(cfg.BaseURL, strings.TrimSpace(os.Getenv("PORTCULLIS_GATEWAY")), loadgen.DefaultURL), "/")
	if cfg.Via, err = loadgen.ParseVia(o.via); err != nil {
		return usageError("--via %v", err)
	}
	if cfg.Mix, err = loadgen.ParseMix(o.mix); err != nil {
		return usageError("--mix: %v", err)
	}
	if cfg.Mix[loadgen.Shell] > 0 && cfg.Tools.Shell == "" {
		cfg.Mix[loadgen.Shell] = 0 // no shell tool named: no shell commands
	}
	if cfg.AgentToken, err = benchToken(o.tokenFile); err != nil {
		return err
	}
	if cfg.Mix[loadgen.Write] > 0 {
		if cfg.HumanToken, err = benchHumanToken(sf, o.humanTokenFile); err != nil {
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
		return usageError("%v", err)
	}
	var check *loadgen.AuditCheck
	if o.audit {
		// Open only an existing store: a new empty one would report
		// every decision missing.
		if err := sf.place().Missing(); err != nil {
			return fmt.Errorf("the gateway's store: %w (pass the gateway's --state or --store, or --audit=false)", err)
		}
		st, err := sf.open(ctx, cliLogger(stderr))
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
		return &exitError{code: 1, msg: "the audit log is not complete for this run"}
	}
	return nil
}

func benchToken(file string) (string, error) {
	if file == "" {
		if t := strings.TrimSpace(os.Getenv("PORTCULLIS_AGENT_TOKEN")); t != "" {
			return t, nil
		}
		return "", usageError("no agent token: pass --token-file FILE or set PORTCULLIS_AGENT_TOKEN")
	}
	t, err := state.ReadSecretFile(file)
	if err != nil {
		return "", usageError("agent token: %v", err)
	}
	return t, nil
}

func benchHumanToken(sf *stateFlags, file string) (string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", usageError("human token: %v", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	dir, err := sf.dir(false)
	if err != nil {
		return "", err
	}
	t, err := readSecret(dir, "admin.token")
	if err != nil {
		return "", usageError("writes in the mix need a person's approval: %v (pass --human-token-file, or --mix without write)", err)
	}
	return t, nil
}
