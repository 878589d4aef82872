package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/sqlite"
)

const requests = `{"tool": "list_elements", "session": "s1", "agent": "bot"}
{"tool": "delete_element", "args": {"name": "x"}, "session": "s1"}
{"tool": "create_element", "session": "s2"}
{"tool": "edit_element", "session": "s2", "activeElements": []}
`

// decideWithState runs decide against a fresh state directory.
func decideWithState(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "state") // created by decide
	code, stdout, stderr := runCLI(t, requests, "decide", "--policy", "testdata/policy.yaml", "--state", dir)
	if code != 0 {
		t.Fatalf("decide --state exit %d: %s", code, stderr)
	}
	if n := len(decisions(t, stdout)); n != 4 {
		t.Fatalf("decide wrote %d decisions; want 4", n)
	}
	return dir
}

func TestDecideWithStateKeepsApprovalsAndAudit(t *testing.T) {
	dir := decideWithState(t)
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm()&0o077 != 0 {
		t.Fatalf("state directory mode = %v, %v; want no access for group and others", fi.Mode(), err)
	}
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "portcullis.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	pending, err := st.Approvals(context.Background(), portcullis.ApprovalFilter{Status: portcullis.ApprovalPending})
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 2 {
		t.Fatalf("pending approvals = %d; want 2 (create_element and edit_element)", len(pending))
	}
}

