package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/policy"
)

// loadGate loads the policy file, prints its warnings, and builds a gate
// for a trusted caller: its requests may carry grants, active elements and
// run state.
func loadGate(path string, stderr io.Writer, opts ...gate.Option) (*gate.Gate, error) {
	// decide and explain are the tools for testing and explaining: their
	// requests may carry grants, active elements and run state.
	return buildGate(path, stderr, append(opts, gate.WithRequestOverrides())...)
}

// loadAgentGate builds a gate for an agent-facing entry point (the MCP
// gateway): requests cannot override what the gate knows.
func loadAgentGate(path string, stderr io.Writer, opts ...gate.Option) (*gate.Gate, *portcullis.Policy, error) {
	g, err := buildGate(path, stderr, opts...)
	if err != nil {
		return nil, nil, err
	}
	return g, g.Policy(), nil
}

func buildGate(path string, stderr io.Writer, opts ...gate.Option) (*gate.Gate, error) {
	// Portcullis's own binary is protected like its policy and state: an
	// agent's command that touches it is blocked.
	if exe, err := os.Executable(); err == nil {
		opts = append(opts, gate.WithProtectedPaths(exe))
	}
	if home, err := os.UserHomeDir(); err == nil {
		opts = append(opts, gate.WithHomeDir(home))
	}
	load := func() (*portcullis.Policy, []policy.Warning, error) { return policy.Load(path) }
	name := path
	if path == "" {
		load, name = policy.LoadDefault, policy.DefaultName
	}
	pol, warnings, err := load()
	if err != nil {
		return nil, &exitError{code: 2, msg: err.Error()}
	}
	for _, w := range warnings {
		fmt.Fprintln(stderr, "warning: "+w.String())
	}
	v, err := buildValidator(pol, cliLogger(stderr))
	if err != nil {
		return nil, &exitError{code: 2, msg: fmt.Sprintf("%s: %v", name, err)}
	}
	if v != nil {
		opts = append(opts, gate.WithValidator(v))
	}
	g, err := gate.New(pol, opts...)
	if err != nil {
		return nil, &exitError{code: 2, msg: fmt.Sprintf("%s: %v", name, err)}
	}
	return g, nil
}

// runDecide reads one JSON request per line and writes one JSON decision per
// line. A malformed line stops the run with exit status 2 and a message
// naming the line; nothing is written for it.
func runDecide(ctx context.Context, o *decideOptions, pos []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(pos) > 0 {
		return usageError("decide reads requests from stdin; unexpected argument %q", pos[0])
	}
	if o.notify.set() && o.state.state == "" && o.state.store == "" {
		return usageError("--notify-* needs --state DIR or --store URL: without them decide keeps no blocks or approvals to tell anyone about")
	}
	path := agentPolicyPath(o.policy, stderr)
	// Without --state or --store, decide is a pure function of the policy
	// and the requests: no grant is used up, no approval or audit row kept.
	var opts []gate.Option
	if o.state.state != "" || o.state.store != "" {
		log := cliLogger(stderr)
		st, err := o.state.open(ctx, log)
		if err != nil {
			return err
		}
		defer st.Close()
		dir, err := o.state.dir(true)
		if err != nil {
			return err
		}
		opts = append(opts, gate.WithStore(st), gate.WithLogger(log), gate.WithProtectedPaths(dir))
		n, cleanup, err := o.notify.notifier(log)
		if err != nil {
			return err
		}
		defer cleanup()
		if n != nil {
			opts = append(opts, gate.WithNotifier(n))
		}
	}
	g, err := loadGate(path, stderr, opts...)
	if err != nil {
		return err
	}
	return decideLines(ctx, g, stdin, stdout)
}

func decideLines(ctx context.Context, g *gate.Gate, stdin io.Reader, stdout io.Writer) error {
	in := bufio.NewReaderSize(stdin, 64<<10)
	out := bufio.NewWriter(stdout)
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	for lineNo := 1; ; lineNo++ {
		line, err := readLine(in)
		if errors.Is(err, io.EOF) && len(line) == 0 {
			return out.Flush()
		}
		if err != nil && !errors.Is(err, io.EOF) {
			if ferr := out.Flush(); ferr != nil {
				return ferr
			}
			return &exitError{code: 2, msg: fmt.Sprintf("line %d: %v", lineNo, err)}
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		call, derr := portcullis.DecodeCall(line)
		if derr != nil {
			if ferr := out.Flush(); ferr != nil {
				return ferr
			}
			return &exitError{code: 2, msg: fmt.Sprintf("line %d: %v", lineNo, derr)}
		}
		d, derr := g.Decide(ctx, call)
		if derr != nil {
			if ferr := out.Flush(); ferr != nil {
				return ferr
			}
			return &exitError{code: 2, msg: fmt.Sprintf("line %d: %v", lineNo, derr)}
		}
		if err := enc.Encode(d); err != nil {
			return fmt.Errorf("write decision: %w", err)
		}
		// Flush when no more input is waiting, so an interactive caller
		// gets each answer at once and a batch is written in large chunks.
		if in.Buffered() == 0 {
			if err := out.Flush(); err != nil {
				return fmt.Errorf("write decision: %w", err)
			}
		}
	}
}

// readLine returns the next line without its newline, refusing lines longer
// than a request may be.
func readLine(r *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := r.ReadSlice('\n')
		buf = append(buf, chunk...)
		if len(buf) > portcullis.MaxRequestBytes+1 {
			return nil, fmt.Errorf("line longer than the limit of %d bytes", portcullis.MaxRequestBytes)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimSuffix(bytes.TrimSuffix(buf, []byte("\n")), []byte("\r")), err
	}
}
