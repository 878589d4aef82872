package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/portcullis/portcullis"
)

// openStateDB opens the state directory's SQLite file behind the store's
// back, as anyone who can write the file can.
func openStateDB(t *testing.T, dir string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(dir, "portcullis.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close the state file: %v", err)
		}
	})
	return db
}

// rewriteChain rewrites the audit log from row from on: edit changes the
// event of row from, and every row from there is re-chained with its hash
// recomputed, so the rewritten log is consistent and verifies alone.
func rewriteChain(t *testing.T, db *sql.DB, from int64, edit func(*portcullis.AuditEvent)) {
	t.Helper()
	rows, err := db.Query(`SELECT seq, body, prev_hash FROM audit WHERE seq >= ? ORDER BY seq`, from)
	if err != nil {
		t.Fatal(err)
	}
	var recs []portcullis.AuditRecord
	for rows.Next() {
		var r portcullis.AuditRecord
		var body []byte
		if err := rows.Scan(&r.Seq, &body, &r.PrevHash); err != nil {
			t.Fatal(err)
		}
		r.Body = body
		recs = append(recs, r)
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	if len(recs) == 0 {
		t.Fatalf("no rows from %d to rewrite", from)
	}
	prev := recs[0].PrevHash
	for i, r := range recs {
		ev, err := r.Event()
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			edit(&ev)
		}
		body, err := portcullis.EncodeAuditBody(&ev)
		if err != nil {
			t.Fatal(err)
		}
		hash := portcullis.ChainHash(prev, r.Seq, body)
		if _, err := db.Exec(`UPDATE audit SET body = ?, prev_hash = ?, hash = ?, outcome = ?, tool = ? WHERE seq = ?`,
			body, prev, hash, string(ev.Outcome), ev.Tool, r.Seq); err != nil {
			t.Fatalf("rewrite row %d: %v", r.Seq, err)
		}
		prev = hash
	}
}

// allowInstead turns a denied decision into an allowed one.
func allowInstead(ev *portcullis.AuditEvent) {
	ev.Outcome = portcullis.OutcomeAllow
	if ev.Decision != nil {
		ev.Decision.Outcome, ev.Decision.Code, ev.Decision.Reason = portcullis.OutcomeAllow, "", "allowed"
	}
}

// verifyHead runs audit verify --json and returns the head it reports.
func verifyHead(t *testing.T, dir string) (int64, string) {
	t.Helper()
	code, stdout, stderr := runCLI(t, "", "audit", "verify", "--json", "--state", dir)
	if code != 0 {
		t.Fatalf("audit verify --json = exit %d, %q", code, stderr)
	}
	var v portcullis.AuditVerification
	if err := json.Unmarshal([]byte(stdout), &v); err != nil {
		t.Fatalf("audit verify --json printed %q: %v", stdout, err)
	}
	return v.LastSeq, v.HeadHash
}

// TestAuditVerifyChecksCopiedColumns edits each column that queries filter
// on, alone, in the real state file: the queries list the forged row, and
// verify names the row and the column.
func TestAuditVerifyChecksCopiedColumns(t *testing.T) {
	for _, tc := range []struct{ column, value string }{
		{"outcome", "'allow'"},
		{"kind", "'approval'"},
		{"decision_id", "'d-forged'"},
		{"session", "'s9'"},
		{"agent", "'another-agent'"},
		{"tool", "'list_elements'"},
		{"time", "time - 3600000000000"},
	} {
		t.Run(tc.column, func(t *testing.T) {
			dir := decideWithState(t)
			db := openStateDB(t, dir)
			if _, err := db.Exec(`UPDATE audit SET ` + tc.column + ` = ` + tc.value + ` WHERE seq = 2`); err != nil {
				t.Fatalf("tamper: %v", err)
			}
			if tc.column == "outcome" {
				// The forgery works on queries: the denied call is gone
				// from the denials.
				code, stdout, _ := runCLI(t, "", "audit", "query", "--outcome", "deny", "--json", "--state", dir)
				if code != 0 || strings.TrimSpace(stdout) != "" {
					t.Fatalf("audit query --outcome deny after the edit = exit %d, %q; want no rows", code, stdout)
				}
			}
			code, _, stderr := runCLI(t, "", "audit", "verify", "--state", dir)
			if code != 1 || !strings.Contains(stderr, "row 2") || !strings.Contains(stderr, "its "+tc.column+" column") {
				t.Fatalf("audit verify after editing row 2's %s = exit %d, %q; want 1 naming row 2 and the column", tc.column, code, stderr)
			}
			code, stdout, _ := runCLI(t, "", "audit", "verify", "--json", "--state", dir)
			var v portcullis.AuditVerification
			if err := json.Unmarshal([]byte(stdout), &v); err != nil || code != 1 || v.BadSeq != 2 || v.Column != tc.column {
				t.Fatalf("audit verify --json = exit %d, %q (%v); want badSeq 2, column %s", code, stdout, err, tc.column)
			}
		})
	}
}

