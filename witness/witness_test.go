package witness_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/sqlite"
	"github.com/portcullis/portcullis/witness"
)

func sign(h witness.Head) string { return fmt.Sprintf("test:%d:%s", h.Seq, h.Hash) }

// openLog opens a real SQLite store and a connection of its own to edit
// the file behind its back.
func openLog(t *testing.T) (*sqlite.Store, *sql.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	st, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return st, db
}

func appendRows(t *testing.T, st portcullis.Store, n int, outcome portcullis.Outcome) {
	t.Helper()
	for range n {
		ev := portcullis.AuditEvent{Kind: portcullis.AuditDecision, Time: time.Now(), Tool: "delete", Outcome: outcome,
			Decision: &portcullis.Decision{Outcome: outcome, PermissionLevel: portcullis.AutoApprove}}
		if _, err := st.AppendAudit(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
}

// rewrite rewrites the log from row from on, consistently: row from's
// outcome becomes allow and every hash after it is recomputed.
func rewrite(t *testing.T, db *sql.DB, from int64) {
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
	rows.Close()
	prev := recs[0].PrevHash
	for i, r := range recs {
		ev, err := r.Event()
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			ev.Outcome, ev.Decision.Outcome = portcullis.OutcomeAllow, portcullis.OutcomeAllow
		}
		body, err := portcullis.EncodeAuditBody(&ev)
		if err != nil {
			t.Fatal(err)
		}
		hash := portcullis.ChainHash(prev, r.Seq, body)
		if _, err := db.Exec(`UPDATE audit SET body = ?, prev_hash = ?, hash = ?, outcome = ? WHERE seq = ?`, body, prev, hash, string(ev.Outcome), r.Seq); err != nil {
			t.Fatal(err)
		}
		prev = hash
	}
}

func anchors(heads []witness.Head) []portcullis.AuditAnchor {
	var out []portcullis.AuditAnchor
	for _, h := range heads {
		out = append(out, portcullis.AuditAnchor{Seq: h.Seq, Hash: h.Hash, From: "the witness"})
	}
	return out
}

// TestRewriteAfterPublishedHead publishes heads to a local HTTP witness,
// rewrites the chain consistently after a published head, and checks that
// the heads the witness kept find it.
func TestRewriteAfterPublishedHead(t *testing.T) {
	ctx := context.Background()
	srv := httptest.NewServer(&witness.Server{Dir: t.TempDir(), Token: "wt"})
	defer srv.Close()
	w := &witness.HTTP{URL: srv.URL + "/heads/gw1", Token: "wt"}
	st, db := openLog(t)
	p := witness.NewPublisher(witness.Options{Chain: st, Witnesses: []witness.Witness{w}, Sign: sign})

	if got := p.Publish(ctx); len(got) != 1 || got[0].Err != nil || got[0].Kept != 0 {
		t.Fatalf("Publish on an empty log = %+v; want nothing published", got)
	}
	appendRows(t, st, 2, portcullis.OutcomeDeny)
	if got := p.Publish(ctx); got[0].Err != nil || got[0].Kept != 2 || got[0].LagRows != 0 {
		t.Fatalf("Publish = %+v; want head 2 kept", got)
	}
	p.Publish(ctx) // unchanged: not sent again
	appendRows(t, st, 3, portcullis.OutcomeAllow)
	p.Publish(ctx)
	heads, err := w.Heads(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(heads) != 2 || heads[0].Seq != 2 || heads[1].Seq != 5 || heads[1].Signature != sign(heads[1]) {
		t.Fatalf("the witness kept %+v; want heads 2 and 5, signed", heads)
	}
	if v, err := portcullis.VerifyAuditAnchors(ctx, st, nil, anchors(heads)); err != nil || !v.OK() || v.Anchors != 2 {
		t.Fatalf("VerifyAuditAnchors before the rewrite = %+v, %v; want ok, 2 heads checked", v, err)
	}

	rewrite(t, db, 2)
	if v, err := portcullis.VerifyAudit(ctx, st, nil); err != nil || !v.OK() {
		t.Fatalf("VerifyAudit of the consistent rewrite = %+v, %v; want it to verify alone", v, err)
	}
	v, err := portcullis.VerifyAuditAnchors(ctx, st, nil, anchors(heads))
	if err != nil {
		t.Fatal(err)
	}
	if v.OK() || v.BadSeq != 2 || !strings.Contains(v.Problem, "the witness kept") {
		t.Fatalf("VerifyAuditAnchors after the rewrite = %+v; want row 2, the first published head, named", v)
	}
	// Publishing the rewritten chain adds heads; it cannot replace the
	// old ones.
	p2 := witness.NewPublisher(witness.Options{Chain: st, Witnesses: []witness.Witness{w}, Sign: sign})
	p2.Publish(ctx)
	after, err := w.Heads(ctx)
	if err != nil || len(after) != 3 || after[0] != heads[0] {
		t.Fatalf("heads after publishing the rewrite = %+v, %v; want the two old heads kept and one added", after, err)
	}
}

// TestWitnessDownLags checks that a witness that is down costs a lag, and
// catches up when it is back.
func TestWitnessDownLags(t *testing.T) {
	ctx := context.Background()
	var up bool
	inner := &witness.Server{Dir: t.TempDir()}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	defer srv.Close()
	w := &witness.HTTP{URL: srv.URL + "/heads/gw"}
	st, _ := openLog(t)
	var seen []witness.Status
	p := witness.NewPublisher(witness.Options{Chain: st, Witnesses: []witness.Witness{w}, Sign: sign, Observe: func(s witness.Status) { seen = append(seen, s) }})
	appendRows(t, st, 4, portcullis.OutcomeAllow)
	got := p.Publish(ctx)
	if got[0].Err == nil || got[0].LagRows != 4 || len(seen) != 1 || seen[0].LagRows != 4 {
		t.Fatalf("Publish to a witness that is down = %+v (observed %+v); want an error and a lag of 4 rows", got, seen)
	}
	up = true
	if got := p.Publish(ctx); got[0].Err != nil || got[0].LagRows != 0 || got[0].LastKept.IsZero() {
		t.Fatalf("Publish once the witness is back = %+v; want it caught up", got)
	}
}

// TestRunPublishesOnStop checks the last head goes out when the publisher
// stops, with the interval far away.
func TestRunPublishesOnStop(t *testing.T) {
	path := filepath.Join(t.TempDir(), "heads.jsonl")
	w := &witness.File{Path: path}
	st, _ := openLog(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	p := witness.NewPublisher(witness.Options{Chain: st, Witnesses: []witness.Witness{w}, Sign: sign, Interval: time.Hour})
	appendRows(t, st, 1, portcullis.OutcomeAllow)
	go func() { p.Run(ctx); close(done) }()
	// The first round publishes at once; wait for it before appending.
	for {
		if hs, err := w.Heads(context.Background()); err == nil && len(hs) == 1 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	appendRows(t, st, 2, portcullis.OutcomeAllow)
	cancel()
	<-done
	heads, err := w.Heads(context.Background())
	if err != nil || len(heads) != 2 || heads[1].Seq != 3 {
		t.Fatalf("heads after stop = %+v, %v; want the head at row 3 published on stop", heads, err)
	}
}

func TestServerProtocol(t *testing.T) {
	dir := t.TempDir()
	srv := httptest.NewServer(&witness.Server{Dir: dir, Token: "wt"})
	defer srv.Close()
	do := func(method, path, token, body string) int {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	head := `{"seq":3,"hash":"` + portcullis.GenesisHash + `","time":"2026-11-28T14:00:00Z","signature":"s"}`
	for _, tc := range []struct {
		name, method, path, token, body string
		want                            int
	}{
		{"no token", "POST", "/heads/gw", "", head, 401},
		{"wrong token", "POST", "/heads/gw", "nope", head, 401},
		{"kept", "POST", "/heads/gw", "wt", head, 204},
		{"not a head", "POST", "/heads/gw", "wt", `{"seq":"x"}`, 400},
		{"unknown field", "POST", "/heads/gw", "wt", `{"seq":1,"hash":"` + portcullis.GenesisHash + `","time":"2026-11-28T14:00:00Z","extra":1}`, 400},
		{"bad hash", "POST", "/heads/gw", "wt", `{"seq":1,"hash":"md5:x","time":"2026-11-28T14:00:00Z"}`, 400},
		{"too large", "POST", "/heads/gw", "wt", strings.Repeat(" ", 5000) + head, 413},
		{"bad name", "POST", "/heads/..%2fx", "wt", head, 404},
		{"read", "GET", "/heads/gw", "wt", "", 200},
		{"read without token", "GET", "/heads/gw", "", "", 401},
		{"other method", "DELETE", "/heads/gw", "wt", "", 405},
		{"name of every allowed kind", "GET", "/heads/Gw-1.a_B", "wt", "", 200},
		{"name of 128", "GET", "/heads/" + strings.Repeat("n", 128), "wt", "", 200},
		{"name of 129", "GET", "/heads/" + strings.Repeat("n", 129), "wt", "", 404},
		{"no name", "GET", "/heads/", "wt", "", 404},
		{"name starting with a dot", "GET", "/heads/.gw", "wt", "", 404},
		{"name starting with a dash", "GET", "/heads/-gw", "wt", "", 404},
		{"name starting with _", "GET", "/heads/_gw", "wt", "", 404},
		{"name with a space", "GET", "/heads/g%20w", "wt", "", 404},
		{"name with a letter beyond ASCII", "GET", "/heads/gw%C3%A9", "wt", "", 404},
	} {
		if got := do(tc.method, tc.path, tc.token, tc.body); got != tc.want {
			t.Errorf("%s: %s %s = %d; want %d", tc.name, tc.method, tc.path, got, tc.want)
		}
	}
	heads, err := (&witness.HTTP{URL: srv.URL + "/heads/gw", Token: "wt"}).Heads(context.Background())
	if err != nil || len(heads) != 1 || heads[0].Seq != 3 {
		t.Fatalf("Heads = %+v, %v; want the one head kept", heads, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "gw.jsonl")); err != nil {
		t.Fatalf("the heads file: %v", err)
	}
	if hs, err := (&witness.HTTP{URL: srv.URL + "/heads/none", Token: "wt"}).Heads(context.Background()); err != nil || len(hs) != 0 {
		t.Fatalf("Heads of a name never published = %+v, %v; want none", hs, err)
	}
}

func TestStreamLinesReadBack(t *testing.T) {
	var b strings.Builder
	s := &witness.Stream{W: &b, Label: "stderr"}
	h := witness.Head{Seq: 7, Hash: portcullis.GenesisHash, Time: time.Date(2026, 11, 28, 14, 0, 0, 0, time.UTC), Signature: "s"}
	if err := s.Publish(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	// A supervisor's log puts a timestamp before the line.
	path := filepath.Join(t.TempDir(), "supervisor.log")
	if err := os.WriteFile(path, []byte("2026-11-28T14:00:01Z "+b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	heads, err := (&witness.File{Path: path}).Heads(context.Background())
	if err != nil || len(heads) != 1 || heads[0] != h {
		t.Fatalf("Heads of the supervisor's log = %+v, %v; want %+v", heads, err, h)
	}
	if _, err := (&witness.File{Path: filepath.Join(t.TempDir(), "none")}).Heads(context.Background()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Heads of a missing file: %v; want not exist", err)
	}
}

// ListenAndServe serves the witness until its context ends, telling its
// address first.
func TestListenAndServe(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- (&witness.Server{Dir: dir, Token: "wt"}).ListenAndServe(ctx, "127.0.0.1:0", func(a net.Addr) { addr <- a.String() })
	}()
	url := "http://" + <-addr + "/heads/gw1"
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer wt")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET %s = %d; want 200", url, resp.StatusCode)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("ListenAndServe after its context ended = %v; want nil", err)
	}
	if err := (&witness.Server{Dir: dir}).ListenAndServe(context.Background(), "127.0.0.1:-1", nil); err == nil || !strings.HasPrefix(err.Error(), "listen on 127.0.0.1:-1: ") {
		t.Errorf("ListenAndServe(bad address) = %v", err)
	}
}

func TestParseAll(t *testing.T) {
	file := filepath.Join(t.TempDir(), "heads.jsonl")
	ws, err := witness.ParseAll([]string{"https://witness.example/heads/gw1", file, "stderr"}, io.Discard)
	if err != nil || len(ws) != 3 {
		t.Fatalf("ParseAll = %v, %v; want three witnesses", ws, err)
	}
	if _, ok := ws[0].(*witness.HTTP); !ok {
		t.Errorf("ParseAll[0] = %T; want *witness.HTTP", ws[0])
	}
	if _, ok := ws[1].(*witness.File); !ok {
		t.Errorf("ParseAll[1] = %T; want *witness.File", ws[1])
	}
	if _, err := witness.ParseAll([]string{file, ""}, io.Discard); err == nil {
		t.Error("ParseAll with an empty spec = nil; want an error")
	}
	if ws, err := witness.ParseAll(nil, io.Discard); err != nil || len(ws) != 0 {
		t.Errorf("ParseAll(none) = %v, %v", ws, err)
	}
}
