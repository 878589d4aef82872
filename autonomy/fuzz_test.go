package autonomy_test

import (
	"testing"

	"github.com/portcullis/portcullis/autonomy"
)

// FuzzMatchPattern checks that MatchPattern never panics and, on inputs
// short enough for the quadratic reference matcher, agrees with it.
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
		if len(pattern) > 64 || len(s) > 256 {
			return
		}
		if want := refMatch(pattern, s); got != want {
			t.Errorf("MatchPattern(%q, %q) = %v; want %v (the reference matcher)", pattern, s, got, want)
		}
	})
}
