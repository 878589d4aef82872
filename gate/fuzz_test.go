package gate_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/policy"
)

// FuzzDecide decides arbitrary requests under arbitrary policies and checks
// the engine's security invariants, whatever the input:
//   - nothing panics out of Decide;
//   - an allowed call is auto-approved, or satisfied by a grant, or let
//     through by the mode — never allowed at a confirm or deny level
//     otherwise;
//   - a tool the policy does not classify is never auto-approved;
//   - a DENY level is never an allow or a confirm.
func FuzzDecide(f *testing.F) {
	files, _ := filepath.Glob("testdata/cases/*.yaml")
	for _, file := range files {
		tf, err := policy.LoadTests(file)
		if err != nil {
			continue
		}
		for i, c := range tf.Cases {
			if i > 3 {
				break
			}
			req, err := json.Marshal(c.Request)
			if err != nil {
				continue
			}
			f.Add([]byte(grantsPolicy), req)
		}
	}
	f.Add([]byte(grantsPolicy), []byte(`{"tool":"delete_element","activeElements":["Sandbox"]}`))
	f.Add([]byte("version: 1\nunknownTools: deny\n"), []byte(`{"tool":"x"}`))
	f.Add([]byte("version: 1\nelements:\n  - name: A\n    type: skill\n    gatekeeper: {allow: ['*']}\n"), []byte(`{"tool":"anything"}`))
	f.Fuzz(func(t *testing.T, polSrc, reqSrc []byte) {
		pol, _, err := policy.Parse("fuzz.yaml", polSrc)
		if err != nil {
			return
		}
		g, err := gate.New(pol, gate.WithRequestOverrides())
		if err != nil {
			return
		}
		call, err := portcullis.DecodeCall(reqSrc)
		if err != nil {
			return
		}
		d, err := g.Decide(context.Background(), call)
		if err != nil {
			if d.Outcome != portcullis.OutcomeDeny || !d.FailClosed {
				t.Fatalf("Decide error %v with decision %s failClosed=%v; want a fail-closed deny", err, d.Outcome, d.FailClosed)
			}
			return
		}
		if d.Outcome == portcullis.OutcomeAllow && d.PermissionLevel != portcullis.AutoApprove &&
			d.Source != portcullis.SourceSessionGrant && d.Source != portcullis.SourceMode {
			t.Fatalf("allowed at %s from %s: %+v", d.PermissionLevel, d.Source, d)
		}
		known := false
		for _, tp := range pol.Tools {
			if tp.Name == call.Tool {
				known = true
			}
			for _, a := range tp.Aliases {
				if a == call.Tool {
					known = true
				}
			}
		}
		if !known && d.Outcome == portcullis.OutcomeAllow && d.Source != portcullis.SourceSessionGrant && d.Source != portcullis.SourceMode {
			t.Fatalf("an unclassified tool was auto-approved: %+v", d)
		}
		if d.PermissionLevel == portcullis.Deny && (d.Outcome == portcullis.OutcomeAllow || d.Outcome == portcullis.OutcomeConfirm) {
			t.Fatalf("DENY level with outcome %s: %+v", d.Outcome, d)
		}
	})
}
