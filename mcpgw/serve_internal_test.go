package mcpgw

import (
	"strings"
	"testing"
)

// twoFields reads an Authorization header as strings.Fields does.
func TestTwoFieldsIsFields(t *testing.T) {
	for _, s := range []string{
		"", " ", "Bearer", "Bearer tok", "  Bearer \t tok  ", "Bearer tok extra", "Bearer\u00a0tok",
		"Bearer\u2003tok\u2003", "bearer  tok\n", "\u3000Bearer tok", "Bearer tok\u0085x",
	} {
		a, b, ok := twoFields(s)
		f := strings.Fields(s)
		if want := len(f) == 2; ok != want || ok && (a != f[0] || b != f[1]) {
			t.Errorf("twoFields(%q) = %q, %q, %v; want %q", s, a, b, ok, f)
		}
	}
}
