package decidecmd

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/internal/cmd/cmdutil"
	"github.com/portcullis/portcullis/policy"
	"github.com/portcullis/portcullis/shell"
)

// loadGate loads the policy file, prints its warnings, and builds a gate
// for a trusted caller: decide and explain are the tools for testing and
// explaining, so their requests may carry grants, active elements and run
// state.
func loadGate(env *cmdutil.Env, path string, stderr io.Writer, opts ...gate.Option) (*gate.Gate, error) {
	return cmdutil.BuildGate(env, path, stderr, append(opts, gate.WithRequestOverrides())...)
}

// runDecide reads one JSON request per line and writes one JSON decision per
// line (Gate.DecideLines). A malformed line stops the run with exit status
// 2 and a message naming the line; nothing is written for it.
func runDecide(ctx context.Context, env *cmdutil.Env, o *decideOptions, pos []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(pos) > 0 {
		return cmdutil.UsageError("decide reads requests from stdin; unexpected argument %q", pos[0])
	}
	if o.notify.Set() && o.state.State == "" && o.state.Store == "" {
		return cmdutil.UsageError("--notify-* needs --state DIR or --store URL: without them decide keeps no blocks or approvals to tell anyone about")
	}
	path := cmdutil.AgentPolicyPath(env, o.policy, stderr)
	// Without --state or --store, decide is a pure function of the policy
	// and the requests: no grant is used up, no approval or audit row kept.
	var opts []gate.Option
	if o.state.State != "" || o.state.Store != "" {
		log := cmdutil.Logger(stderr)
		st, err := o.state.Open(ctx, env, log)
		if err != nil {
			return err
		}
		defer st.Close()
		dir, err := o.state.Dir(env, true)
		if err != nil {
			return err
		}
		opts = append(opts, gate.WithStore(st), gate.WithLogger(log), gate.WithProtectedPaths(dir))
		n, cleanup, err := o.notify.Notifier(log)
		if err != nil {
			return err
		}
		defer cleanup()
		if n != nil {
			opts = append(opts, gate.WithNotifier(n))
		}
	}
	g, err := loadGate(env, path, stderr, opts...)
	if err != nil {
		return err
	}
	return g.DecideLines(ctx, stdin, stdout)
}

// newShellClassifier builds the classifier: the built-in knowledge, the
// policy's shell rules when there is a policy, and Portcullis's own files
// (the policy and the documents it names, the state directory, this
// binary) protected.
func newShellClassifier(env *cmdutil.Env, policyFlag string, stderr io.Writer) (*shell.Classifier, error) {
	opts := shell.Options{}
	if home, err := env.Home(); err == nil {
		opts.Home = home
	}
	if dir, err := (&cmdutil.StateFlags{}).Dir(env, false); err == nil {
		opts.ProtectedPaths = append(opts.ProtectedPaths, dir)
	}
	if exe, err := env.Exe(); err == nil {
		opts.ProtectedPaths = append(opts.ProtectedPaths, exe)
	}
	path := policyFlag
	if path == "" {
		path = strings.TrimSpace(env.Getenv("PORTCULLIS_POLICY"))
	}
	if path != "" {
		pol, warnings, err := policy.Load(path)
		if err != nil {
			return nil, &cmdutil.ExitError{Code: 2, Msg: err.Error()}
		}
		policy.WriteWarnings(stderr, warnings)
		opts = opts.WithPolicy(pol)
	}
	c, err := shell.New(opts)
	if err != nil {
		return nil, &cmdutil.ExitError{Code: 2, Msg: fmt.Sprintf("%s: %v", path, err)}
	}
	return c, nil
}
