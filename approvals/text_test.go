package approvals_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/approvals"
)

func TestAge(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "0s"},
		{59 * time.Second, "59s"},
		{90 * time.Second, "1m"},
		{3 * time.Hour, "3h"},
		{47 * time.Hour, "47h"},
		{72 * time.Hour, "3d"},
	} {
		if got := approvals.Age(tc.d); got != tc.want {
			t.Errorf("Age(%v) = %q; want %q", tc.d, got, tc.want)
		}
	}
}

// TestWriteRequests shows a request the gate made: in the table, in full
// with how to answer it, as a watch line, and the answers' lines.
func TestWriteRequests(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	id := w.confirm(t, portcullis.Call{Tool: "create_element", Agent: "bot", Session: "s1", Args: map[string]any{"name": "x"}})
	a, err := w.local.Approval(ctx, id)
	if err != nil {
		t.Fatal(err)
	}

	var b strings.Builder
	if err := approvals.WriteTable(&b, []portcullis.Approval{a}, a.CreatedAt.Add(90*time.Second)); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "ID ") || !strings.Contains(lines[0], "REQUEST") {
		t.Fatalf("WriteTable = %q; want a header and one row", b.String())
	}
	if f := strings.Fields(lines[1]); len(f) < 6 || f[0] != id || f[1] != "pending" || f[2] != "1m" || f[3] != "bot" || f[4] != "s1" || f[5] != "CONFIRM_SESSION" {
		t.Errorf("WriteTable row = %q; want %s pending 1m bot s1 CONFIRM_SESSION …", lines[1], id)
	}

	b.Reset()
	if err := approvals.WriteDetail(&b, a); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"approval " + id + ": pending\n",
		"  tool:     create_element (CONFIRM_SESSION)\n",
		"  agent:    bot\n  session:  s1\n",
		"  args:     {\n    \"name\": \"x\"\n  }\n",
		"answer: portcullis approve " + id + " [--session] | portcullis deny " + id + " --reason TEXT\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("WriteDetail = %q; want it to contain %q", b.String(), want)
		}
	}

	now := time.Date(2026, 1, 2, 15, 4, 5, 0, time.Local)
	b.Reset()
	if err := approvals.WriteRound(&b, approvals.Round{First: true, Arrived: []portcullis.Approval{a}}, now, false); err != nil {
		t.Fatal(err)
	}
	if want := "15:04:05  " + id + "  " + a.Reason + "  agent bot, session s1, CONFIRM_SESSION\n"; b.String() != want {
		t.Errorf("WriteRound(arrived) = %q; want %q", b.String(), want)
	}

	approved, err := w.local.Approve(ctx, id, true)
	if err != nil {
		t.Fatal(err)
	}
	b.Reset()
	if err := approvals.WriteRound(&b, approvals.Round{Answered: []portcullis.Approval{approved}}, now, false); err != nil {
		t.Fatal(err)
	}
	if want := "15:04:05  " + id + "  approved by ana\n"; b.String() != want {
		t.Errorf("WriteRound(answered) = %q; want %q", b.String(), want)
	}
	b.Reset()
	if err := approvals.WriteAnswer(&b, approved, true); err != nil {
		t.Fatal(err)
	}
	if want := "approved " + id + " for session s1: " + a.Reason + " (agent bot)\n"; b.String() != want {
		t.Errorf("WriteAnswer(approved) = %q; want %q", b.String(), want)
	}

	id2 := w.confirm(t, portcullis.Call{Tool: "delete_element", Agent: "bot"})
	denied, err := w.local.Deny(ctx, id2, "not now")
	if err != nil {
		t.Fatal(err)
	}
	b.Reset()
	if err := approvals.WriteAnswer(&b, denied, false); err != nil {
		t.Fatal(err)
	}
	if want := "denied " + id2 + ": " + denied.Reason + " (agent bot)\n"; b.String() != want {
		t.Errorf("WriteAnswer(denied) = %q; want %q", b.String(), want)
	}
	b.Reset()
	if err := approvals.WriteDetail(&b, denied); err != nil {
		t.Fatal(err)
	}
	if s := b.String(); !strings.Contains(s, "  reason:   not now\n") || !strings.Contains(s, " by ana\n") || strings.Contains(s, "answer:") {
		t.Errorf("WriteDetail(denied) = %q; want the reason and who answered, and no way to answer", s)
	}
}

func TestWriteRoundFirstAndJSON(t *testing.T) {
	now := time.Now()
	var b strings.Builder
	if err := approvals.WriteRound(&b, approvals.Round{First: true}, now, false); err != nil {
		t.Fatal(err)
	}
	if want := "no pending approval requests; watching (Ctrl-C to stop)\n"; b.String() != want {
		t.Errorf("WriteRound(first, empty) = %q; want %q", b.String(), want)
	}
	b.Reset()
	r := approvals.Round{First: true, Arrived: []portcullis.Approval{{ID: "apr_1", Reason: "<a>", Level: portcullis.ConfirmSingleUse}}, Answered: []portcullis.Approval{{ID: "apr_2", Level: portcullis.ConfirmSession}}}
	if err := approvals.WriteRound(&b, r, now, true); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"id":"apr_1"`) || !strings.Contains(lines[0], `"reason":"<a>"`) || !strings.Contains(lines[1], `"id":"apr_2"`) {
		t.Errorf("WriteRound(JSON) = %q; want one line of JSON per request, HTML as it is", b.String())
	}
}

func TestWriteGrants(t *testing.T) {
	exp := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var b strings.Builder
	err := approvals.WriteGrants(&b, []portcullis.Grant{
		{ID: "grt_1", Kind: portcullis.GrantSession, Tool: "create_element", ElementType: "page", Session: "s1", GrantedBy: "ana", ExpiresAt: exp},
		{ID: "grt_2", Kind: portcullis.GrantSession, Tool: "list_elements"},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	want := [][]string{
		{"ID", "KIND", "TOOL", "SESSION", "BY", "EXPIRES"},
		{"grt_1", string(portcullis.GrantSession), "create_element", "(page)", "s1", "ana", exp.Local().Format(time.RFC3339)},
		{"grt_2", string(portcullis.GrantSession), "list_elements", "-", "-", "never"},
	}
	var fields [][]string
	for _, l := range got {
		fields = append(fields, strings.Fields(l))
	}
	if diff := cmp.Diff(want, fields); diff != "" {
		t.Errorf("WriteGrants (-want +got):\n%s", diff)
	}
}
