package gate

import (
	"fmt"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/policy"
)

// Load builds a gate for the policy file at path, or for the built-in
// default policy when path is "". newValidator, when not nil, makes the
// policy's validator (a nil Validator: the policy has none); a validator
// that cannot be made refuses the gate, so a policy that asks for one never
// runs without it. Load returns the warnings of a policy that loads, also
// when the validator or the gate then fails. Its errors name the file:
// policy.Load's, or "FILE: ..." for the validator and the gate.
func Load(path string, newValidator func(*portcullis.Policy) (portcullis.Validator, error), opts ...Option) (*Gate, []policy.Warning, error) {
	load, name := func() (*portcullis.Policy, []policy.Warning, error) { return policy.Load(path) }, path
	if path == "" {
		load, name = policy.LoadDefault, policy.DefaultName
	}
	pol, warnings, err := load()
	if err != nil {
		return nil, nil, err
	}
	if newValidator != nil {
		v, err := newValidator(pol)
		if err != nil {
			return nil, warnings, fmt.Errorf("%s: %w", name, err)
		}
		if v != nil {
			opts = append(opts, WithValidator(v))
		}
	}
	g, err := New(pol, opts...)
	if err != nil {
		return nil, warnings, fmt.Errorf("%s: %w", name, err)
	}
	return g, warnings, nil
}
