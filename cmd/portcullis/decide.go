package main

import (
	"context"
	"io"
	"os"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/policy"
)

// loadGate loads the policy file, prints its warnings, and builds a gate
// for a trusted caller: decide and explain are the tools for testing and
// explaining, so their requests may carry grants, active elements and run
// state.
func loadGate(path string, stderr io.Writer, opts ...gate.Option) (*gate.Gate, error) {
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

// buildGate is gate.Load with what the command line knows: the policy's
// validator, this binary protected like the policy and state (an agent's
// command that touches it is blocked), the home directory ~ stands for.
func buildGate(path string, stderr io.Writer, opts ...gate.Option) (*gate.Gate, error) {
	if exe, err := os.Executable(); err == nil {
		opts = append(opts, gate.WithProtectedPaths(exe))
	}
	if home, err := os.UserHomeDir(); err == nil {
		opts = append(opts, gate.WithHomeDir(home))
	}
	g, warnings, err := gate.Load(path, func(pol *portcullis.Policy) (portcullis.Validator, error) {
		return buildValidator(pol, cliLogger(stderr))
	}, opts...)
	policy.WriteWarnings(stderr, warnings)
	if err != nil {
		return nil, &exitError{code: 2, msg: err.Error()}
	}
	return g, nil
}

// runDecide reads one JSON request per line and writes one JSON decision per
// line (Gate.DecideLines). A malformed line stops the run with exit status
// 2 and a message naming the line; nothing is written for it.
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
	return g.DecideLines(ctx, stdin, stdout)
}
