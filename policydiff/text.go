package policydiff

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/portcullis/portcullis"
)

// WriteJSON writes the report as one indented JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the report for people: that the policies decide alike,
// or each semantic change, then the count of tools whose effective level
// changes and a table of them (of every tool, with all).
func (r *Report) WriteText(w io.Writer, all bool) error {
	if r.Equal {
		_, err := fmt.Fprintf(w, "%s and %s decide alike: no semantic changes\n", r.Old, r.New)
		return err
	}
	changes := fmt.Sprintf("%d changes", len(r.Changes))
	if len(r.Changes) == 1 {
		changes = "1 change"
	}
	fmt.Fprintf(w, "%s → %s: %s\n", r.Old, r.New, changes)
	for _, c := range r.Changes {
		fmt.Fprintln(w, "  "+c.String())
	}
	levelsChanged := r.LevelsChanged()
	fmt.Fprintf(w, "\nEffective levels (default active elements, no arguments): %d of %d tools change\n", levelsChanged, len(r.Levels))
	if levelsChanged == 0 && !all {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  TOOL\tOLD\tNEW\tCHANGE")
	for _, l := range r.Levels {
		if l.Change == "" && !all {
			continue
		}
		change := l.Change
		if change == "" {
			change = "-"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", l.Tool, levelCell(l.Old, l.OldMode, l.InOld), levelCell(l.New, l.NewMode, l.InNew), change)
	}
	return tw.Flush()
}

// levelCell shows a level with what qualifies it: a mode other than
// enforce, or no tools entry (unclassified, or classified elsewhere).
func levelCell(l portcullis.Level, m portcullis.Mode, classified bool) string {
	s := l.String()
	var notes []string
	if m != portcullis.ModeEnforce {
		notes = append(notes, string(m))
	}
	if !classified {
		notes = append(notes, "no tools entry")
	}
	if len(notes) > 0 {
		s += " (" + strings.Join(notes, ", ") + ")"
	}
	return s
}
