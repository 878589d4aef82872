package gate_test

import (
	"strings"
	"testing"

	"github.com/portcullis/portcullis/gate"
)

func TestGlob(t *testing.T) {
	for _, tc := range []struct {
		pattern, name string
		want          bool
	}{
		{"delete_element", "delete_element", true},
		{"delete_element", "delete_elements", false},
		{"delete_*", "delete_element", true},
		{"delete_*", "delete_", true},
		{"delete_*", "undelete_x", false},
		{"*_file", "write_file", true},
		{"*_file", "write_files", false},
		{"*", "", true},
		{"*", "anything", true},
		{"*delete*", "bulk_delete_all", true},
		{"*delete*", "bulk_remove_all", false},
		{"a*b*c", "abc", true},
		{"a*b*c", "aXbYc", true},
		{"a*b*c", "aXbYcZ", false},
		{"a*b*c", "acb", false},
		{"get_?", "get_x", true},
		{"get_?", "get_xy", false},
		{"get_?", "get_", false},
		{"get_?", "get_é", true},
		{"??", "é", false},
		{"*?", "", false},
		{"*?", "x", true},
		{"a**b", "ab", true},
		{"a*a*a*a*a*b", strings.Repeat("a", 400), false},
	} {
		if got := gate.WildcardMatch(tc.pattern, tc.name); got != tc.want {
			t.Errorf("match(%q, %q) = %v; want %v", tc.pattern, tc.name, got, tc.want)
		}
	}
}
