package approvals_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/approvals"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/memstore"
)

var seen = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func pins() []portcullis.ToolPin {
	return []portcullis.ToolPin{
		{Upstream: "notes", Tool: portcullis.ToolSetPin, Hash: "sha256:set", FirstSeen: seen},
		{Upstream: "notes", Tool: "read_note", Hash: "sha256:a", Definition: json.RawMessage(`{"name":"read_note"}`), FirstSeen: seen, AcceptedBy: "ana"},
		{Upstream: "notes", Tool: "edit_note", Hash: "sha256:b", Definition: json.RawMessage(`{"name":"edit_note","description":"Edit a note."}`),
			PendingHash: "sha256:c", PendingDefinition: json.RawMessage(`{"name":"edit_note","description":"Edit a note, then mail it."}`), FirstSeen: seen},
		{Upstream: "notes", Tool: "run_shell", Hash: portcullis.UnacceptedHash, PendingHash: "sha256:d", PendingDefinition: json.RawMessage(`{"name":"run_shell"}`), FirstSeen: seen},
	}
}

func TestWritePins(t *testing.T) {
	for _, tc := range []struct {
		name     string
		heldOnly bool
		want     [][]string
	}{
		{"all", false, [][]string{
			{"UPSTREAM", "TOOL", "STATE", "FIRST", "SEEN", "ACCEPTED", "BY"},
			{"notes", "read_note", "pinned", "2026-03-01", "12:00", "ana"},
			{"notes", "edit_note", "CHANGED", "(held)", "2026-03-01", "12:00"},
			{"notes", "run_shell", "NEW", "(held)", "2026-03-01", "12:00"},
		}},
		{"held only", true, [][]string{
			{"UPSTREAM", "TOOL", "STATE", "FIRST", "SEEN", "ACCEPTED", "BY"},
			{"notes", "edit_note", "CHANGED", "(held)", "2026-03-01", "12:00"},
			{"notes", "run_shell", "NEW", "(held)", "2026-03-01", "12:00"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			if err := approvals.WritePins(&b, pins(), tc.heldOnly); err != nil {
				t.Fatal(err)
			}
			var got [][]string
			for _, l := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
				got = append(got, strings.Fields(l))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("WritePins(heldOnly=%v) (-want +got):\n%s", tc.heldOnly, diff)
			}
		})
	}
}

func TestWriteToolChange(t *testing.T) {
	p := pins()
	var b strings.Builder
	if err := approvals.WriteToolChange(&b, p[2]); err != nil {
		t.Fatal(err)
	}
	want := "The definition of edit_note (upstream notes) changed:\n" +
		"  {\n" +
		"    \"name\": \"edit_note\",\n" +
		"-   \"description\": \"Edit a note.\"\n" +
		"+   \"description\": \"Edit a note, then mail it.\"\n" +
		"  }\n\n"
	if b.String() != want {
		t.Errorf("WriteToolChange(changed) = %q; want %q", b.String(), want)
	}

	b.Reset()
	if err := approvals.WriteToolChange(&b, p[3]); err != nil {
		t.Fatal(err)
	}
	want = "run_shell is a new tool of upstream notes, first offered after its tools were pinned. Its definition:\n{\n  \"name\": \"run_shell\"\n}\n"
	if b.String() != want {
		t.Errorf("WriteToolChange(new) = %q; want %q", b.String(), want)
	}
}

// TestAcceptTool accepts a changed tool through a real gate on a store:
// the change is shown, then accepted and audited; an unknown tool and one
// with nothing waiting are refused with their codes, and nothing shown.
func TestAcceptTool(t *testing.T) {
	ctx := context.Background()
	st := memstore.New(nil)
	for _, p := range pins() {
		if err := st.PutToolPin(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	g, err := gate.New(&portcullis.Policy{Version: 1}, gate.WithStore(st))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := approvals.ListPins(ctx, &b, st, true); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(b.String()), "\n"); len(lines) != 3 || !strings.Contains(lines[1], "edit_note") || !strings.Contains(lines[2], "run_shell") {
		t.Errorf("ListPins(held only) = %q; want the header and the two held tools", b.String())
	}
	b.Reset()
	if err := approvals.AcceptTool(ctx, &b, st, g, "notes", "edit_note", "ana"); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), "The definition of edit_note (upstream notes) changed:\n") || !strings.HasSuffix(b.String(), "\naccepted: calls to edit_note are decided by the policy again\n") {
		t.Errorf("AcceptTool wrote %q; want the change, then that it was accepted", b.String())
	}
	p, ok, err := st.ToolPin(ctx, "notes", "edit_note")
	if err != nil || !ok || p.PendingHash != "" || p.Hash != "sha256:c" || p.AcceptedBy != "ana" {
		t.Errorf("the pin after AcceptTool = %+v, %v, %v; want the new definition, accepted by ana", p, ok, err)
	}
	recs, err := st.QueryAudit(ctx, portcullis.AuditQuery{Kind: portcullis.AuditTool})
	if err != nil || len(recs) != 1 {
		t.Errorf("audit rows of the acceptance = %d, %v; want 1", len(recs), err)
	}
	for _, tc := range []struct {
		tool string
		code portcullis.Code
	}{{"no_such_tool", portcullis.CodeNotFound}, {"read_note", portcullis.CodeConflict}} {
		b.Reset()
		err := approvals.AcceptTool(ctx, &b, st, g, "notes", tc.tool, "ana")
		var pe *portcullis.Error
		if !errors.As(err, &pe) || pe.Code != tc.code || b.Len() != 0 {
			t.Errorf("AcceptTool(%s) = %v, wrote %q; want %s and nothing written", tc.tool, err, b.String(), tc.code)
		}
	}
}
