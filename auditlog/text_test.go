package auditlog_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/auditlog"
)

func TestWriteTable(t *testing.T) {
	ctx := context.Background()
	st, _ := openLog(t, 2)
	if _, err := st.AppendAudit(ctx, portcullis.AuditEvent{Kind: portcullis.AuditUnblock, Time: start.Add(3 * time.Minute), Agent: "bot", Actor: "cli:ana", Detail: "cleared\n  by the administrator"}); err != nil {
		t.Fatal(err)
	}
	recs, _, err := auditlog.Tail(ctx, st, 10)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := auditlog.WriteTable(&b, recs); err != nil {
		t.Fatal(err)
	}
	var got [][]string
	for _, l := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		got = append(got, strings.Fields(l))
	}
	want := [][]string{
		{"SEQ", "TIME", "OUTCOME", "LEVEL", "TOOL", "SESSION", "AGENT", "CODE", "DETAIL"},
		{"1", "2026-03-01T12:01:00Z", "allow", "AUTO_APPROVE", "list_elements", "s1", "bot", "-", "row", "1"},
		{"2", "2026-03-01T12:02:00Z", "deny", "AUTO_APPROVE", "list_elements", "s1", "bot", "-", "row", "2"},
		{"3", "2026-03-01T12:03:00Z", "unblock", "-", "-", "-", "bot", "-", "cli:ana:", "cleared", "by", "the", "administrator"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("WriteTable (-want +got):\n%s", diff)
	}

	// The rows alone line up as they do under the header.
	var rows strings.Builder
	if err := auditlog.WriteRows(&rows, recs); err != nil {
		t.Fatal(err)
	}
	_, body, _ := strings.Cut(b.String(), "\n")
	if rows.String() != body {
		t.Errorf("WriteRows = %q; want the table without its header, %q", rows.String(), body)
	}

	var js strings.Builder
	if err := auditlog.WriteJSON(&js, recs); err != nil {
		t.Fatal(err)
	}
	if want := string(recs[0].Body) + "\n" + string(recs[1].Body) + "\n" + string(recs[2].Body) + "\n"; js.String() != want {
		t.Errorf("WriteJSON = %q; want each row's body on a line", js.String())
	}
}

func TestParseAnchor(t *testing.T) {
	got, err := auditlog.ParseAnchor("42:sha256:ab12", "--expect 42:sha256:ab12")
	if want := (portcullis.AuditAnchor{Seq: 42, Hash: "sha256:ab12", From: "--expect 42:sha256:ab12"}); err != nil || got != want {
		t.Errorf("ParseAnchor(42:sha256:ab12) = %+v, %v; want %+v", got, err, want)
	}
	for _, bad := range []string{"", "42", "x:sha256:ab", "-1:sha256:ab", "42:md5:ab"} {
		if _, err := auditlog.ParseAnchor(bad, "--expect"); err == nil || !strings.Contains(err.Error(), "want SEQ:HASH") {
			t.Errorf("ParseAnchor(%q) = %v; want an error asking for SEQ:HASH", bad, err)
		}
	}
}

func TestReportSummary(t *testing.T) {
	ctx := context.Background()
	st, _ := openLog(t, 3)
	rep, err := auditlog.Verify(ctx, st, auditlog.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "ok: 3 rows verified from the start; head 3:" + rep.Verification.HeadHash + " (keep it to check later with --expect)"; rep.Summary() != want {
		t.Errorf("Summary() = %q; want %q", rep.Summary(), want)
	}

	if _, _, err := auditlog.Prune(ctx, st, key, start.Add(time.Hour), auditlog.Retention{KeepRows: 1}); err != nil {
		t.Fatal(err)
	}
	anchor := portcullis.AuditAnchor{Seq: 3, Hash: rep.Verification.HeadHash, From: "--expect"}
	rep, err = auditlog.Verify(ctx, st, auditlog.VerifyOptions{Key: keyOf(key), Anchors: []portcullis.AuditAnchor{anchor}})
	if err != nil {
		t.Fatal(err)
	}
	if want := "ok: 1 row verified from the signed checkpoint at row 2; head 3:" + anchor.Hash + " (keep it to check later with --expect); 1 of 1 kept heads matched"; rep.Summary() != want {
		t.Errorf("Summary() after pruning = %q; want %q", rep.Summary(), want)
	}
}
