package console

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// diffOp is what a diff line does: kept, removed or added.
type diffOp byte

const (
	opKeep   diffOp = ' '
	opRemove diffOp = '-'
	opAdd    diffOp = '+'
	opSkip   diffOp = '~' // a run of kept lines left out
)

// diffLine is one line of a line diff.
type diffLine struct {
	Op   diffOp
	Text string
}

// Class names the line's style.
func (d diffLine) Class() string {
	switch d.Op {
	case opRemove:
		return "del"
	case opAdd:
		return "add"
	case opSkip:
		return "skip"
	}
	return "keep"
}

// Mark is the line's sign as a diff shows it.
func (d diffLine) Mark() string {
	if d.Op == opSkip {
		return "⋯"
	}
	return string(rune(d.Op))
}

// maxDiffCells bounds the work of the longest-common-subsequence table;
// beyond it (after the common head and tail are taken off) the diff shows
// every old line removed and every new line added.
const maxDiffCells = 1 << 20

// lineDiff returns a line diff of a and b: the longest common subsequence
// of their lines is kept, the rest removed or added.
func lineDiff(a, b string) []diffLine {
	al, bl := splitLines(a), splitLines(b)
	var head, tail []diffLine
	for len(al) > 0 && len(bl) > 0 && al[0] == bl[0] {
		head = append(head, diffLine{opKeep, al[0]})
		al, bl = al[1:], bl[1:]
	}
	for len(al) > 0 && len(bl) > 0 && al[len(al)-1] == bl[len(bl)-1] {
		tail = append(tail, diffLine{opKeep, al[len(al)-1]})
		al, bl = al[:len(al)-1], bl[:len(bl)-1]
	}
	out := head
	if (len(al)+1)*(len(bl)+1) > maxDiffCells {
		for _, l := range al {
			out = append(out, diffLine{opRemove, l})
		}
		for _, l := range bl {
			out = append(out, diffLine{opAdd, l})
		}
	} else {
		out = append(out, lcsDiff(al, bl)...)
	}
	for i := len(tail) - 1; i >= 0; i-- {
		out = append(out, tail[i])
	}
	return out
}

func lcsDiff(a, b []string) []diffLine {
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
	out := make([]diffLine, 0, n+m)
	i, j := 0, 0
	for i < n && j < m {
		switch {
		case a[i] == b[j]:
			out = append(out, diffLine{opKeep, a[i]})
			i, j = i+1, j+1
		case at(i+1, j) >= at(i, j+1):
			out = append(out, diffLine{opRemove, a[i]})
			i++
		default:
			out = append(out, diffLine{opAdd, b[j]})
			j++
		}
	}
	for ; i < n; i++ {
		out = append(out, diffLine{opRemove, a[i]})
	}
	for ; j < m; j++ {
		out = append(out, diffLine{opAdd, b[j]})
	}
	return out
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// diffContext is how many kept lines are shown around a change.
const diffContext = 3

// condense leaves out runs of kept lines farther than diffContext from any
// change, each replaced by one skip line that says how many were left out.
func condense(d []diffLine) []diffLine {
	keep := make([]bool, len(d))
	for i, l := range d {
		if l.Op == opKeep {
			continue
		}
		for k := max(0, i-diffContext); k <= min(len(d)-1, i+diffContext); k++ {
			keep[k] = true
		}
	}
	var out []diffLine
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
			out = append(out, diffLine{opSkip, strconv.Itoa(j-i) + " unchanged lines"})
		}
		i = j
	}
	return out
}

// prettyJSON indents JSON for reading and diffing; text that is not JSON
// is returned as it is.
func prettyJSON(raw []byte) string {
	if len(raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}
