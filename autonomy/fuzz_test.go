package autonomy_test

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/autonomy"
)

// FuzzEvaluate checks the evaluator's invariants on any input: it never
// panics (not even inside, where a panic would become a pause), a stop
// never continues, a blocked command never continues, the risk score is in
// 0..100, and the directive marshals to JSON. Seeds are in
// testdata/fuzz/FuzzEvaluate.
//
// The patterns are given one per line.
func FuzzEvaluate(f *testing.F) {
	f.Add("deploy-bot", "conservative", 10, "*delete*\n*production*", "read*\nlist*", 3, "success", true, 40.0, "delete user data", false)
	f.Add("", "", 0, "", "", 0, "", false, 0.0, "", false)
	f.Add("a", "aggressive", 1, "", "*", 0, "partial", true, math.NaN(), "rm -r -f /", false)
	f.Add("a", "moderate", 5, "?", "", 4, "failure", true, math.Inf(1), "x", true)
	f.Add("a", "reckless", -1, "", "", -7, "error", true, -5.0, "DROP TABLE t", true)
	f.Fuzz(func(t *testing.T, agent, tolerance string, max int, requires, approve string, step int, outcome string, scored bool, risk float64, hint string, blocked bool) {
		in := autonomy.Input{
			Agent: agent,
			Envelope: &portcullis.Autonomy{
				RiskTolerance:      portcullis.RiskTolerance(tolerance),
				MaxAutonomousSteps: max,
				RequiresApproval:   lines(requires),
				AutoApprove:        lines(approve),
			},
			Step:            step,
			PreviousOutcome: portcullis.StepOutcome(outcome),
			NextActionHint:  hint,
			Blocked:         blocked,
		}
		if scored {
			in.RiskScore = &risk
		}
		d := autonomy.Evaluate(in)
		checkDirective(t, "fuzz input", in, d)
		if _, err := json.Marshal(d); err != nil {
			t.Errorf("json.Marshal(Evaluate(fuzz input)): %v", err)
		}
		if d.Continue && autonomy.DangerPattern(hint) != "" {
			t.Errorf("Evaluate(fuzz input) = %+v; want no continue for a hint with a danger pattern", d)
		}
		if scored && !math.IsNaN(risk) && d.RiskScore != autonomy.SanitizeRiskScore(risk) {
			t.Errorf("Evaluate(fuzz input).RiskScore = %v; want %v", d.RiskScore, autonomy.SanitizeRiskScore(risk))
		}
		// The evaluator without the envelope uses the defaults.
		in.Envelope = nil
		checkDirective(t, "fuzz input, no envelope", in, autonomy.Evaluate(in))
	})
}

func lines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// FuzzMatchPattern checks that MatchPattern never panics and, on inputs
// short enough for the quadratic reference matcher, agrees with it; that
// the evaluator's faster matcher for ASCII hints agrees with MatchPattern;
// and that both searches for a segment between stars find the same place.
// Seeds are in testdata/fuzz/FuzzMatchPattern.
func FuzzMatchPattern(f *testing.F) {
	for _, c := range []struct{ pattern, s string }{
		{"*delete*", "Delete user data"},
		{"read*", "bread"},
		{"ab*ba", "aba"},
		{"*a*ab", "aab"},
		{"?\u212a*", "xk"},
		{"*\xe2\x82*", "\xe2\x82\xac"},
	} {
		f.Add(c.pattern, c.s)
	}
	f.Fuzz(func(t *testing.T, pattern, s string) {
		got := autonomy.MatchPattern(pattern, s)
		if low, ok := autonomy.LowerHint(s); ok != (len(s) <= 256 && isASCII(s)) || (ok && low != strings.ToLower(s)) {
			t.Errorf("LowerHint(%q) = %q, %v; want %q, %v", s, low, ok, strings.ToLower(s), len(s) <= 256 && isASCII(s))
		}
		if hint := autonomy.MatchHint(pattern, s); hint != got {
			t.Errorf("MatchHint(%q, %q) = %v; want %v (MatchPattern)", pattern, s, hint, got)
		}
		if seg := strings.ReplaceAll(pattern, "*", ""); seg != "" && utf8.RuneCountInString(seg) <= 500 {
			end, ok := autonomy.FindDirect(seg, s)
			end2, ok2 := autonomy.FindShiftAnd(seg, s)
			if end != end2 || ok != ok2 {
				t.Errorf("FindShiftAnd(%q, %q) = %d, %v; want %d, %v (FindDirect)", seg, s, end2, ok2, end, ok)
			}
		}
		if len(pattern) > 64 || len(s) > 256 {
			return
		}
		if want := refMatch(pattern, s); got != want {
			t.Errorf("MatchPattern(%q, %q) = %v; want %v (the reference matcher)", pattern, s, got, want)
		}
	})
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
