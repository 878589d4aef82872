package main

import (
	"context"
	"fmt"
	"io"

	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/policy"
	"github.com/portcullis/portcullis/policytest"
)

// runPolicyShowDefault prints the built-in default policy, commented, as
// the starting point for a policy file.
func runPolicyShowDefault(pos []string, stdout io.Writer) error {
	if len(pos) > 0 {
		return usageError("policy show-default takes no arguments; unexpected %q", pos[0])
	}
	_, err := stdout.Write(policy.DefaultYAML())
	return err
}

// runPolicyLint loads a policy and prints its warnings. Exit 0 when it
// loads (1 with --strict and warnings), 2 when it does not.
func runPolicyLint(o *policyLintOptions, pos []string, stdout io.Writer) error {
	if len(pos) != 1 {
		return usageError("policy lint takes one policy file")
	}
	pol, warnings, err := policy.Load(pos[0])
	if err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	if _, err := gate.New(pol); err != nil {
		return &exitError{code: 2, msg: fmt.Sprintf("%s: %v", pos[0], err)}
	}
	if err := policy.WriteLint(stdout, pos[0], pol, warnings); err != nil {
		return err
	}
	if o.strict && len(warnings) > 0 {
		return &exitError{code: 1}
	}
	return nil
}

// runPolicyTest runs policy unit-test files through the real gate
// (package policytest) and prints the results. Exit 0 when every case
// passes, 1 when one fails, 2 when a file does not load.
func runPolicyTest(ctx context.Context, o *policyTestOptions, pos []string, stdout, stderr io.Writer) error {
	if len(pos) == 0 {
		return usageError("policy test takes one or more test files")
	}
	results, errs := policytest.RunFiles(ctx, pos)
	for _, err := range errs {
		fmt.Fprintln(stderr, "portcullis: "+err.Error())
	}
	if len(errs) == len(pos) {
		// Nothing ran: the errors alone, no "0 passed, 0 failed".
		return &exitError{code: 2}
	}
	failed := policy.FormatResults(stdout, results, o.verbose)
	switch {
	case len(errs) > 0:
		return &exitError{code: 2}
	case failed > 0:
		return &exitError{code: 1}
	}
	return nil
}
