// Package linediff is the line diff of small texts — the definitions of
// MCP tools, indented JSON — that the approval console and `portcullis
// tools accept` show a person before a changed tool is accepted. It keeps
// the longest common subsequence of the lines and reports the rest as
// removed or added, removed lines first. It imports no package of this
// module and does no I/O.
package linediff

import (
	"strconv"
	"strings"
)

// Op is what a diff line does: kept, removed or added, or (after
// Condense) a run of kept lines left out.
type Op byte

// The operations, each spelled as the sign a diff shows.
const (
	Keep   Op = ' '
	Remove Op = '-'
	Add    Op = '+'
	Skip   Op = '~'
)

// Line is one line of a diff.
type Line struct {
	Op   Op
	Text string
}

// Mark is the line's sign as a diff shows it: " ", "-", "+", or "⋯" for a
// run of left-out lines.
func (l Line) Mark() string {
	if l.Op == Skip {
		return "⋯"
	}
	return string(rune(l.Op))
}

// maxCells bounds the work of the longest-common-subsequence table;
// beyond it (after the common head and tail are taken off) the diff shows
// every old line removed and every new line added.
const maxCells = 1 << 20

// Diff returns a line diff of a and b: the longest common subsequence of
// their lines is kept, the rest removed or added. A final newline ends the
// last line rather than starting an empty one.
func Diff(a, b string) []Line {
	return diff(split(a), split(b))
}

func diff(a, b []string) []Line {
	var head, tail []Line
	for len(a) > 0 && len(b) > 0 && a[0] == b[0] {
		head = append(head, Line{Keep, a[0]})
		a, b = a[1:], b[1:]
	}
	for len(a) > 0 && len(b) > 0 && a[len(a)-1] == b[len(b)-1] {
		tail = append(tail, Line{Keep, a[len(a)-1]})
		a, b = a[:len(a)-1], b[:len(b)-1]
	}
	out := head
	if (len(a)+1)*(len(b)+1) > maxCells {
		for _, l := range a {
			out = append(out, Line{Remove, l})
		}
		for _, l := range b {
			out = append(out, Line{Add, l})
		}
	} else {
		out = append(out, lcs(a, b)...)
	}
	for i := len(tail) - 1; i >= 0; i-- {
		out = append(out, tail[i])
	}
	return out
}

func lcs(a, b []string) []Line {
	n, m := len(a), len(b)
	// l[i][j] is the length of the LCS of a[i:] and b[j:].
	l := make([]int32, (n+1)*(m+1))
	at := func(i, j int) int32 { return l[i*(m+1)+j] }
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			v := max(at(i+1, j), at(i, j+1))
			if a[i] == b[j] {
				v = at(i+1, j+1) + 1
			}
			l[i*(m+1)+j] = v
		}
	}
	out := make([]Line, 0, n+m)
	i, j := 0, 0
	for i < n && j < m {
		switch {
		case a[i] == b[j]:
			out = append(out, Line{Keep, a[i]})
			i, j = i+1, j+1
		case at(i+1, j) >= at(i, j+1):
			out = append(out, Line{Remove, a[i]})
			i++
		default:
			out = append(out, Line{Add, b[j]})
			j++
		}
	}
	for ; i < n; i++ {
		out = append(out, Line{Remove, a[i]})
	}
	for ; j < m; j++ {
		out = append(out, Line{Add, b[j]})
	}
	return out
}

func split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// Condense leaves out the runs of kept lines farther than context lines
// from any change, each replaced by one Skip line that says how many were
// left out ("17 unchanged lines"). A run of one line is kept as it is.
func Condense(d []Line, context int) []Line {
	keep := make([]bool, len(d))
	for i, l := range d {
		if l.Op == Keep {
			continue
		}
		for k := max(0, i-context); k <= min(len(d)-1, i+context); k++ {
			keep[k] = true
		}
	}
	var out []Line
	for i := 0; i < len(d); {
		if keep[i] {
			out = append(out, d[i])
			i++
			continue
		}
		j := i
		for j < len(d) && !keep[j] {
			j++
		}
		if j-i == 1 {
			out = append(out, d[i])
		} else {
			out = append(out, Line{Skip, strconv.Itoa(j-i) + " unchanged lines"})
		}
		i = j
	}
	return out
}
