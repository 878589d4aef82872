package autonomy_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/portcullis/portcullis/autonomy"
)

// TestTierFor runs the "tiers" cases of testdata/cases.json: the score
// edges and every danger pattern.
func TestTierFor(t *testing.T) {
	cases := loadCases(t).Tiers
	if len(cases) < 40 {
		t.Fatalf("only %d tier cases in testdata/cases.json", len(cases))
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			if got := autonomy.TierFor(float64(c.Score), c.Action, c.Blocked); got != c.Want {
				t.Errorf("TierFor(%s) = %v; want %v", c.Name, got, c.Want)
			}
			if got := autonomy.DangerPattern(c.Action); got != c.Danger {
				t.Errorf("DangerPattern(%s) = %q; want %q", c.Name, got, c.Danger)
			}
		})
	}
}

// TestDangerPatternWordLimit: the flags of rm are looked for within 16
// words of it, so a list of files cannot push them out of sight cheaply,
// and a long text of rm's stays linear.
func TestDangerPatternWordLimit(t *testing.T) {
	tests := []struct {
		name, s, want string
	}{
		{"15 files then -rf", "rm" + strings.Repeat(" f", 15) + " -rf", "rm -rf"},
		{"16 files then -rf", "rm" + strings.Repeat(" f", 16) + " -rf", ""},
		{"many rm, no flags", strings.Repeat("rm ", 100_000), ""},
		{"many rm, flags at the end", strings.Repeat("rm ", 100_000) + "-r -f", "rm -rf"},
		{"many DELETE FROM, no WHERE 1=1", strings.Repeat("delete from t where 1=2; ", 10_000), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := autonomy.DangerPattern(tt.s); got != tt.want {
				t.Errorf("DangerPattern(%s) = %q; want %q", tt.name, got, tt.want)
			}
		})
	}
}

func TestScore(t *testing.T) {
	cases := loadCases(t).Scores
	if len(cases) < 12 {
		t.Fatalf("only %d score cases in testdata/cases.json", len(cases))
	}
	for _, c := range cases {
		name := fmt.Sprintf("%q,elevatable=%v", c.Endpoint, c.Elevatable)
		if got := autonomy.Score(c.Endpoint, c.Elevatable); got != c.Want {
			t.Errorf("Score(%s) = %v; want %v", name, got, c.Want)
		}
	}
}

func TestSanitizeRiskScore(t *testing.T) {
	cases := loadCases(t).Sanitize
	if len(cases) < 8 {
		t.Fatalf("only %d sanitize cases in testdata/cases.json", len(cases))
	}
	for _, c := range cases {
		got := autonomy.SanitizeRiskScore(float64(c.Value))
		if got != c.Want || (got == 0 && fmt.Sprint(got) != "0") {
			t.Errorf("SanitizeRiskScore(%v) = %v; want %v", c.Value, got, c.Want)
		}
	}
}

func TestThreshold(t *testing.T) {
	cases := loadCases(t).Thresholds
	if len(cases) < 5 {
		t.Fatalf("only %d threshold cases in testdata/cases.json", len(cases))
	}
	for _, c := range cases {
		if got := autonomy.Threshold(c.Tolerance); got != c.Want {
			t.Errorf("Threshold(%q) = %v; want %v", c.Tolerance, got, c.Want)
		}
	}
}
