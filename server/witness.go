package server

import (
	"context"
	"errors"
	"fmt"
	"github.com/portcullis/portcullis/auditlog"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/portcullis/portcullis/metrics"
	"github.com/portcullis/portcullis/witness"
)

// witnesses builds the configured witnesses; rel resolves a relative file
// name against the configuration's directory.
func (c *Audit) witnesses(rel func(string) string, stderr io.Writer) ([]witness.Witness, error) {
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
			tok, err := WitnessToken(rel(w.TokenFile), w.TokenEnv)
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

// WitnessToken reads a witness's bearer token from a file or the
// environment ("" when neither is named).
func WitnessToken(file, env string) (string, error) {
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

// WitnessSources returns the witnesses of `audit verify --witness`
// (specs as witness.Parse reads them), whose kept heads are read back,
// from HTTP witnesses with the bearer token in tokenFile.
func WitnessSources(specs []string, tokenFile string, stderr io.Writer) ([]auditlog.HeadSource, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	tok, err := WitnessToken(tokenFile, "")
	if err != nil {
		return nil, fmt.Errorf("--witness-token-file: %v", err)
	}
	var out []auditlog.HeadSource
	for _, spec := range specs {
		if spec == "stderr" {
			return nil, errors.New("--witness stderr: give the file the supervisor kept the lines in")
		}
		w, err := witness.Parse(spec, stderr)
		if err != nil {
			return nil, fmt.Errorf("--witness: %v", err)
		}
		if h, ok := w.(*witness.HTTP); ok {
			h.Token = tok
		}
		r, ok := w.(witness.Reader)
		if !ok {
			return nil, fmt.Errorf("--witness %s: its heads cannot be read back", spec)
		}
		out = append(out, r)
	}
	return out, nil
}

// HeadMAC signs a published head with the state directory's audit key.
// It is not the prune checkpoint's MAC: a head must not pass for a
// checkpoint.
func HeadMAC(key string, h witness.Head) string { return auditlog.SignHead(key, h) }

// StartWitnesses publishes the chain's head to ws every interval, beside
// the gateway, signed with the audit key of the state directory dir. The
// returned stop publishes the last head (call it once no more decisions
// are made) and waits; it may be called more than once. m, when not nil,
// is told how each witness fares.
func StartWitnesses(ctx context.Context, chain witness.Chain, dir string, ws []witness.Witness, interval time.Duration, log *slog.Logger, m *metrics.Metrics) (stop func(), err error) {
	if len(ws) == 0 {
		return func() {}, nil
	}
	key, err := secretIn(dir, "audit.key")
	if err != nil {
		return nil, fmt.Errorf("audit key: %w", err)
	}
	opts := witness.Options{
		Chain: chain, Witnesses: ws, Interval: interval, Logger: log,
		Sign: func(h witness.Head) string { return HeadMAC(key, h) },
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
