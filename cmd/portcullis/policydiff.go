package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/policy"
)

// policyDiff is the JSON output of `portcullis policy diff --json`.
type policyDiff struct {
	Old     string          `json:"old"`
	New     string          `json:"new"`
	Equal   bool            `json:"equal"`
	Changes []policy.Change `json:"changes"`
	// Levels is every tool named in either policy, with its effective
	// level for a call with no arguments under the default active elements.
	Levels []levelChange `json:"levels"`
}

// levelChange is one tool's effective level before and after.
type levelChange struct {
	Tool string `json:"tool"`
	// Old and New are the effective levels; OldMode and NewMode the tool's
	// mode (under shadow or off nothing is denied: the level is AUTO_APPROVE).
	Old     portcullis.Level `json:"old"`
	New     portcullis.Level `json:"new"`
	OldMode portcullis.Mode  `json:"oldMode"`
	NewMode portcullis.Mode  `json:"newMode"`
	// Change is stricter, looser, mode (same level, another mode) or "".
	Change string `json:"change,omitempty"`
	// InOld and InNew say whether the policy has a tools entry for it.
	InOld bool `json:"inOld"`
	InNew bool `json:"inNew"`
}

// runPolicyDiff prints the semantic difference between two policy files.
// Exit 0 when they decide alike, 1 when they differ (like diff), 2 when one
// does not load.
func runPolicyDiff(o *policyDiffOptions, pos []string, stdout io.Writer) error {
	if len(pos) != 2 {
		return usageError("policy diff takes two policy files: OLD NEW")
	}
	var pols [2]*portcullis.Policy
	var gates [2]*gate.Gate
	for i, path := range pos {
		p, _, err := policy.Load(path)
		if err != nil {
			return &exitError{code: 2, msg: err.Error()}
		}
		g, err := gate.New(p)
		if err != nil {
			return &exitError{code: 2, msg: fmt.Sprintf("%s: %v", path, err)}
		}
		pols[i], gates[i] = p, g
	}
	out := policyDiff{Old: pos[0], New: pos[1], Changes: policy.Diff(pols[0], pols[1])}
	if out.Changes == nil {
		out.Changes = []policy.Change{}
	}
	out.Levels = effectiveLevels(pols, gates)
	levelsChanged := 0
	for _, l := range out.Levels {
		if l.Change != "" {
			levelsChanged++
		}
	}
	out.Equal = len(out.Changes) == 0 && levelsChanged == 0

	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return err
		}
	} else if err := printPolicyDiff(stdout, &out, levelsChanged, o.all); err != nil {
		return err
	}
	if !out.Equal {
		return &exitError{code: 1}
	}
	return nil
}

// effectiveLevels returns the effective level of every tool named in
// either policy — tools entries, and exact names in element lists and the
// validator's scope — under each policy's default active elements, sorted
// by name.
func effectiveLevels(pols [2]*portcullis.Policy, gates [2]*gate.Gate) []levelChange {
	inTools := [2]map[string]bool{{}, {}}
	aliases := map[string]bool{}
	var names []string
	add := func(n string) {
		if n != "" && !strings.ContainsAny(n, "*?") && n != portcullis.ConfirmOperation && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	for i, p := range pols {
		for _, t := range p.Tools {
			inTools[i][t.Name] = true
			for _, a := range t.Aliases {
				aliases[a] = true
			}
			add(t.Name)
		}
	}
	for _, p := range pols {
		for _, e := range p.Elements {
			for _, l := range [][]string{e.Gatekeeper.Allow, e.Gatekeeper.Confirm, e.Gatekeeper.Deny} {
				for _, n := range l {
					if !aliases[n] {
						add(n)
					}
				}
			}
		}
		if p.Validator != nil {
			for _, n := range p.Validator.Scope.Tools {
				if !aliases[n] {
					add(n)
				}
			}
		}
	}
	slices.Sort(names)
	out := make([]levelChange, 0, len(names))
	for _, n := range names {
		l := levelChange{
			Tool:    n,
			Old:     gates[0].ToolLevel(portcullis.Call{Tool: n}),
			New:     gates[1].ToolLevel(portcullis.Call{Tool: n}),
			OldMode: toolMode(pols[0], n),
			NewMode: toolMode(pols[1], n),
			InOld:   inTools[0][n],
			InNew:   inTools[1][n],
		}
		switch {
		case l.New > l.Old:
			l.Change = "stricter"
		case l.New < l.Old:
			l.Change = "looser"
		case l.OldMode != l.NewMode:
			l.Change = "mode"
		}
		out = append(out, l)
	}
	return out
}

// toolMode is the mode a tool is decided in: its own, else the policy's.
func toolMode(p *portcullis.Policy, name string) portcullis.Mode {
	m := p.Mode
	for i := range p.Tools {
		if p.Tools[i].Name == name && p.Tools[i].Mode != "" {
			m = p.Tools[i].Mode
		}
	}
	if m == "" {
		m = portcullis.ModeEnforce
	}
	return m
}

func printPolicyDiff(w io.Writer, d *policyDiff, levelsChanged int, all bool) error {
	if d.Equal {
		_, err := fmt.Fprintf(w, "%s and %s decide alike: no semantic changes\n", d.Old, d.New)
		return err
	}
	fmt.Fprintf(w, "%s → %s: %s\n", d.Old, d.New, plural(len(d.Changes), "change"))
	for _, c := range d.Changes {
		fmt.Fprintln(w, "  "+c.String())
	}
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
