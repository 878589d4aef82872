package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/replay"
	"github.com/portcullis/portcullis/replay/replaytest"
	"github.com/portcullis/portcullis/sqlite"
)

func replayChanges(t *testing.T, stdout string) ([]replay.Change, replay.Summary) {
	t.Helper()
	var changes []replay.Change
	var sum *replay.Summary
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		if sum != nil {
			t.Fatalf("a line after the summary: %s", line)
		}
		if strings.HasPrefix(line, `{"summary":`) {
			var s struct{ Summary replay.Summary }
			if err := json.Unmarshal([]byte(line), &s); err != nil {
				t.Fatalf("summary line %q: %v", line, err)
			}
			sum = &s.Summary
			continue
		}
		var c replay.Change
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatalf("line %q is not a change: %v", line, err)
		}
		changes = append(changes, c)
	}
	if sum == nil {
		t.Fatalf("no summary line in:\n%s", stdout)
	}
	return changes, *sum
}

func auditHead(t *testing.T, stateDir string) portcullis.AuditVerification {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(stateDir, "portcullis.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	v, err := portcullis.VerifyAudit(ctx, st, nil)
	if err != nil || !v.OK() {
		t.Fatalf("VerifyAudit = %+v, %v", v, err)
	}
	return v
}

func TestReplaySamePolicyChangesNothing(t *testing.T) {
	stateDir, policyPath := replaytest.Record(t)
	before := auditHead(t, stateDir)
	code, stdout, stderr := runCLI(t, "", "policy", "replay", "--policy", policyPath, "--state", stateDir, "--json")
	if code != 0 {
		t.Fatalf("replay under the recording policy: exit %d; want 0\nstdout:\n%s\nstderr: %s", code, stdout, stderr)
	}
	changes, sum := replayChanges(t, stdout)
	if len(changes) != 0 {
		t.Errorf("replay under the policy that recorded the log reports %d changes; want none:\n%s", len(changes), stdout)
	}
	want := replay.Summary{
		Policy: policyPath, Scanned: 20, Replayed: 18, Changed: 0,
		ByChange:     map[string]int64{},
		NotReplayed:  map[string]int64{replay.SkipBlock: 1},
		Redacted:     1,
		RedactedArgs: map[string]int64{"password": 1},
		FirstSeq:     1, LastSeq: 20,
	}
	if diff := cmp.Diff(want, sum, cmp.FilterPath(func(p cmp.Path) bool { return p.String() == "PolicyHash" }, cmp.Ignore())); diff != "" {
		t.Errorf("summary mismatch (-want +got):\n%s", diff)
	}
	if after := auditHead(t, stateDir); after != before {
		t.Errorf("the audit log changed during the replay: %+v, then %+v", before, after)
	}
}

// TestReplayJSON checks the JSON lines of the changes and the exit status
// 1; package replay tests what changes and why.
func TestReplayJSON(t *testing.T) {
	stateDir, _ := replaytest.Record(t)
	newPolicy := writeTemp(t, t.TempDir(), "new.yaml", strings.Replace(replaytest.Policy, "deny: [delete_*]", "deny: [drop_*]", 1))
	code, stdout, stderr := runCLI(t, "", "policy", "replay", "--policy", newPolicy, "--state", stateDir, "--json")
	if code != 1 {
		t.Fatalf("exit %d; want 1 (changes)\nstdout:\n%s\nstderr: %s", code, stdout, stderr)
	}
	changes, sum := replayChanges(t, stdout)
	var got []string
	for _, c := range changes {
		got = append(got, fmt.Sprintf("%d %s %s %s", c.Seq, c.Tool, c.Kind, c.Change))
	}
	want := []string{
		"5 delete_item looser deny DENY → confirm CONFIRM_SINGLE_USE",
		"6 delete_item looser deny DENY → confirm CONFIRM_SINGLE_USE",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("changes mismatch (-want +got):\n%s\nstdout:\n%s", diff, stdout)
	}
	if sum.Changed != 2 || sum.Looser != 2 || sum.ByChange["deny DENY → confirm CONFIRM_SINGLE_USE"] != 2 {
		t.Errorf("summary = %+v; want 2 looser changes", sum)
	}
}

func TestReplayTable(t *testing.T) {
	stateDir, _ := replaytest.Record(t)
	newPolicy := writeTemp(t, t.TempDir(), "new.yaml", strings.Replace(replaytest.Policy,
		"  login:       {endpoint: UPDATE, redact: [password]}", "  login:       {endpoint: READ, redact: [password]}", 1))
	code, stdout, stderr := runCLI(t, "", "policy", "replay", "--policy", newPolicy, "--state", stateDir, "--progress", "5")
	if code != 1 {
		t.Fatalf("exit %d; want 1\nstdout:\n%s\nstderr: %s", code, stdout, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "SEQ") {
		t.Fatalf("want a table with a header:\n%s", stdout)
	}
	for _, want := range []string{
		"login  confirm CONFIRM_SINGLE_USE  allow AUTO_APPROVE  redacted: password",
		"Replayed 18 decisions (rows 1-20 of 20 audit rows read)",
		"1 would change (0 stricter, 1 looser)",
		"1  confirm CONFIRM_SINGLE_USE → allow AUTO_APPROVE",
		`1 decision had redacted arguments (password ×1): they were replayed with "[redacted]" in their place`,
		"1 decision not replayed: " + replay.SkipBlock,
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, "replayed 15 rows (up to row 15), 1 change so far") {
		t.Errorf("stderr lacks the progress lines:\n%s", stderr)
	}
}

func TestReplaySince(t *testing.T) {
	stateDir, policyPath := replaytest.Record(t)
	code, stdout, stderr := runCLI(t, "", "policy", "replay", "--policy", policyPath, "--state", stateDir, "--since", "2099-01-01T00:00:00Z", "--json")
	if code != 0 {
		t.Fatalf("exit %d; stderr: %s", code, stderr)
	}
	_, sum := replayChanges(t, stdout)
	if sum.Scanned != 0 || sum.Replayed != 0 {
		t.Errorf("--since in the future: %d scanned, %d replayed; want none", sum.Scanned, sum.Replayed)
	}
	code, stdout, stderr = runCLI(t, "", "policy", "replay", "--policy", policyPath, "--state", stateDir, "--since", "1h", "--json")
	if code != 0 {
		t.Fatalf("exit %d; stderr: %s", code, stderr)
	}
	if _, sum := replayChanges(t, stdout); sum.Replayed != 18 {
		t.Errorf("--since 1h: %d replayed; want 18", sum.Replayed)
	}
}

func TestReplayErrors(t *testing.T) {
	_, policyPath := replaytest.Record(t)
	empty := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no log", []string{"policy", "replay", "--policy", policyPath, "--state", empty}, "no audit log to replay"},
		{"bad policy", []string{"policy", "replay", "--policy", "testdata/bad_policy.yaml", "--state", empty}, "bad_policy.yaml"},
		{"bad since", []string{"policy", "replay", "--policy", policyPath, "--state", empty, "--since", "yesterday"}, "--since"},
		{"positional", []string{"policy", "replay", policyPath}, "unexpected argument"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, "", tc.args...)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want exit 2 naming %q", code, stderr, tc.want)
			}
		})
	}
	if entries, err := filepath.Glob(filepath.Join(empty, "*")); err != nil || len(entries) != 0 {
		t.Errorf("replay created %v in an empty state directory", entries)
	}
}

func TestReplayStoreURL(t *testing.T) {
	stateDir, policyPath := replaytest.Record(t)
	// The URL's options (here the audit log's durability) are not part
	// of the file's name.
	for _, u := range []string{"sqlite://" + filepath.Join(stateDir, "portcullis.db"), "sqlite://" + filepath.Join(stateDir, "portcullis.db") + "?sync=process"} {
		code, stdout, stderr := runCLI(t, "", "policy", "replay", "--policy", policyPath, "--store", u, "--json")
		if code != 0 {
			t.Fatalf("--store %s: exit %d; stderr: %s", u, code, stderr)
		}
		if _, sum := replayChanges(t, stdout); sum.Replayed != 18 {
			t.Errorf("--store %s: %d replayed; want 18", u, sum.Replayed)
		}
	}
}
