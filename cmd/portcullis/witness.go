package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/portcullis/portcullis/metrics"
	"github.com/portcullis/portcullis/server"
	"github.com/portcullis/portcullis/witness"
)

// startWitnesses publishes the chain's head to ws (server.StartWitnesses).
func startWitnesses(ctx context.Context, chain witness.Chain, dir string, ws []witness.Witness, interval time.Duration, log *slog.Logger, m *metrics.Metrics) (stop func(), err error) {
	return server.StartWitnesses(ctx, chain, dir, ws, interval, log, m)
}

// witnessFlags are the witness flags of `portcullis mcp`.
type witnessFlags struct {
	specs    []string
	interval time.Duration
}

func (f *witnessFlags) register(fs interface {
	Func(name, usage string, fn func(string) error)
	DurationVar(p *time.Duration, name string, value time.Duration, usage string)
}) {
	fs.Func("witness", "publish the audit chain's head to this witness: an http(s) `URL`, a file, or stderr (repeatable)", func(s string) error {
		f.specs = append(f.specs, s)
		return nil
	})
	fs.DurationVar(&f.interval, "witness-interval", time.Minute, "how often the head is published to the witnesses")
}

func (f *witnessFlags) witnesses(stderr io.Writer) ([]witness.Witness, error) {
	var out []witness.Witness
	for _, s := range f.specs {
		w, err := witness.Parse(s, stderr)
		if err != nil {
			return nil, usageError("--witness: %v", err)
		}
		out = append(out, w)
	}
	return out, nil
}

// runWitnessServe runs a reference witness.
func runWitnessServe(ctx context.Context, o *witnessServeOptions, pos []string, stdout, stderr io.Writer) error {
	if len(pos) > 0 {
		return usageError("witness serve: unexpected argument %q", pos[0])
	}
	if o.dir == "" {
		return usageError("witness serve needs --dir")
	}
	if err := os.MkdirAll(o.dir, 0o700); err != nil {
		return fmt.Errorf("witness directory: %w", err)
	}
	tok, err := server.WitnessToken(o.tokenFile, "")
	if err != nil {
		return usageError("--token-file: %v", err)
	}
	s := &witness.Server{Dir: o.dir, Token: tok, Logger: cliLogger(stderr)}
	return s.ListenAndServe(ctx, o.listen, func(a net.Addr) {
		fmt.Fprintf(stdout, "portcullis: witness on http://%s/heads/NAME, heads kept in %s\n", a, o.dir)
	})
}
