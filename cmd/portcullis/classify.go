package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/portcullis/portcullis/policy"
	"github.com/portcullis/portcullis/shell"
)

const classifyHelp = "classify [--policy FILE] [-- COMMAND WORDS...]"

// runClassify classifies shell commands without running them: the words
// after -- as one command, or else one {"command": "..."} JSON object per
// line of stdin (Classifier.ClassifyLines). It prints one Classification
// JSON line per command. A malformed line stops the run with exit status 2
// and a message naming the line; nothing is printed for it.
func runClassify(ctx context.Context, o *classifyOptions, args []string, dashAt int, stdin io.Reader, stdout, stderr io.Writer) error {
	// The words after -- are the command; nothing may stand before it.
	dashes := dashAt >= 0
	if dashAt > 0 || (!dashes && len(args) > 0) {
		return usageError("classify: unexpected argument %q (put the command after --: portcullis %s)", args[0], classifyHelp)
	}
	if dashes && len(args) == 0 {
		return usageError("classify: no command after --")
	}
	c, err := newShellClassifier(o.policy, stderr)
	if err != nil {
		return err
	}
	if !dashes {
		return c.ClassifyLines(ctx, stdin, stdout)
	}
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(c.Classify(strings.Join(args, " "))); err != nil {
		return fmt.Errorf("write classification: %w", err)
	}
	return nil
}

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
