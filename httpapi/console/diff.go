package console

import (
	"bytes"
	"encoding/json"

	"github.com/portcullis/portcullis/internal/linediff"
)

// diffLine is one line of a tool definition's diff, as the tools page
// shows it.
type diffLine struct{ linediff.Line }

// Class names the line's style.
func (d diffLine) Class() string {
	switch d.Op {
	case linediff.Remove:
		return "del"
	case linediff.Add:
		return "add"
	case linediff.Skip:
		return "skip"
	}
	return "keep"
}

// diffContext is how many kept lines are shown around a change.
const diffContext = 3

// definitionDiff is the condensed line diff of two texts.
func definitionDiff(a, b string) []diffLine {
	d := linediff.Condense(linediff.Diff(a, b), diffContext)
	out := make([]diffLine, len(d))
	for i, l := range d {
		out[i] = diffLine{l}
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