func TestAuditCommands(t *testing.T) {
	dir := decideWithState(t)

	code, stdout, stderr := runCLI(t, "", "audit", "tail", "-n", "3", "--state", dir)
	if code != 0 {
		t.Fatalf("audit tail exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "SEQ") || !strings.HasPrefix(lines[1], "2 ") || !strings.HasPrefix(lines[3], "4 ") {
		t.Fatalf("audit tail -n 3 =\n%s\nwant a header and rows 2..4", stdout)
	}

	code, stdout, _ = runCLI(t, "", "audit", "query", "--outcome", "deny", "--json", "--state", dir)
	if code != 0 {
		t.Fatalf("audit query exit %d", code)
	}
	var ev portcullis.AuditEvent
	if err := json.Unmarshal([]byte(strings.TrimSpace(stdout)), &ev); err != nil || ev.Tool != "delete_element" || ev.Outcome != portcullis.OutcomeDeny {
		t.Fatalf("audit query --outcome deny = %q (%v); want the one delete_element row", stdout, err)
	}
	code, stdout, _ = runCLI(t, "", "audit", "query", "--session", "s2", "--state", dir)
	if code != 0 || strings.Count(stdout, "\n") != 3 {
		t.Fatalf("audit query --session s2 = exit %d\n%s\nwant a header and 2 rows", code, stdout)
	}
	if code, _, stderr := runCLI(t, "", "audit", "query", "--outcome", "maybe", "--state", dir); code != 2 || !strings.Contains(stderr, "--outcome") {
		t.Fatalf("audit query --outcome maybe = exit %d, %q; want 2", code, stderr)
	}
	if code, _, stderr := runCLI(t, "", "audit", "query", "--since", "yesterday", "--state", dir); code != 2 || !strings.Contains(stderr, "--since") {
		t.Fatalf("audit query --since yesterday = exit %d, %q; want 2", code, stderr)
	}

	code, stdout, _ = runCLI(t, "", "audit", "export", "--format", "jsonl", "--state", dir)
	if code != 0 {
		t.Fatalf("audit export exit %d", code)
	}
	exported := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(exported) != 4 {
		t.Fatalf("audit export wrote %d lines; want 4", len(exported))
	}
	var line map[string]any
	if err := json.Unmarshal([]byte(exported[1]), &line); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"decision_id", "timestamp", "input", "result", "path"} {
		if _, ok := line[k]; !ok {
			t.Errorf("exported line lacks the decision-log field %q: %s", k, exported[1])
		}
	}

	code, stdout, stderr = runCLI(t, "", "audit", "verify", "--state", dir)
	if code != 0 || !strings.Contains(stdout, "ok: 4 rows verified") {
		t.Fatalf("audit verify = exit %d, %q, %q", code, stdout, stderr)
	}

	code, stdout, stderr = runCLI(t, "", "audit", "prune", "--max-rows", "2", "--state", dir)
	if code != 0 || !strings.Contains(stdout, "pruned rows up to 2") {
		t.Fatalf("audit prune = exit %d, %q, %q", code, stdout, stderr)
	}
	code, stdout, _ = runCLI(t, "", "audit", "verify", "--state", dir)
	if code != 0 || !strings.Contains(stdout, "ok: 2 rows verified from the signed checkpoint at row 2") {
		t.Fatalf("audit verify after prune = exit %d, %q", code, stdout)
	}
	if code, stdout, _ = runCLI(t, "", "audit", "prune", "--max-rows", "2", "--state", dir); code != 0 || !strings.Contains(stdout, "nothing to prune") {
		t.Fatalf("second prune = exit %d, %q", code, stdout)
	}
	// The policy's audit.retention applies when no flag is given.
	retention := filepath.Join(t.TempDir(), "retention.yaml")
	if err := os.WriteFile(retention, []byte("version: 1\naudit: {retention: {maxRows: 1}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, stdout, stderr = runCLI(t, "", "audit", "prune", "--policy", retention, "--state", dir); code != 0 || !strings.Contains(stdout, "pruned rows up to 3") {
		t.Fatalf("prune by the policy's retention = exit %d, %q, %q", code, stdout, stderr)
	}
	t.Setenv("PORTCULLIS_POLICY", "")
	if code, _, stderr = runCLI(t, "", "audit", "prune", "--state", dir); code != 2 || !strings.Contains(stderr, "--max-age") {
		t.Fatalf("prune without any retention = exit %d, %q; want 2", code, stderr)
	}

	// Forging the checkpoint's signature (or losing the key) is caught.
	if err := os.WriteFile(filepath.Join(dir, "audit.key"), []byte("another key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr = runCLI(t, "", "audit", "verify", "--state", dir); code != 1 || !strings.Contains(stderr, "bad signature") {
		t.Fatalf("verify with the wrong key = exit %d, %q; want 1, bad signature", code, stderr)
	}
}

func TestAuditVerifyNamesTheEditedRow(t *testing.T) {
	dir := decideWithState(t)
	db, err := sql.Open("sqlite", filepath.Join(dir, "portcullis.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE audit SET body = replace(body, 'delete_element', 'list_elements') WHERE seq = 2`); err != nil {
		t.Fatalf("tamper: %v", err)
	}
	code, _, stderr := runCLI(t, "", "audit", "verify", "--state", dir)
	if code != 1 || !strings.Contains(stderr, "row 2") {
		t.Fatalf("verify after an edit = exit %d, %q; want 1 naming row 2", code, stderr)
	}
}

// notices keeps what the gate tells people.
type notices struct{ got []portcullis.Notice }

func (n *notices) Notify(_ context.Context, x portcullis.Notice) error {
	n.got = append(n.got, x)
	return nil
}

func TestUnblockCommand(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if code, _, stderr := runCLI(t, "", "unblock", "--list", "--state", dir); code != 0 {
		t.Fatalf("unblock --list on a new state: exit %d, %s", code, stderr)
	}
	st, err := sqlite.Open(ctx, filepath.Join(dir, "portcullis.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	human := &notices{}
	g, err := gate.New(&portcullis.Policy{Version: 1}, gate.WithStore(st), gate.WithNotifier(human))
	if err != nil {
		t.Fatal(err)
	}
	id, err := g.BlockAgent(ctx, "bot", "risk past the danger threshold", "d1")
	if err != nil {
		t.Fatal(err)
	}
	code := human.got[0].Code

	if c, stdout, _ := runCLI(t, "", "unblock", "--list", "--state", dir); c != 0 || !strings.Contains(stdout, "bot") || !strings.Contains(stdout, id) {
		t.Fatalf("unblock --list = exit %d, %q", c, stdout)
	}
	if c, _, stderr := runCLI(t, "", "unblock", "bot", "--challenge", id, "--code", "AAAAAA", "--state", dir); c != 1 || !strings.Contains(stderr, "wrong code") {
		if code != "AAAAAA" {
			t.Fatalf("unblock with a wrong code = exit %d, %q; want 1", c, stderr)
		}
	}
	if c, _, stderr := runCLI(t, "", "unblock", "bot", "--state", dir); c != 2 || !strings.Contains(stderr, "--challenge") {
		t.Fatalf("unblock without a code = exit %d, %q; want 2", c, stderr)
	}
	// A new code, printed on this terminal, replaces the old one.
	c, stdout, stderr := runCLI(t, "", "unblock", "bot", "--reissue", "--state", dir)
	if c != 0 {
		t.Fatalf("unblock --reissue = exit %d, %s", c, stderr)
	}
	m := regexp.MustCompile(`challenge: (\S+)\n\s+code:\s+(\S+)`).FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("unblock --reissue printed %q; want the challenge and the code", stdout)
	}
	if c, _, _ := runCLI(t, "", "unblock", "bot", "--challenge", id, "--code", code, "--state", dir); c != 1 {
		t.Fatalf("the old challenge still works after a reissue: exit %d", c)
	}
	if c, stdout, stderr := runCLI(t, "", "unblock", "bot", "--challenge", m[1], "--code", strings.ToLower(m[2]), "--state", dir); c != 0 || !strings.Contains(stdout, "unblocked bot") {
		t.Fatalf("unblock with the new code = exit %d, %q, %q", c, stdout, stderr)
	}
	if _, blocked, err := st.Block(ctx, "bot"); err != nil || blocked {
		t.Fatalf("bot still blocked after unblock: %v, %v", blocked, err)
	}

	// The administrator clears blocks without a code.
	for _, a := range []string{"a1", "a2"} {
		if _, err := g.BlockAgent(ctx, a, "stop", "d"); err != nil {
			t.Fatal(err)
		}
	}
	if c, _, stderr := runCLI(t, "", "unblock", "--all", "--admin-token", "guess", "--state", dir); c != 1 || !strings.Contains(stderr, "wrong admin token") {
		t.Fatalf("unblock with a wrong admin token = exit %d, %q", c, stderr)
	}
	token, err := os.ReadFile(filepath.Join(dir, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(filepath.Join(dir, "admin.token")); fi.Mode().Perm() != 0o600 {
		t.Fatalf("admin.token mode = %v; want 0600", fi.Mode().Perm())
	}
	if c, stdout, stderr := runCLI(t, "", "unblock", "--all", "--admin-token", strings.TrimSpace(string(token)), "--state", dir); c != 0 || !strings.Contains(stdout, "unblocked a1") || !strings.Contains(stdout, "unblocked a2") {
		t.Fatalf("unblock --all as admin = exit %d, %q, %q", c, stdout, stderr)
	}
	// Every human action is in the audit log.
	recs, err := st.QueryAudit(ctx, portcullis.AuditQuery{Kind: portcullis.AuditUnblock})
	if err != nil || len(recs) != 3 {
		t.Fatalf("unblock audit rows = %d, %v; want 3", len(recs), err)
	}
}

func TestStoreURLs(t *testing.T) {
	if code, _, stderr := runCLI(t, "", "audit", "tail", "--store", "mysql://x"); code != 2 || !strings.Contains(stderr, "unknown store") {
		t.Fatalf("unknown store scheme = exit %d, %q", code, stderr)
	}
	db := filepath.Join(t.TempDir(), "portcullis.db")
	for _, tc := range []struct{ query, want string }{
		{"?sync=normal", `sync "normal": want "full"`},
		{"?sync=process&cache=shared", `unknown parameter "cache"`},
		{"?sync=full&sync=process", `sync "full,process"`},
	} {
		if code, _, stderr := runCLI(t, "", "audit", "tail", "--store", "sqlite://"+db+tc.query); code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("--store sqlite://...%s = exit %d, %q; want exit 2 naming %s", tc.query, code, stderr, tc.want)
		}
	}
	if code, _, stderr := runCLI(t, "", "audit", "tail", "--store", "postgres://x@127.0.0.1:1/p?sync=off"); code != 2 || !strings.Contains(stderr, `sync "off": want "full"`) {
		t.Errorf("--store postgres://...?sync=off = exit %d, %q; want exit 2", code, stderr)
	}
	for _, mode := range []string{"full", "process"} {
		if code, _, stderr := runCLI(t, "", "audit", "tail", "--store", "sqlite://"+db+"?sync="+mode); code != 0 {
			t.Errorf("--store sqlite://...?sync=%s = exit %d, %q", mode, code, stderr)
		}
	}
}
