package cmdutil

import (
	"fmt"
	"io"
	"strings"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/policy"
	"github.com/portcullis/portcullis/validator/providers"
)

// PolicyPath returns the --policy value or $PORTCULLIS_POLICY.
func PolicyPath(env *Env, flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	if v := strings.TrimSpace(env.Getenv("PORTCULLIS_POLICY")); v != "" {
		return v, nil
	}
	return "", UsageError("no policy file: pass --policy FILE or set PORTCULLIS_POLICY")
}

// DefaultPolicyNotice is said once on stderr by a command that falls back
// on the built-in default policy.
const DefaultPolicyNotice = "no --policy given: using the built-in default policy (portcullis policy show-default prints it)"

// AgentPolicyPath is PolicyPath for the commands that gate an agent (hook,
// exec, mcp, decide): with neither --policy nor $PORTCULLIS_POLICY it says
// so on stderr and returns "", which BuildGate reads as the built-in
// default policy.
func AgentPolicyPath(env *Env, flagValue string, stderr io.Writer) string {
	if path, err := PolicyPath(env, flagValue); err == nil {
		return path
	}
	fmt.Fprintln(stderr, DefaultPolicyNotice)
	return ""
}

// BuildGate is gate.Load with what the command line knows: the policy's
// validator (providers.New, its API key from the environment variable the
// policy names), this binary and the validator's provider program protected
// like the policy and state (an agent's command that touches them is
// blocked), the home directory ~
// stands for. A policy that does not load is bad input.
func BuildGate(env *Env, path string, stderr io.Writer, opts ...gate.Option) (*gate.Gate, error) {
	if exe, err := env.Exe(); err == nil {
		opts = append(opts, gate.WithProtectedPaths(exe))
	}
	// The provider program answers for the validator: an agent that could
	// replace it (or the file a link there leads to, or put one where the
	// lookup would find it first) could answer for it.
	opts = append(opts, gate.WithProtectedPaths(providers.ProgramPaths(env.Getenv)...))
	if home, err := env.Home(); err == nil {
		opts = append(opts, gate.WithHomeDir(home))
	}
	g, warnings, err := gate.Load(path, func(pol *portcullis.Policy) (portcullis.Validator, error) {
		return providers.New(pol, env.Getenv, Logger(stderr))
	}, opts...)
	policy.WriteWarnings(stderr, warnings)
	if err != nil {
		return nil, &ExitError{Code: 2, Msg: err.Error()}
	}
	return g, nil
}
