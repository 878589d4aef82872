package auditlog_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/auditlog"
)

func TestFilterQuery(t *testing.T) {
	now := start.Add(time.Hour)
	q, err := auditlog.Filter{Agent: "bot", Outcome: "deny", Kind: "decision", Since: "30m", Limit: 5, Newest: true}.Query(now)
	want := portcullis.AuditQuery{Agent: "bot", Outcome: portcullis.OutcomeDeny, Kind: portcullis.AuditDecision, Since: now.Add(-30 * time.Minute), Limit: 5, Newest: true}
	if err != nil || q != want {
		t.Errorf("Query = %+v, %v; want %+v", q, err, want)
	}
	for _, tt := range []struct {
		f    auditlog.Filter
		want string
	}{
		{auditlog.Filter{Outcome: "maybe"}, `--outcome "maybe": want allow, confirm, deny or stop`},
		{auditlog.Filter{Since: "soon"}, "--since: "},
		{auditlog.Filter{Until: "later"}, "--until: "},
	} {
		if _, err := tt.f.Query(now); err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("Query(%+v) = %v; want %q", tt.f, err, tt.want)
		}
	}
}

func TestWriteQueryAndTail(t *testing.T) {
	ctx := context.Background()
	st, _ := openLog(t, 120)
	var out strings.Builder
	if err := auditlog.WriteQuery(ctx, st, portcullis.AuditQuery{}, false, &out); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n"); len(lines) != 101 || !strings.HasPrefix(lines[0], "SEQ ") {
		t.Errorf("WriteQuery(no limit) wrote %d lines; want a header and 100 rows", len(lines))
	}
	out.Reset()
	if err := auditlog.WriteQuery(ctx, st, portcullis.AuditQuery{Outcome: portcullis.OutcomeDeny, Limit: 2}, true, &out); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		var ev portcullis.AuditEvent
		if err := json.Unmarshal([]byte(line), &ev); err != nil || ev.Outcome != portcullis.OutcomeDeny {
			t.Errorf("WriteQuery(JSON) line %q: %v; want a denied row", line, err)
		}
	}
	if n := strings.Count(out.String(), "\n"); n != 2 {
		t.Errorf("WriteQuery(limit 2) wrote %d lines", n)
	}

	out.Reset()
	if err := auditlog.WriteTail(ctx, st, auditlog.TailOptions{Lines: 3, Interval: time.Millisecond}, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[1], "118 ") || !strings.HasPrefix(lines[3], "120 ") {
		t.Errorf("WriteTail(3) = %q; want a header and rows 118 to 120", out.String())
	}

	// Following: the rows written later come as they are written, with
	// no second header, until the context ends.
	ctx, cancel := context.WithCancel(ctx)
	w := &follower{cancel: cancel, write: func() { appendRows(t, st, 120, 1) }}
	if err := auditlog.WriteTail(ctx, st, auditlog.TailOptions{Lines: 1, Follow: true, Interval: time.Millisecond}, w); err != nil {
		t.Fatal(err)
	}
	if got := w.b.String(); strings.Count(got, "SEQ") != 1 || !strings.Contains(got, "\n121 ") {
		t.Errorf("WriteTail(follow) = %q; want one header, then row 121", got)
	}
}

// follower writes a row once the tail is shown, and cancels once it is
// shown too.
type follower struct {
	b      strings.Builder
	write  func()
	cancel func()
}

func (f *follower) Write(p []byte) (int, error) {
	n, err := f.b.Write(p)
	if f.write != nil && strings.Contains(f.b.String(), "row 120\n") {
		f.write()
		f.write = nil
	}
	if strings.Contains(f.b.String(), "row 121\n") {
		f.cancel()
	}
	return n, err
}

func TestAnchors(t *testing.T) {
	var a auditlog.Anchors
	if err := a.Set("4:sha256:ab"); err != nil {
		t.Fatal(err)
	}
	if err := a.Set("nope"); err == nil {
		t.Error("Set(nope) = nil; want an error")
	}
	if len(a) != 1 || a[0] != (portcullis.AuditAnchor{Seq: 4, Hash: "sha256:ab", From: "--expect 4:sha256:ab"}) || a.String() != "1" || a.Type() != "anchor" {
		t.Errorf("Anchors = %+v", a)
	}
}