// TestAuditVerifyExpectedHead rewrites the whole log consistently after its
// head was noted: it verifies alone, but not against the noted head.
func TestAuditVerifyExpectedHead(t *testing.T) {
	dir := decideWithState(t)
	seq, hash := verifyHead(t, dir)
	if seq != 4 {
		t.Fatalf("head = row %d; want 4", seq)
	}
	expect := fmt.Sprintf("%d:%s", seq, hash)
	if code, stdout, stderr := runCLI(t, "", "audit", "verify", "--expect", expect, "--state", dir); code != 0 || !strings.Contains(stdout, "1 of 1 kept heads matched") {
		t.Fatalf("audit verify --expect (untouched) = exit %d, %q, %q", code, stdout, stderr)
	}
	rewriteChain(t, openStateDB(t, dir), 2, allowInstead)
	if code, stdout, stderr := runCLI(t, "", "audit", "verify", "--state", dir); code != 0 {
		t.Fatalf("audit verify of the consistent rewrite = exit %d, %q, %q; want it to verify alone", code, stdout, stderr)
	}
	code, _, stderr := runCLI(t, "", "audit", "verify", "--expect", expect, "--state", dir)
	if code != 1 || !strings.Contains(stderr, "row 4") || !strings.Contains(stderr, "rewritten") || !strings.Contains(stderr, "--expect "+expect) {
		t.Fatalf("audit verify --expect after the rewrite = exit %d, %q; want 1 naming row 4 and the kept head", code, stderr)
	}
	// A head beyond the end: the tail was removed.
	code, _, stderr = runCLI(t, "", "audit", "verify", "--expect", "9:"+hash, "--state", dir)
	if code != 1 || !strings.Contains(stderr, "row 5") || !strings.Contains(stderr, "removed from the end") {
		t.Fatalf("audit verify --expect beyond the end = exit %d, %q; want 1 naming row 5", code, stderr)
	}
	if code, _, stderr := runCLI(t, "", "audit", "verify", "--expect", "four", "--state", dir); code != 2 || !strings.Contains(stderr, "SEQ:HASH") {
		t.Fatalf("audit verify --expect four = exit %d, %q; want 2", code, stderr)
	}
}

// TestAuditVerifyChecksLookupTables raises the SQLite store's index
// watermark by plain SQL over rows the lookup tables do not hold: a query
// by tool no longer finds the denied call, and verify says why, exit 1,
// after printing the chain's result with --json.
func TestAuditVerifyChecksLookupTables(t *testing.T) {
	dir := decideWithState(t)
	db := openStateDB(t, dir)
	var tool, id string
	if err := db.QueryRow(`SELECT tool, decision_id FROM audit WHERE seq = 2`).Scan(&tool, &id); err != nil {
		t.Fatal(err)
	}
	if code, stdout, _ := runCLI(t, "", "audit", "query", "--tool", tool, "--json", "--state", dir); code != 0 || !strings.Contains(stdout, id) {
		t.Fatalf("audit query --tool %s = exit %d, %q; want decision %s", tool, code, stdout, id)
	}
	if _, err := db.Exec(`UPDATE audit_indexed SET seq = 2`); err != nil {
		t.Fatalf("tamper: %v", err)
	}
	if code, stdout, _ := runCLI(t, "", "audit", "query", "--tool", tool, "--json", "--state", dir); code != 0 || strings.Contains(stdout, id) {
		t.Fatalf("audit query --tool %s after the edit = exit %d, %q; want decision %s hidden", tool, code, stdout, id)
	}
	code, _, stderr := runCLI(t, "", "audit", "verify", "--state", dir)
	if code != 1 || !strings.Contains(stderr, "lookup tables") || !strings.Contains(stderr, "row 1") || !strings.Contains(stderr, "has no entry") {
		t.Fatalf("audit verify after raising the watermark = exit %d, %q; want 1 naming the table and row 1", code, stderr)
	}
	code, stdout, _ := runCLI(t, "", "audit", "verify", "--json", "--state", dir)
	var v portcullis.AuditVerification
	if err := json.Unmarshal([]byte(stdout), &v); err != nil || code != 1 || !v.OK() {
		t.Fatalf("audit verify --json = exit %d, %q (%v); want the chain's result and exit 1", code, stdout, err)
	}
}
