package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/portcullis/portcullis/auditlog"
	"github.com/portcullis/portcullis/metrics"
	"github.com/portcullis/portcullis/witness"
)

// auditConfig is serve's `audit` block: where the chain's head is
// anchored outside the host.
type auditConfig struct {
	// Witnesses receive the chain's head at every WitnessInterval and on
	// shutdown.
	Witnesses []witnessConfig `yaml:"witnesses"`
	// WitnessInterval is how often the head is published (default 1m).
	WitnessInterval time.Duration `yaml:"witnessInterval"`
}

// witnessConfig is one witness: exactly one of URL, File and Stderr.
type witnessConfig struct {
	// URL is an HTTP witness: heads are POSTed to it as JSON
	// (docs/OPERATIONS.md; `portcullis witness serve` is one).
	URL string `yaml:"url"`
	// TokenFile or TokenEnv holds the HTTP witness's bearer token.
	TokenFile string `yaml:"tokenFile"`
	TokenEnv  string `yaml:"tokenEnv"`
	// File is appended one head a line (put it on another mount).
	File string `yaml:"file"`
	// Stderr writes each head as a line to standard error, for a
	// supervisor that ships its logs off the host.
	Stderr bool `yaml:"stderr"`
}

// witnesses builds the configured witnesses; rel resolves a relative file
// name against the configuration's directory.
func (c *auditConfig) witnesses(rel func(string) string, stderr io.Writer) ([]witness.Witness, error) {
	var out []witness.Witness
	for i, w := range c.Witnesses {
		n := 0
		for _, set := range []bool{w.URL != "", w.File != "", w.Stderr} {
			if set {
				n++
			}
		}
		if n != 1 {
			return nil, fmt.Errorf("audit.witnesses[%d]: give exactly one of url, file and stderr", i)
		}
		switch {
		case w.URL != "":
			if !strings.HasPrefix(w.URL, "http://") && !strings.HasPrefix(w.URL, "https://") {
				return nil, fmt.Errorf("audit.witnesses[%d]: url %q: want http:// or https://", i, w.URL)
			}
			tok, err := witnessToken(rel(w.TokenFile), w.TokenEnv)
			if err != nil {
				return nil, fmt.Errorf("audit.witnesses[%d]: %w", i, err)
			}
			out = append(out, &witness.HTTP{URL: w.URL, Token: tok})
		case w.File != "":
			if w.TokenFile != "" || w.TokenEnv != "" {
				return nil, fmt.Errorf("audit.witnesses[%d]: a token is for a url witness", i)
			}
			out = append(out, &witness.File{Path: rel(w.File)})
		default:
			out = append(out, &witness.Stream{W: stderr, Label: "stderr"})
		}
	}
	if c.WitnessInterval < 0 {
		return nil, fmt.Errorf("audit.witnessInterval: %s is negative", c.WitnessInterval)
	}
	return out, nil
}

// witnessToken reads a witness's bearer token from a file or the
// environment ("" when neither is named).
func witnessToken(file, env string) (string, error) {
	switch {
	case file != "" && env != "":
		return "", errors.New("give tokenFile or tokenEnv, not both")
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("witness token: %w", err)
		}
		tok := strings.TrimSpace(string(b))
		if tok == "" {
			return "", fmt.Errorf("witness token: %s is empty", file)
		}
		return tok, nil
	case env != "":
		tok := strings.TrimSpace(os.Getenv(env))
		if tok == "" {
			return "", fmt.Errorf("witness token: $%s is empty", env)
		}
		return tok, nil
	}
	return "", nil
}

// startWitnesses publishes the chain's head to ws every interval, beside
// the gateway. The returned stop publishes the last head (call it once
// no more decisions are made) and waits; it may be called more than once.
func startWitnesses(ctx context.Context, chain witness.Chain, dir string, ws []witness.Witness, interval time.Duration, log *slog.Logger, m *metrics.Metrics) (stop func(), err error) {
	if len(ws) == 0 {
		return func() {}, nil
	}
	key, err := secretFile(dir, "audit.key")
	if err != nil {
		return nil, fmt.Errorf("audit key: %w", err)
	}
	opts := witness.Options{
		Chain: chain, Witnesses: ws, Interval: interval, Logger: log,
		Sign: func(h witness.Head) string { return auditlog.SignHead(key, h) },
	}
	if m != nil {
		opts.Observe = func(st witness.Status) { m.ObserveWitness(st.Witness, st.LagRows, st.LastKept, st.Err != nil) }
	}
	p := witness.NewPublisher(opts)
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(wctx)
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}, nil
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

// runWitness runs a reference witness.
func runWitness(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "serve" {
		return usageError("witness needs a subcommand: serve")
	}
	fs := newFlagSet("witness serve", stderr, "witness serve --dir DIR [--listen ADDR] [--token-file FILE]")
	dir := fs.String("dir", "", "keep the heads in this `directory`, NAME.jsonl for each gateway (required)")
	listen := fs.String("listen", "127.0.0.1:8480", "listen on this `address`")
	tokenFile := fs.String("token-file", "", "require this bearer token (read from `file`) on every request")
	pos, err := parseArgs(fs, args[1:])
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError("witness serve: unexpected argument %q", pos[0])
	}
	if *dir == "" {
		return usageError("witness serve needs --dir")
	}
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		return fmt.Errorf("witness directory: %w", err)
	}
	tok, err := witnessToken(*tokenFile, "")
	if err != nil {
		return usageError("--token-file: %v", err)
	}
	log := cliLogger(stderr)
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", *listen, err)
	}
	srv := &http.Server{
		Handler:           &witness.Server{Dir: *dir, Token: tok, Logger: log},
		ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, IdleTimeout: time.Minute,
	}
	fmt.Fprintf(stdout, "portcullis: witness on http://%s/heads/NAME, heads kept in %s\n", ln.Addr(), *dir)
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
