package main

import (
	"context"
	"fmt"
	"io"

	"github.com/portcullis/portcullis"

	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/memstore"
	"github.com/portcullis/portcullis/policy"
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
	for _, w := range warnings {
		fmt.Fprintln(stdout, "warning: "+w.String())
	}
	fmt.Fprintf(stdout, "%s: %s, %s, %s\n", pos[0], plural(len(pol.Tools), "tool"), plural(len(pol.Elements), "element"), plural(len(warnings), "warning"))
	if o.strict && len(warnings) > 0 {
		return &exitError{code: 1}
	}
	return nil
}

// runPolicyTest runs policy unit-test files through the real gate. Exit 0
// when every case passes, 1 when one fails, 2 when a file does not load.
func runPolicyTest(ctx context.Context, o *policyTestOptions, pos []string, stdout, stderr io.Writer) error {
	if len(pos) == 0 {
		return usageError("policy test takes one or more test files")
	}
	var results []policy.CaseResult
	loadFailed, loaded := false, 0
	for _, path := range pos {
		tf, err := policy.LoadTests(path)
		if err != nil {
			fmt.Fprintln(stderr, "portcullis: "+err.Error())
			loadFailed = true
			continue
		}
		gates, err := caseGates(tf)
		if err != nil {
			fmt.Fprintf(stderr, "portcullis: %s: %v\n", path, err)
			loadFailed = true
			continue
		}
		loaded++
		results = append(results, policy.RunTestsWith(ctx, tf, func(c policy.TestCase) portcullis.Decider { return gates[c.Validator] })...)
	}
	if loaded == 0 {
		// Nothing ran: the errors alone, no "0 passed, 0 failed".
		return &exitError{code: 2}
	}
	failed := policy.FormatResults(stdout, results, o.verbose)
	switch {
	case loadFailed:
		return &exitError{code: 2}
	case failed > 0:
		return &exitError{code: 1}
	}
	return nil
}

// caseGates builds one gate per stand-in validator verdict a test case may
// name: "" (no validator: calls in its scope fail closed), allow, deny and
// unavailable. Policy tests never call a real model. The gates run on the
// file's clock (each case's `at`) and count budgets in one store shared by
// the file's cases, in order; they keep no other state.
func caseGates(tf *policy.TestFile) (map[string]portcullis.Decider, error) {
	pol := tf.Policy
	budgets := memstore.New(tf.Clock)
	gates := map[string]portcullis.Decider{}
	for verdict, v := range map[string]portcullis.Validator{
		"":                          nil,
		policy.ValidatorAllow:       standIn{portcullis.Verdict{Allow: true, Confidence: 1, Reasoning: "stand-in verdict of the test file: allow"}},
		policy.ValidatorDeny:        standIn{portcullis.Verdict{Confidence: 1, Reasoning: "stand-in verdict of the test file: deny", WhatWouldAuthorize: "what the validator would ask for"}},
		policy.ValidatorUnavailable: standIn{portcullis.Verdict{FailClosed: true, Reasoning: "stand-in verdict of the test file: the validator is unavailable"}},
	} {
		opts := []gate.Option{gate.WithRequestOverrides(), gate.WithClock(tf.Clock), gate.WithBudgetStore(budgets)}
		if v != nil {
			opts = append(opts, gate.WithValidator(v))
		}
		g, err := gate.New(pol, opts...)
		if err != nil {
			return nil, err
		}
		gates[verdict] = g
	}
	return gates, nil
}

// standIn is the validator of a policy test case: a fixed verdict.
type standIn struct{ v portcullis.Verdict }

func (s standIn) Validate(context.Context, portcullis.ValidationRequest) (portcullis.Verdict, error) {
	return s.v, nil
}
