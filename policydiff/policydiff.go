// Package policydiff compares two policies by what they decide
// (`portcullis policy diff`): the semantic changes between the files
// (policy.Diff) and how each tool's effective level moves, as the gate
// decides it.
//
// It builds gates without stores or validators and asks them only for
// levels: it decides no call and writes nothing but the report, as the
// command shows it (WriteText, WriteJSON).
package policydiff

import (
	"fmt"
	"slices"
	"strings"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/policy"
)

// Report is the difference between two policies.
type Report struct {
	// Old and New are the policies' Sources.
	Old string `json:"old"`
	New string `json:"new"`
	// Equal is true when the policies decide alike: no change and no
	// level moves.
	Equal   bool            `json:"equal"`
	Changes []policy.Change `json:"changes"`
	// Levels is every tool named in either policy, sorted by name, with
	// its effective level for a call with no arguments under the default
	// active elements.
	Levels []Level `json:"levels"`
}

// The ways a tool's effective level changes (Level.Change).
const (
	Stricter = "stricter"
	Looser   = "looser"
	// ModeChange: the same level, decided in another mode.
	ModeChange = "mode"
)

// Level is one tool's effective level before and after.
type Level struct {
	Tool string `json:"tool"`
	// Old and New are the effective levels; OldMode and NewMode the tool's
	// mode (under shadow or off nothing is denied: the level is AUTO_APPROVE).
	Old     portcullis.Level `json:"old"`
	New     portcullis.Level `json:"new"`
	OldMode portcullis.Mode  `json:"oldMode"`
	NewMode portcullis.Mode  `json:"newMode"`
	// Change is Stricter, Looser, ModeChange or "".
	Change string `json:"change,omitempty"`
	// InOld and InNew say whether the policy has a tools entry for it.
	InOld bool `json:"inOld"`
	InNew bool `json:"inNew"`
}

// Compare returns the difference between the policies before and after.
// It fails when the gate refuses either (a policy that does not compile);
// the error names its Source.
func Compare(before, after *portcullis.Policy) (*Report, error) {
	pols := [2]*portcullis.Policy{before, after}
	var gates [2]*gate.Gate
	for i, p := range pols {
		g, err := gate.New(p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.Source, err)
		}
		gates[i] = g
	}
	r := &Report{Old: before.Source, New: after.Source, Changes: policy.Diff(before, after)}
	if r.Changes == nil {
		r.Changes = []policy.Change{}
	}
	r.Levels = effectiveLevels(pols, gates)
	r.Equal = len(r.Changes) == 0 && r.LevelsChanged() == 0
	return r, nil
}

// CompareFiles loads the policy files at oldPath and newPath and compares
// them. Its errors are policy.Load's, or Compare's.
func CompareFiles(oldPath, newPath string) (*Report, error) {
	var pols [2]*portcullis.Policy
	for i, path := range []string{oldPath, newPath} {
		p, _, err := policy.Load(path)
		if err != nil {
			return nil, err
		}
		pols[i] = p
	}
	return Compare(pols[0], pols[1])
}

// LevelsChanged counts the tools whose level or mode changes.
func (r *Report) LevelsChanged() int {
	n := 0
	for _, l := range r.Levels {
		if l.Change != "" {
			n++
		}
	}
	return n
}

// effectiveLevels returns the effective level of every tool named in
// either policy — tools entries, and exact names in element lists and the
// validator's scope — under each policy's default active elements, sorted
// by name.
func effectiveLevels(pols [2]*portcullis.Policy, gates [2]*gate.Gate) []Level {
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
	out := make([]Level, 0, len(names))
	for _, n := range names {
		l := Level{
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
			l.Change = Stricter
		case l.New < l.Old:
			l.Change = Looser
		case l.OldMode != l.NewMode:
			l.Change = ModeChange
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
