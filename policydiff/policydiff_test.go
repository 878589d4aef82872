package policydiff_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/policy"
	"github.com/portcullis/portcullis/policydiff"
)

const oldPolicy = `
version: 1
tools:
  list_elements:  {endpoint: READ}
  create_element: {endpoint: CREATE}
  edit_element:   {endpoint: UPDATE}
  delete_element: {endpoint: DELETE, canBeElevated: false}
  open_portfolio_browser: {endpoint: READ, aliases: [open_console]}
elements:
  - name: Security Persona
    type: persona
    gatekeeper:
      confirm: [create_element]
      deny: [delete_*]
  - name: Permissive Skill
    type: skill
    gatekeeper:
      allow: [create_element, edit_element, open_console]
  - name: Sandbox
    type: ensemble
    active: false
    gatekeeper:
      deny: [confirm_operation]
`

// newPolicy drops the persona's confirm of create_element, decides
// edit_element in shadow mode, names publish only in an allow list and
// makes delete_element DENY by default.
var newPolicy = strings.NewReplacer(
	"      confirm: [create_element]\n", "",
	"edit_element:   {endpoint: UPDATE}", "edit_element:   {endpoint: UPDATE, mode: shadow}",
	"allow: [create_element, edit_element, open_console]", "allow: [create_element, edit_element, open_console, publish]",
	"delete_element: {endpoint: DELETE, canBeElevated: false}", "delete_element: {endpoint: DELETE, defaultLevel: DENY, canBeElevated: false}",
).Replace(oldPolicy)

func parse(t *testing.T, name, text string) *portcullis.Policy {
	t.Helper()
	pol, _, err := policy.Parse(name, []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

func TestCompareSamePolicy(t *testing.T) {
	r, err := policydiff.Compare(parse(t, "a.yaml", oldPolicy), parse(t, "b.yaml", oldPolicy))
	if err != nil {
		t.Fatal(err)
	}
	if !r.Equal || len(r.Changes) != 0 || r.LevelsChanged() != 0 {
		t.Errorf("Compare(a, a) = equal %v, %d changes, %d levels changed; want equal, none", r.Equal, len(r.Changes), r.LevelsChanged())
	}
	if r.Old != "a.yaml" || r.New != "b.yaml" {
		t.Errorf("Compare names %q and %q; want the policies' sources a.yaml and b.yaml", r.Old, r.New)
	}
	if r.Changes == nil {
		t.Errorf("Changes is nil; want an empty list (it is a JSON array)")
	}
}

func TestCompareLevels(t *testing.T) {
	r, err := policydiff.Compare(parse(t, "old.yaml", oldPolicy), parse(t, "new.yaml", newPolicy))
	if err != nil {
		t.Fatal(err)
	}
	if r.Equal || len(r.Changes) != 4 {
		t.Errorf("equal = %v, %d changes; want false, 4: %v", r.Equal, len(r.Changes), r.Changes)
	}
	want := []policydiff.Level{
		// the confirm of Security Persona is gone: the skill's allow now auto-approves
		{Tool: "create_element", Old: portcullis.ConfirmSession, New: portcullis.AutoApprove, OldMode: "enforce", NewMode: "enforce", Change: policydiff.Looser, InOld: true, InNew: true},
		// denied by the persona before and after, whatever its own level
		{Tool: "delete_element", Old: portcullis.Deny, New: portcullis.Deny, OldMode: "enforce", NewMode: "enforce", InOld: true, InNew: true},
		{Tool: "edit_element", Old: portcullis.AutoApprove, New: portcullis.AutoApprove, OldMode: "enforce", NewMode: "shadow", Change: policydiff.ModeChange, InOld: true, InNew: true},
		{Tool: "list_elements", Old: portcullis.AutoApprove, New: portcullis.AutoApprove, OldMode: "enforce", NewMode: "enforce", InOld: true, InNew: true},
		// the alias open_console is listed under its canonical name only
		{Tool: "open_portfolio_browser", Old: portcullis.AutoApprove, New: portcullis.AutoApprove, OldMode: "enforce", NewMode: "enforce", InOld: true, InNew: true},
		// named only in an allow list: unclassified, never auto-approved;
		// confirm_operation is not a tool
		{Tool: "publish", Old: portcullis.ConfirmSingleUse, New: portcullis.ConfirmSingleUse, OldMode: "enforce", NewMode: "enforce"},
	}
	if diff := cmp.Diff(want, r.Levels); diff != "" {
		t.Errorf("levels mismatch (-want +got):\n%s", diff)
	}
	if n := r.LevelsChanged(); n != 2 {
		t.Errorf("LevelsChanged() = %d; want 2", n)
	}
}

func TestCompareStricterElement(t *testing.T) {
	old := parse(t, "old.yaml", "version: 1\ntools:\n  send: {endpoint: CREATE}\n")
	upd := parse(t, "new.yaml", "version: 1\ntools:\n  send: {endpoint: CREATE}\nelements:\n  - {name: Lock, type: persona, gatekeeper: {deny: [send]}}\n")
	r, err := policydiff.Compare(old, upd)
	if err != nil {
		t.Fatal(err)
	}
	want := []policydiff.Level{{Tool: "send", Old: portcullis.ConfirmSession, New: portcullis.Deny, OldMode: "enforce", NewMode: "enforce", Change: policydiff.Stricter, InOld: true, InNew: true}}
	if diff := cmp.Diff(want, r.Levels); diff != "" {
		t.Errorf("levels mismatch (-want +got):\n%s", diff)
	}
}

func TestCompareRefusesAPolicyTheGateRefuses(t *testing.T) {
	good := parse(t, "good.yaml", oldPolicy)
	bad := parse(t, "bad.yaml", oldPolicy)
	bad.Tools = append(bad.Tools, portcullis.ToolPolicy{Name: "Shell", Endpoint: portcullis.Execute, ShellArg: "cmd"})
	bad.Shell.Rules = append(bad.Shell.Rules, portcullis.ShellRule{Pattern: [][]string{{"git"}}, Decision: portcullis.ShellAllow, Match: []string{"rm -rf /"}})
	for _, tc := range [][2]*portcullis.Policy{{good, bad}, {bad, good}} {
		if _, err := policydiff.Compare(tc[0], tc[1]); err == nil || !strings.HasPrefix(err.Error(), "bad.yaml: ") {
			t.Errorf("Compare(%s, %s) = %v; want an error naming bad.yaml", tc[0].Source, tc[1].Source, err)
		}
	}
}

func ExampleCompare() {
	old, _, err := policy.Parse("old.yaml", []byte("version: 1\ntools:\n  send: {endpoint: CREATE}\n"))
	if err != nil {
		panic(err)
	}
	upd, _, err := policy.Parse("new.yaml", []byte("version: 1\ntools:\n  send: {endpoint: READ}\n"))
	if err != nil {
		panic(err)
	}
	r, err := policydiff.Compare(old, upd)
	if err != nil {
		panic(err)
	}
	for _, l := range r.Levels {
		fmt.Printf("%s: %s → %s (%s)\n", l.Tool, l.Old, l.New, l.Change)
	}
	// Output:
	// send: CONFIRM_SESSION → AUTO_APPROVE (looser)
}
