package console

// LineDiff exposes the tool definitions' line diff to the tests: each line
// with its sign ("+", "-", " ", or "⋯" for left-out lines).
func LineDiff(a, b string, condensed bool) []string {
	d := lineDiff(a, b)
	if condensed {
		d = condense(d)
	}
	out := make([]string, len(d))
	for i, l := range d {
		out[i] = l.Mark() + l.Text
	}
	return out
}
