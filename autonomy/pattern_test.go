package autonomy_test

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/portcullis/portcullis/autonomy"
)

// TestMatchPattern runs the "patterns" cases of testdata/cases.json.
func TestMatchPattern(t *testing.T) {
	cases := loadCases(t).Patterns
	if len(cases) < 30 {
		t.Fatalf("only %d pattern cases in testdata/cases.json", len(cases))
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			pattern, s := c.pattern(), c.text()
			if got := autonomy.MatchPattern(pattern, s); got != c.Want {
				t.Errorf("MatchPattern(%s) = %v; want %v", c.Name, got, c.Want)
			}
			if len(pattern) <= 600 && len(s) <= 600 {
				if ref := refMatch(pattern, s); ref != c.Want {
					t.Errorf("the reference matcher says %v for %s; the case says %v", ref, c.Name, c.Want)
				}
			}
		})
	}
}

// TestMatchPatternPathological matches patterns that make a backtracking
// matcher take exponential (or at least quadratic) time. They must finish;
// how fast is measured by BenchmarkMatchPatternPathological, never asserted.
func TestMatchPatternPathological(t *testing.T) {
	as := strings.Repeat("a", 10_000)
	tests := []struct {
		name, pattern, s string
		want             bool
	}{
		{"stars then a missing letter", strings.Repeat("*a", 249) + "*b", as, false},
		{"stars then a final letter present", strings.Repeat("*a", 249) + "*", as, true},
		{"long segment almost everywhere", "*" + strings.Repeat("a", 498) + "b", as, false},
		{"long middle segment almost everywhere", "*" + strings.Repeat("a", 497) + "b*", as, false},
		{"question marks and stars", strings.Repeat("?*", 250), as, true},
		{"more question marks than characters", strings.Repeat("?", 500), strings.Repeat("a", 499), false},
		{"regexp-hostile nesting", "*(a*)*b*", strings.Repeat("(a", 5_000), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := autonomy.MatchPattern(tt.pattern, tt.s); got != tt.want {
				t.Errorf("MatchPattern(%s) = %v; want %v", tt.name, got, tt.want)
			}
		})
	}
}

// TestMatchPatternInvalidUTF8: a byte that is not valid UTF-8 is one
// character that equals only itself (JSON cannot carry these cases).
func TestMatchPatternInvalidUTF8(t *testing.T) {
	tests := []struct {
		name, pattern, s string
		want             bool
	}{
		{"same byte", "\xff", "\xff", true},
		{"different bytes", "\xff", "\xfe", false},
		{"not the replacement character", "\xff", "\uFFFD", false},
		{"question mark takes an invalid byte", "?", "\xff", true},
		{"a truncated sequence is two characters", "??", "\xe2\x82", true},
		{"a whole sequence is one character", "?", "\xe2\x82\xac", true},
		{"invalid byte in the suffix", "*\xe2", "abc\xe2", true},
		{"truncated sequence before a valid one", "*\x82?", "\xe2\x82\xe2\x82\xac", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := autonomy.MatchPattern(tt.pattern, tt.s); got != tt.want {
				t.Errorf("MatchPattern(%s) = %v; want %v", tt.name, got, tt.want)
			}
			if ref := refMatch(tt.pattern, tt.s); ref != tt.want {
				t.Errorf("the reference matcher says %v for %s; the test says %v", ref, tt.name, tt.want)
			}
		})
	}
}

// refMatch is the obvious matcher: dynamic programming over the characters
// of the pattern and the text. It is quadratic, which is fine on the short
// inputs it checks.
func refMatch(pattern, s string) bool {
	if utf8.RuneCountInString(pattern) > 500 {
		return false
	}
	text := chars(s)
	// ok[j]: the pattern so far matches the first j characters of the text.
	ok := make([]bool, len(text)+1)
	ok[0] = true
	for _, pc := range chars(pattern) {
		nok := make([]bool, len(text)+1)
		for j := range nok {
			switch {
			case pc == "*":
				nok[j] = ok[j] || (j > 0 && nok[j-1])
			case j > 0:
				nok[j] = ok[j-1] && (pc == "?" || sameChar(pc, text[j-1]))
			}
		}
		ok = nok
	}
	return ok[len(text)]
}

// chars splits s into characters: UTF-8 encoded runes, and single bytes
// that are not valid UTF-8.
func chars(s string) []string {
	var cs []string
	for i := 0; i < len(s); {
		_, n := utf8.DecodeRuneInString(s[i:])
		cs = append(cs, s[i:i+n])
		i += n
	}
	return cs
}

func sameChar(a, b string) bool {
	invalid := func(c string) bool { return len(c) == 1 && c[0] >= utf8.RuneSelf }
	if invalid(a) || invalid(b) {
		return a == b
	}
	return strings.EqualFold(a, b)
}

// TestFoldsOutsideASCII checks the claim MatchPattern's fast path rests
// on: of the ASCII characters, only k, K, s and S have a simple case fold
// outside ASCII.
func TestFoldsOutsideASCII(t *testing.T) {
	for c := rune(0); c < utf8.RuneSelf; c++ {
		for r := unicode.SimpleFold(c); r != c; r = unicode.SimpleFold(r) {
			if r >= utf8.RuneSelf && !strings.ContainsRune("kKsS", c) {
				t.Errorf("%q folds to %U, outside ASCII; MatchPattern's search for a segment starting with it would miss it", c, r)
			}
		}
	}
}
