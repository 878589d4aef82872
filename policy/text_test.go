package policy_test

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/portcullis/portcullis/policy"
)

func TestWriteLint(t *testing.T) {
	for _, tc := range []struct {
		name, text, want string
	}{
		{"one of each", "version: 1\ntools:\n  list_elements: {endpoint: READ}\nelements:\n  - name: Skill\n    type: skill\n    gatekeeper: {allow: [list_elements, verify_challenge]}\n",
			"warning: p.yaml:7: element \"Skill\": gatekeeper.allow[1]: \"verify_challenge\" cannot be gated (a recovery operation that must stay open to people); removed\n" +
				"p.yaml: 1 tool, 1 element, 1 warning\n"},
		{"none", "version: 1\n", "p.yaml: 0 tools, 0 elements, 0 warnings\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol, warnings, err := policy.Parse("p.yaml", []byte(tc.text))
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			if err := policy.WriteLint(&b, "p.yaml", pol, warnings); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, b.String()); diff != "" {
				t.Errorf("WriteLint (-want +got):\n%s", diff)
			}
		})
	}
}
