package autonomy_test

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/autonomy"
)

// TestEvaluate runs the "evaluate" cases of testdata/cases.json: the order
// of the checks, every threshold edge, sanitizing, the tolerances, the
// previous outcomes, the patterns and the danger zone.
func TestEvaluate(t *testing.T) {
	cases := loadCases(t).Evaluate
	if len(cases) < 80 {
		t.Fatalf("only %d evaluate cases in testdata/cases.json", len(cases))
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			d := autonomy.Evaluate(c.Input.input())
			got := evalWant{
				Continue:       d.Continue,
				Stopped:        d.Stopped,
				Tier:           d.Tier,
				Challenge:      d.Challenge,
				StepsRemaining: d.StepsRemaining,
				RiskScore:      d.RiskScore,
			}
			want := c.Want
			want.Reason = nil
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Evaluate(%s) = %+v; want %+v (-want +got):\n%s", c.Name, got, want, diff)
			}
			for _, w := range c.Want.Reason {
				if !strings.Contains(d.Reason, w) {
					t.Errorf("Evaluate(%s).Reason = %q; want it to contain %q", c.Name, d.Reason, w)
				}
			}
			checkDirective(t, c.Name, c.Input.input(), d)
		})
	}
}

// checkDirective checks what every directive must satisfy.
func checkDirective(t *testing.T, name string, in autonomy.Input, d autonomy.Directive) {
	t.Helper()
	if d.Stopped && d.Continue {
		t.Errorf("Evaluate(%s) = %+v; a stop must not continue", name, d)
	}
	if d.Stopped && d.Tier != autonomy.TierDangerZone {
		t.Errorf("Evaluate(%s).Tier = %q with Stopped; want %q", name, d.Tier, autonomy.TierDangerZone)
	}
	if d.Challenge && d.Continue {
		t.Errorf("Evaluate(%s) = %+v; a challenge must not continue", name, d)
	}
	if in.Blocked && d.Continue {
		t.Errorf("Evaluate(%s) = %+v; a blocked command must never continue", name, d)
	}
	if d.Continue != (d.Reason == "") {
		t.Errorf("Evaluate(%s).Reason = %q with Continue %v; want a reason exactly when it does not continue", name, d.Reason, d.Continue)
	}
	if len(d.Factors) == 0 {
		t.Errorf("Evaluate(%s).Factors = %#v; want at least one factor", name, d.Factors)
	}
	for _, f := range d.Factors {
		if f == "" || strings.ContainsAny(f, "\x00\x01") {
			t.Errorf("Evaluate(%s).Factors holds %q", name, f)
		}
	}
	if d.RiskScore < 0 || d.RiskScore > 100 || math.IsNaN(d.RiskScore) {
		t.Errorf("Evaluate(%s).RiskScore = %v; want 0 to 100", name, d.RiskScore)
	}
	if d.StepsRemaining < -1 {
		t.Errorf("Evaluate(%s).StepsRemaining = %d; want -1 or more", name, d.StepsRemaining)
	}
	if d.Reason == "Safety evaluation failed — pausing for human review" {
		t.Errorf("Evaluate(%s) panicked inside: %q", name, d.Factors)
	}
}

// TestEvaluatePanicPauses makes each check panic in turn: the answer is a
// pause for human review, never a continue and never a stop.
func TestEvaluatePanicPauses(t *testing.T) {
	risk := 10.0
	in := autonomy.Input{
		Agent:          "deploy-bot",
		Envelope:       &portcullis.Autonomy{RiskTolerance: portcullis.Aggressive, MaxAutonomousSteps: 10},
		Step:           2,
		RiskScore:      &risk,
		NextActionHint: "list files",
	}
	if d := autonomy.Evaluate(in); !d.Continue {
		t.Fatalf("Evaluate(no panic) = %+v; want a continue, so that a pause below is the panic's doing", d)
	}
	for _, check := range []string{"sanitize", "steps", "outcome", "patterns", "tier", "threshold"} {
		for _, value := range []any{"boom", fmt.Errorf("wrapped: %w", fmt.Errorf("inner")), nil} {
			name := fmt.Sprintf("panic(%v) in %s", value, check)
			t.Run(name, func(t *testing.T) {
				d := autonomy.EvaluateWithHook(in, func(c string) {
					if c == check {
						panic(value)
					}
				})
				want := autonomy.Directive{
					Reason:    "Safety evaluation failed — pausing for human review",
					RiskScore: 10,
				}
				factors := d.Factors
				d.Factors = nil
				if diff := cmp.Diff(want, d); diff != "" {
					t.Errorf("Evaluate(%s) = %+v; want %+v (-want +got):\n%s", name, d, want, diff)
				}
				if len(factors) != 1 || !strings.HasPrefix(factors[0], "Safety evaluation failed: ") {
					t.Errorf("Evaluate(%s).Factors = %q; want one naming the failure", name, factors)
				}
			})
		}
	}
}

// TestEvaluateDoesNotModifyInput: the reference wrote the sanitized score
// back into its caller's context; this evaluator must not.
func TestEvaluateDoesNotModifyInput(t *testing.T) {
	risk := math.Inf(1)
	env := &portcullis.Autonomy{MaxAutonomousSteps: 3, RequiresApproval: []string{"*x*"}}
	autonomy.Evaluate(autonomy.Input{Envelope: env, RiskScore: &risk, NextActionHint: "y"})
	if !math.IsInf(risk, 1) {
		t.Errorf("Evaluate changed the input's risk score to %v", risk)
	}
	if env.RiskTolerance != "" || env.MaxAutonomousSteps != 3 {
		t.Errorf("Evaluate changed the input's envelope to %+v", env)
	}
}

// TestDirectiveJSON checks the wire shape: factors is [] never null, tier
// and challenge are left out when empty, and the keys are the reference's.
func TestDirectiveJSON(t *testing.T) {
	tests := []struct {
		name string
		d    autonomy.Directive
		want string
	}{
		{"zero", autonomy.Directive{},
			`{"continue":false,"stopped":false,"reason":"","factors":[],"stepsRemaining":0,"riskScore":0}`},
		{"evaluated", autonomy.Evaluate(autonomy.Input{Step: 9}),
			`{"continue":true,"stopped":false,"reason":"","factors":["Step 10 of 10 autonomous steps","No approval pattern matches the next action","All autonomy checks passed"],"stepsRemaining":0,"riskScore":0}`},
		{"verify", autonomy.Directive{Tier: autonomy.TierVerify, Challenge: true, Factors: []string{"x"}, StepsRemaining: -1, RiskScore: 70.5},
			`{"continue":false,"stopped":false,"reason":"","factors":["x"],"stepsRemaining":-1,"tier":"verify","challenge":true,"riskScore":70.5}`},
	}
	for _, tt := range tests {
		d := tt.d
		if tt.name == "zero" {
			d.Factors = []string{}
		}
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatalf("json.Marshal(%s): %v", tt.name, err)
		}
		if got := string(b); got != tt.want {
			t.Errorf("json.Marshal(%s) = %s; want %s", tt.name, got, tt.want)
		}
	}
}

func TestDefaults(t *testing.T) {
	want := portcullis.Autonomy{RiskTolerance: portcullis.Moderate, MaxAutonomousSteps: 10}
	if diff := cmp.Diff(want, autonomy.Defaults()); diff != "" {
		t.Errorf("Defaults() = %+v; want %+v (-want +got):\n%s", autonomy.Defaults(), want, diff)
	}
}
