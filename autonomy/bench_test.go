package autonomy_test

import (
	"strings"
	"testing"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/autonomy"
)

// benchEnvelope is a realistic agent envelope: the seed's example with a
// few more patterns.
var benchEnvelope = &portcullis.Autonomy{
	RiskTolerance:      portcullis.Moderate,
	MaxAutonomousSteps: 25,
	RequiresApproval:   []string{"*delete*", "*production*", "*drop *", "deploy*", "*credential*"},
	AutoApprove:        []string{"read*", "list*", "search*"},
}

// benchHint is a 60-character next-action hint.
const benchHint = "list open pull requests labelled needs-review in portcullis/"

func BenchmarkEvaluate(b *testing.B) {
	if len(benchHint) != 60 {
		b.Fatalf("benchHint is %d characters; want 60", len(benchHint))
	}
	risk := 20.0
	in := autonomy.Input{
		Agent:           "review-bot",
		Envelope:        benchEnvelope,
		Step:            3,
		PreviousOutcome: portcullis.StepSuccess,
		RiskScore:       &risk,
		NextActionHint:  benchHint,
	}
	if d := autonomy.Evaluate(in); !d.Continue {
		b.Fatalf("Evaluate(bench input) = %+v; want a continue", d)
	}
	b.ReportAllocs()
	for b.Loop() {
		autonomy.Evaluate(in)
	}
}

// BenchmarkEvaluateNoFactors is BenchmarkEvaluate as the gate runs it:
// without building the factors.
func BenchmarkEvaluateNoFactors(b *testing.B) {
	risk := 20.0
	in := autonomy.Input{
		Agent: "review-bot", Envelope: benchEnvelope, Step: 3, PreviousOutcome: portcullis.StepSuccess,
		RiskScore: &risk, NextActionHint: benchHint, NoFactors: true,
	}
	if d := autonomy.Evaluate(in); !d.Continue {
		b.Fatalf("Evaluate(bench input) = %+v; want a continue", d)
	}
	b.ReportAllocs()
	for b.Loop() {
		autonomy.Evaluate(in)
	}
}

// BenchmarkEvaluatePause is the worst ordinary path: every requiresApproval
// pattern is tried and the last one pauses.
func BenchmarkEvaluatePause(b *testing.B) {
	risk := 20.0
	in := autonomy.Input{
		Agent: "review-bot", Envelope: benchEnvelope, Step: 3, RiskScore: &risk,
		NextActionHint: "rotate the staging credential for the portcullis ci runner now",
	}
	if d := autonomy.Evaluate(in); d.Continue {
		b.Fatalf("Evaluate(bench input) = %+v; want a pause", d)
	}
	b.ReportAllocs()
	for b.Loop() {
		autonomy.Evaluate(in)
	}
}

// BenchmarkEvaluateDangerZone: a danger pattern found at the end of the hint.
func BenchmarkEvaluateDangerZone(b *testing.B) {
	in := autonomy.Input{
		Agent: "review-bot", Envelope: benchEnvelope, Step: 3,
		NextActionHint: "clean the workspace of the portcullis build: rm -r -f ./dist",
	}
	if d := autonomy.Evaluate(in); !d.Stopped {
		b.Fatalf("Evaluate(bench input) = %+v; want a stop", d)
	}
	b.ReportAllocs()
	for b.Loop() {
		autonomy.Evaluate(in)
	}
}

// BenchmarkEvaluateLongHint: a 10,000-character hint (past the evaluator's
// lower-cased fast path), no pattern matching, no danger pattern.
func BenchmarkEvaluateLongHint(b *testing.B) {
	risk := 20.0
	in := autonomy.Input{
		Agent: "review-bot", Envelope: benchEnvelope, Step: 3, RiskScore: &risk,
		NextActionHint: "summarise " + strings.Repeat("the quarterly report for the review board, ", 240)[:9990],
	}
	if d := autonomy.Evaluate(in); !d.Continue || len(in.NextActionHint) != 10_000 {
		b.Fatalf("Evaluate(bench input) = %+v (hint of %d bytes); want a continue on 10,000", d, len(in.NextActionHint))
	}
	b.ReportAllocs()
	for b.Loop() {
		autonomy.Evaluate(in)
	}
}

// BenchmarkMatchPatternPathological: patterns built to make backtracking
// matchers explode, against a 10,000-character text.
func BenchmarkMatchPatternPathological(b *testing.B) {
	as := strings.Repeat("a", 10_000)
	for _, bc := range []struct{ name, pattern string }{
		{"stars", strings.Repeat("*a", 249) + "*b"},
		{"longSuffix", "*" + strings.Repeat("a", 498) + "b"},
		{"longMiddleSegment", "*" + strings.Repeat("a", 497) + "b*"},
		{"questionMarks", "*" + strings.Repeat("?", 497) + "b*"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				autonomy.MatchPattern(bc.pattern, as)
			}
		})
	}
}
