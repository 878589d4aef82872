package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/portcullis/portcullis/auditlog"
	"github.com/portcullis/portcullis/server"
	"github.com/portcullis/portcullis/witness"
)

// witnessToken reads a witness's bearer token from a file or the
// environment (server.WitnessToken).
func witnessToken(file, env string) (string, error) { return server.WitnessToken(file, env) }

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

// witnessSources returns the witnesses of audit verify --witness, whose
// kept heads are read back with the bearer token in tokenFile.
func witnessSources(specs []string, tokenFile string, stderr io.Writer) ([]auditlog.HeadSource, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	tok, err := witnessToken(tokenFile, "")
	if err != nil {
		return nil, usageError("--witness-token-file: %v", err)
	}
	var out []auditlog.HeadSource
	for _, spec := range specs {
		if spec == "stderr" {
			return nil, usageError("--witness stderr: give the file the supervisor kept the lines in")
		}
		w, err := witness.Parse(spec, stderr)
		if err != nil {
			return nil, usageError("--witness: %v", err)
		}
		if h, ok := w.(*witness.HTTP); ok {
			h.Token = tok
		}
		r, ok := w.(witness.Reader)
		if !ok {
			return nil, usageError("--witness %s: its heads cannot be read back", spec)
		}
		out = append(out, r)
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
	tok, err := witnessToken(o.tokenFile, "")
	if err != nil {
		return usageError("--token-file: %v", err)
	}
	log := cliLogger(stderr)
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", o.listen, err)
	}
	srv := &http.Server{
		Handler:           &witness.Server{Dir: o.dir, Token: tok, Logger: log},
		ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, IdleTimeout: time.Minute,
	}
	fmt.Fprintf(stdout, "portcullis: witness on http://%s/heads/NAME, heads kept in %s\n", ln.Addr(), o.dir)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(shut)
}
