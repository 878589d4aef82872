// Package autonomy decides whether an autonomous agent may take its next
// step: the autonomy evaluator (DollhouseMCP's
// autonomyEvaluator), its safety tiers and danger-zone patterns, and the risk
// score the gate derives from a call's classification.
//
// Evaluate runs the checks in the seed's order — step budget, previous
// outcome, approval patterns, safety tier, risk tolerance — and the first
// that fails decides: pause for a person, or, in the danger zone, stop hard.
// It never lets an agent continue when it cannot tell: a panic inside the
// evaluation is a pause for human review.
//
// The package is pure. It imports only the standard library and the root
// package, and it must not do I/O, read the clock, start goroutines, log,
// or keep state between calls: the gate persists danger-zone blocks, issues
// challenges and keeps run state; this package only says which to do.
package autonomy
