// Package policytest runs policy unit-test files (`portcullis policy
// test`) through the real gate: each case on a gate with the stand-in
// validator verdict it names, on the file's clock, with the file's budgets
// counted across its cases in order. It never calls a model, opens a
// durable store or formats output: the command prints the results
// (policy.FormatResults).
package policytest

import (
	"context"
	"fmt"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/memstore"
	"github.com/portcullis/portcullis/policy"
)

// Run runs every case of tf, in order, on the gate of the stand-in
// verdict the case names (Gates). The error is that of a policy the gate
// cannot compile; no case has run then.
func Run(ctx context.Context, tf *policy.TestFile) ([]policy.CaseResult, error) {
	gates, err := Gates(tf)
	if err != nil {
		return nil, err
	}
	return policy.RunTestsWith(ctx, tf, func(c policy.TestCase) portcullis.Decider { return gates[c.Validator] }), nil
}

// Gates returns one gate per stand-in validator verdict a test case may
// name, keyed by it: "" (no validator: a call in its scope fails closed),
// policy.ValidatorAllow, policy.ValidatorDeny and
// policy.ValidatorUnavailable (no verdict). The gates honour the request
// overrides a case may set (activeElements, grants, run), run on the
// file's clock (each case's `at`) and count budgets in one in-memory store
// shared by the file's cases; they keep no other state.
func Gates(tf *policy.TestFile) (map[string]portcullis.Decider, error) {
	budgets := memstore.New(tf.Clock)
	gates := make(map[string]portcullis.Decider, len(verdicts)+1)
	for verdict, v := range standIns() {
		opts := []gate.Option{gate.WithRequestOverrides(), gate.WithClock(tf.Clock), gate.WithBudgetStore(budgets)}
		if v != nil {
			opts = append(opts, gate.WithValidator(v))
		}
		g, err := gate.New(tf.Policy, opts...)
		if err != nil {
			return nil, err
		}
		gates[verdict] = g
	}
	return gates, nil
}

// verdicts are the verdicts the stand-in validators of a test file give,
// by the name a case gives them (`validator:`).
var verdicts = map[string]portcullis.Verdict{
	policy.ValidatorAllow:       {Allow: true, Confidence: 1, Reasoning: "stand-in verdict of the test file: allow"},
	policy.ValidatorDeny:        {Confidence: 1, Reasoning: "stand-in verdict of the test file: deny", WhatWouldAuthorize: "what the validator would ask for"},
	policy.ValidatorUnavailable: {FailClosed: true, Reasoning: "stand-in verdict of the test file: the validator is unavailable"},
}

// standIns are the validators of Gates by verdict name; "" has none.
func standIns() map[string]portcullis.Validator {
	m := map[string]portcullis.Validator{"": nil}
	for name, v := range verdicts {
		m[name] = standIn{v}
	}
	return m
}

// standIn is the validator of a policy test case: a fixed verdict.
type standIn struct{ v portcullis.Verdict }

func (s standIn) Validate(context.Context, portcullis.ValidationRequest) (portcullis.Verdict, error) {
	return s.v, nil
}

// RunFiles loads and runs the test files at paths, in order. It returns
// the results of the files that ran, and an error for each file that did
// not: one that does not load (policy.LoadTests's error), or whose policy
// the gate cannot compile ("FILE: ...").
func RunFiles(ctx context.Context, paths []string) ([]policy.CaseResult, []error) {
	var results []policy.CaseResult
	var errs []error
	for _, path := range paths {
		tf, err := policy.LoadTests(path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rs, err := Run(ctx, tf)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", path, err))
			continue
		}
		results = append(results, rs...)
	}
	return results, errs
}
