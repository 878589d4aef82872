package main

import (
	"context"
	"fmt"
	"io"

	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/policy"
)

func runPolicy(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError("policy needs a subcommand: lint or test")
	}
	switch args[0] {
	case "lint":
		return runPolicyLint(args[1:], stdout, stderr)
	case "test":
		return runPolicyTest(ctx, args[1:], stdout, stderr)
	}
	return usageError("unknown policy subcommand %q (want lint or test)", args[0])
}

// runPolicyLint loads a policy and prints its warnings. Exit 0 when it
// loads (1 with --strict and warnings), 2 when it does not.
func runPolicyLint(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("policy lint", stderr, "policy lint [--strict] FILE")
	strict := fs.Bool("strict", false, "exit 1 when there are warnings")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
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
	for _, w := range warnings {
		fmt.Fprintln(stdout, "warning: "+w.String())
	}
	fmt.Fprintf(stdout, "%s: %d tools, %d elements, %d warnings\n", pos[0], len(pol.Tools), len(pol.Elements), len(warnings))
	if *strict && len(warnings) > 0 {
		return &exitError{code: 1}
	}
	return nil
}

// runPolicyTest runs policy unit-test files through the real gate. Exit 0
// when every case passes, 1 when one fails, 2 when a file does not load.
func runPolicyTest(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("policy test", stderr, "policy test [-v] FILE...")
	verbose := fs.Bool("v", false, "list passing cases too")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usageError("policy test takes one or more test files")
	}
	var results []policy.CaseResult
	loadFailed := false
	for _, path := range pos {
		tf, err := policy.LoadTests(path)
		if err != nil {
			fmt.Fprintln(stderr, "portcullis: "+err.Error())
			loadFailed = true
			continue
		}
		g, err := gate.New(tf.Policy)
		if err != nil {
			fmt.Fprintf(stderr, "portcullis: %s: %v\n", path, err)
			loadFailed = true
			continue
		}
		results = append(results, policy.RunTests(ctx, g, tf)...)
	}
	failed := policy.FormatResults(stdout, results, *verbose)
	switch {
	case loadFailed:
		return &exitError{code: 2}
	case failed > 0:
		return &exitError{code: 1}
	}
	return nil
}
