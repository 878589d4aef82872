package linediff_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/portcullis/portcullis/internal/linediff"
)

// marked spells each line with its sign, as a diff shows it.
func marked(d []linediff.Line) []string {
	out := make([]string, len(d))
	for i, l := range d {
		out[i] = l.Mark() + l.Text
	}
	return out
}

func TestLineDiff(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b string
		want []string
	}{
		{"equal", "x\ny\n", "x\ny\n", []string{" x", " y"}},
		{"both empty", "", "", []string{}},
		{"from nothing", "", "a\nb", []string{"+a", "+b"}},
		{"to nothing", "a\nb", "", []string{"-a", "-b"}},
		{"changed line", "a\nb\nc", "a\nB\nc", []string{" a", "-b", "+B", " c"}},
		{"inserted", "a\nc", "a\nb\nc", []string{" a", "+b", " c"}},
		{"removed", "a\nb\nc", "a\nc", []string{" a", "-b", " c"}},
		{"moved", "a\nb\nc\nd", "b\nc\nd\na", []string{"-a", " b", " c", " d", "+a"}},
		{"interleaved", "1\n2\n3\n4\n5", "1\nx\n3\ny\n5", []string{" 1", "-2", "+x", " 3", "-4", "+y", " 5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := marked(linediff.Diff(tc.a, tc.b))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Diff(%q, %q) (-want +got):\n%s", tc.a, tc.b, diff)
			}
		})
	}
}

func TestLineDiffCondensed(t *testing.T) {
	var a, b []string
	for i := range 40 {
		a = append(a, "line "+strconv.Itoa(i))
	}
	b = append(b, a...)
	b[20] = "changed"
	got := marked(linediff.Condense(linediff.Diff(strings.Join(a, "\n"), strings.Join(b, "\n")), 3))
	want := []string{"⋯17 unchanged lines", " line 17", " line 18", " line 19", "-line 20", "+changed", " line 21", " line 22", " line 23", "⋯16 unchanged lines"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("condensed diff (-want +got):\n%s", diff)
	}
}

func TestLineDiffLarge(t *testing.T) {
	// Past the work bound the diff still says what was removed and added.
	var a, b []string
	for i := range 3000 {
		a = append(a, "a"+strconv.Itoa(i))
		b = append(b, "b"+strconv.Itoa(i))
	}
	got := marked(linediff.Diff("same\n"+strings.Join(a, "\n"), "same\n"+strings.Join(b, "\n")))
	if len(got) != 6001 || got[0] != " same" || got[1] != "-a0" || got[3001] != "+b0" {
		t.Fatalf("large diff: %d lines, starting %q", len(got), got[:3])
	}
}
