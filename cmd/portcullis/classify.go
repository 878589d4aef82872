package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/portcullis/portcullis/policy"
	"github.com/portcullis/portcullis/shell"
)

// newShellClassifier builds the classifier: the built-in knowledge, the
// policy's shell rules when there is a policy, and Portcullis's own files
// (the policy and the documents it names, the state directory, this
// binary) protected.
func newShellClassifier(policyFlag string, stderr io.Writer) (*shell.Classifier, error) {
	opts := shell.Options{}
	if home, err := os.UserHomeDir(); err == nil {
		opts.Home = home
	}
	if dir, err := (&stateFlags{}).dir(false); err == nil {
		opts.ProtectedPaths = append(opts.ProtectedPaths, dir)
	}
	if exe, err := os.Executable(); err == nil {
		opts.ProtectedPaths = append(opts.ProtectedPaths, exe)
	}
	path := policyFlag
	if path == "" {
		path = strings.TrimSpace(os.Getenv("PORTCULLIS_POLICY"))
	}
	if path != "" {
		pol, warnings, err := policy.Load(path)
		if err != nil {
			return nil, &exitError{code: 2, msg: err.Error()}
		}
		policy.WriteWarnings(stderr, warnings)
		opts = opts.WithPolicy(pol)
	}
	c, err := shell.New(opts)
	if err != nil {
		return nil, &exitError{code: 2, msg: fmt.Sprintf("%s: %v", path, err)}
	}
	return c, nil
}
