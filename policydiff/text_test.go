package policydiff_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/portcullis/portcullis/policydiff"
)

func TestWriteText(t *testing.T) {
	r, err := policydiff.Compare(parse(t, "old.yaml", oldPolicy), parse(t, "new.yaml", newPolicy))
	if err != nil {
		t.Fatal(err)
	}
	changes := `old.yaml → new.yaml: 4 changes
  tool "delete_element": level CONFIRM_SINGLE_USE (endpoint default) → DENY
  tool "edit_element": mode (none) → shadow
  element "Permissive Skill": gatekeeper.allow: added publish
  element "Security Persona": gatekeeper.confirm: removed create_element

Effective levels (default active elements, no arguments): 2 of 6 tools change
`
	for _, tc := range []struct {
		all  bool
		want string
	}{
		{false, changes + `  TOOL            OLD              NEW                    CHANGE
  create_element  CONFIRM_SESSION  AUTO_APPROVE           looser
  edit_element    AUTO_APPROVE     AUTO_APPROVE (shadow)  mode
`},
		{true, changes + `  TOOL                    OLD                                  NEW                                  CHANGE
  create_element          CONFIRM_SESSION                      AUTO_APPROVE                         looser
  delete_element          DENY                                 DENY                                 -
  edit_element            AUTO_APPROVE                         AUTO_APPROVE (shadow)                mode
  list_elements           AUTO_APPROVE                         AUTO_APPROVE                         -
  open_portfolio_browser  AUTO_APPROVE                         AUTO_APPROVE                         -
  publish                 CONFIRM_SINGLE_USE (no tools entry)  CONFIRM_SINGLE_USE (no tools entry)  -
`},
	} {
		var b bytes.Buffer
		if err := r.WriteText(&b, tc.all); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, b.String()); diff != "" {
			t.Errorf("WriteText(all=%v) (-want +got):\n%s", tc.all, diff)
		}
	}
}

func TestWriteTextOneChangeNoLevels(t *testing.T) {
	// A rationale changes nothing the gate decides, but is a change.
	after := strings.Replace(oldPolicy, "delete_element: {endpoint: DELETE, canBeElevated: false}", `delete_element: {endpoint: DELETE, canBeElevated: false, rationale: "gone for good"}`, 1)
	r, err := policydiff.Compare(parse(t, "old.yaml", oldPolicy), parse(t, "new.yaml", after))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := r.WriteText(&b, false); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), "old.yaml → new.yaml: 1 change\n") || !strings.HasSuffix(b.String(), ": 0 of 5 tools change\n") {
		t.Errorf("WriteText of one change and no level change:\n%s", b.String())
	}

	same, err := policydiff.Compare(parse(t, "a.yaml", oldPolicy), parse(t, "b.yaml", oldPolicy))
	if err != nil {
		t.Fatal(err)
	}
	b.Reset()
	if err := same.WriteText(&b, true); err != nil {
		t.Fatal(err)
	}
	if want := "a.yaml and b.yaml decide alike: no semantic changes\n"; b.String() != want {
		t.Errorf("WriteText of equal policies = %q; want %q", b.String(), want)
	}
}

func TestCompareFilesAndWriteJSON(t *testing.T) {
	dir := t.TempDir()
	oldPath, newPath := filepath.Join(dir, "old.yaml"), filepath.Join(dir, "new.yaml")
	for path, text := range map[string]string{oldPath: oldPolicy, newPath: newPolicy} {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r, err := policydiff.CompareFiles(oldPath, newPath)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := r.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), "{\n  \"old\": ") {
		t.Errorf("WriteJSON is not one indented object:\n%s", b.String())
	}
	var got policydiff.Report
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(*r, got); diff != "" {
		t.Errorf("WriteJSON does not read back as the report (-want +got):\n%s", diff)
	}

	if _, err := policydiff.CompareFiles(oldPath, filepath.Join(dir, "nope.yaml")); err == nil || !strings.Contains(err.Error(), "nope.yaml") {
		t.Errorf("CompareFiles with a missing file = %v; want an error naming it", err)
	}
}