func TestReportWrite(t *testing.T) {
	ctx := context.Background()
	st, _ := openLog(t, 3)
	rep, err := auditlog.Verify(ctx, st, auditlog.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out, warn strings.Builder
	if err := rep.Write(&out, &warn, false); err != nil || out.String() != rep.Summary()+"\n" || warn.Len() != 0 {
		t.Errorf("Write = %q %q %v; want the summary", out.String(), warn.String(), err)
	}
	out.Reset()
	var v portcullis.AuditVerification
	if err := rep.Write(&out, &warn, true); err != nil || json.Unmarshal([]byte(out.String()), &v) != nil || v.Rows != 3 {
		t.Errorf("Write(JSON) = %q, %v", out.String(), err)
	}

	bad := auditlog.Report{Verification: portcullis.AuditVerification{Rows: 3, BadSeq: 2, Problem: "hash mismatch"}}
	out.Reset()
	var ve *auditlog.VerifyError
	if err := bad.Write(&out, &warn, false); !errors.As(err, &ve) || ve.Reason != "audit log does not verify: row 2: hash mismatch" || out.Len() != 0 {
		t.Errorf("Write(bad) = %q, %v", out.String(), err)
	}

	// Heads in the pruned prefix cannot be checked: a warning, and a
	// failure when none of the kept heads could be.
	old := auditlog.Report{Verification: portcullis.AuditVerification{Rows: 1, Unchecked: 2}, Checkpoint: &portcullis.AuditCheckpoint{Seq: 7}, Kept: 2}
	if !old.Verification.OK() {
		t.Fatal("a verification without a bad row is not OK")
	}
	if err := old.Write(&out, &warn, false); !errors.As(err, &ve) || !strings.HasPrefix(ve.Reason, "none of the kept heads could be checked") ||
		warn.String() != "warning: 2 kept heads are older than the pruned prefix (up to row 7) and could not be checked\n" {
		t.Errorf("Write(unchecked) = %q, %v", warn.String(), err)
	}
	old.Verification.Anchors = 1
	if err := old.Write(&out, &warn, false); err != nil {
		t.Errorf("Write(one checked) = %v; want nil", err)
	}
}

func TestProgress(t *testing.T) {
	var out strings.Builder
	auditlog.Progress(&out)(1, 4)
	auditlog.Progress(&out)(200000, 200004)
	if want := "verified 1 row (up to row 4)…\nverified 200000 rows (up to row 200004)…\n"; out.String() != want {
		t.Errorf("Progress wrote %q; want %q", out.String(), want)
	}
}

func TestRetentionForAndWritePruned(t *testing.T) {
	now := start.Add(time.Hour)
	policyOf := func(r portcullis.AuditRetention) func() (portcullis.AuditRetention, string, error) {
		return func() (portcullis.AuditRetention, string, error) { return r, "policy.yaml", nil }
	}
	unread := func() (portcullis.AuditRetention, string, error) {
		t.Error("the policy was read although --max-age or --max-rows was given")
		return portcullis.AuditRetention{}, "", nil
	}
	if r, err := auditlog.RetentionFor("2d", 0, now, unread); err != nil || !r.Before.Equal(now.Add(-48*time.Hour)) || r.KeepRows != 0 {
		t.Errorf("RetentionFor(2d) = %+v, %v", r, err)
	}
	if r, err := auditlog.RetentionFor("", 5, now, unread); err != nil || !r.Before.IsZero() || r.KeepRows != 5 {
		t.Errorf("RetentionFor(5 rows) = %+v, %v", r, err)
	}
	if _, err := auditlog.RetentionFor("soon", 0, now, unread); err == nil || !strings.HasPrefix(err.Error(), "--max-age: ") {
		t.Errorf("RetentionFor(soon) = %v; want a --max-age error", err)
	}
	if r, err := auditlog.RetentionFor("", 0, now, policyOf(portcullis.AuditRetention{MaxAge: time.Minute, MaxRows: 7})); err != nil || !r.Before.Equal(now.Add(-time.Minute)) || r.KeepRows != 7 {
		t.Errorf("RetentionFor(the policy's) = %+v, %v", r, err)
	}
	if _, err := auditlog.RetentionFor("", 0, now, policyOf(portcullis.AuditRetention{})); err == nil || err.Error() != "policy.yaml has no audit.retention; pass --max-age or --max-rows" {
		t.Errorf("RetentionFor(a policy that keeps everything) = %v", err)
	}
	noPolicy := errors.New("no policy")
	if _, err := auditlog.RetentionFor("", 0, now, func() (portcullis.AuditRetention, string, error) { return portcullis.AuditRetention{}, "", noPolicy }); err != noPolicy {
		t.Errorf("RetentionFor(no policy) = %v; want the policy's error", err)
	}
	var out strings.Builder
	_ = auditlog.WritePruned(&out, portcullis.AuditCheckpoint{}, false)
	_ = auditlog.WritePruned(&out, portcullis.AuditCheckpoint{Seq: 9}, true)
	if want := "nothing to prune\npruned rows up to 9; signed checkpoint kept in their place\n"; out.String() != want {
		t.Errorf("WritePruned wrote %q; want %q", out.String(), want)
	}
}
