package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/policy"
	"github.com/portcullis/portcullis/policydiff"
)

// runPolicyDiff prints the semantic difference between two policy files.
// Exit 0 when they decide alike, 1 when they differ (like diff), 2 when one
// does not load.
func runPolicyDiff(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("policy diff", stderr, "policy diff [--json] [--all] OLD NEW")
	asJSON := fs.Bool("json", false, "print the difference as one JSON object")
	all := fs.Bool("all", false, "list every tool's effective level, not only those that change")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usageError("policy diff takes two policy files: OLD NEW")
	}
	var pols [2]*portcullis.Policy
	for i, path := range pos {
		p, _, err := policy.Load(path)
		if err != nil {
			return &exitError{code: 2, msg: err.Error()}
		}
		pols[i] = p
	}
	out, err := policydiff.Compare(pols[0], pols[1])
	if err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}

	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return err
		}
	} else if err := printPolicyDiff(stdout, out, *all); err != nil {
		return err
	}
	if !out.Equal {
		return &exitError{code: 1}
	}
	return nil
}

func printPolicyDiff(w io.Writer, d *policydiff.Report, all bool) error {
	if d.Equal {
		_, err := fmt.Fprintf(w, "%s and %s decide alike: no semantic changes\n", d.Old, d.New)
		return err
	}
	fmt.Fprintf(w, "%s → %s: %s\n", d.Old, d.New, plural(len(d.Changes), "change"))
	for _, c := range d.Changes {
		fmt.Fprintln(w, "  "+c.String())
	}
	levelsChanged := d.LevelsChanged()
	fmt.Fprintf(w, "\nEffective levels (default active elements, no arguments): %d of %d tools change\n", levelsChanged, len(d.Levels))
	if levelsChanged == 0 && !all {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  TOOL\tOLD\tNEW\tCHANGE")
	for _, l := range d.Levels {
		if l.Change == "" && !all {
			continue
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", l.Tool,
			levelCell(l.Old, l.OldMode, l.InOld), levelCell(l.New, l.NewMode, l.InNew), dash(l.Change))
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
