package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis/portcullis/witness"
)

// serveInProcess runs `portcullis serve --config cfg` in this process, as
// main runs it, and returns its base URL and a stop that ends it as
// SIGTERM does (its context canceled) and waits for it to return.
func serveInProcess(t *testing.T, cfg string) (string, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, []string{"serve", "--config", cfg, "--listen", "127.0.0.1:0"}, strings.NewReader(""), pw, os.Stderr)
		pw.Close()
		done <- err
	}()
	var once sync.Once
	var runErr error
	stop := func() {
		once.Do(func() {
			cancel()
			runErr = <-done
		})
		if runErr != nil {
			t.Errorf("serve: %v", runErr)
		}
	}
	t.Cleanup(func() { once.Do(func() { cancel(); <-done }) })
	u, err := awaitServing(pr)
	if err != nil {
		stop()
		t.Fatal(err)
	}
	return u, stop
}

// addWitnessConfig appends an audit block with one witness URL to a serve
// configuration.
func addWitnessConfig(t *testing.T, cfg, url string) {
	t.Helper()
	f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, "audit:\n  witnesses:\n    - url: %s\n  witnessInterval: 50ms\n", url); err != nil {
		t.Fatal(err)
	}
}

// TestServeAnchorsTheAuditChain runs `portcullis serve` publishing its
// chain's head to a local HTTP witness (the reference witness), rewrites
// the chain consistently after the heads were published, and checks that
// `audit verify --witness` finds the rewrite.
func TestServeAnchorsTheAuditChain(t *testing.T) {
	wdir := t.TempDir()
	ws := httptest.NewServer(&witness.Server{Dir: wdir})
	defer ws.Close()
	wurl := ws.URL + "/heads/gw1"
	cfg, token := writeServeConfig(t, "")
	addWitnessConfig(t, cfg, wurl)
	state := filepath.Join(filepath.Dir(cfg), "state")
	url, stop := serveInProcess(t, cfg)
	cs := connectHTTP(t, url, token)
	ctx := context.Background()
	for i := range 3 {
		if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_note", Arguments: map[string]any{"id": i}}); err != nil || res.IsError {
			t.Fatalf("read_note = %+v, %v", res, err)
		}
	}
	// A head is published at the interval, while serving.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if hs, err := (&witness.HTTP{URL: wurl}).Heads(ctx); err == nil && len(hs) > 0 && hs[len(hs)-1].Seq >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no head of the three calls was published within 30 s at a 50 ms interval")
		}
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "no_such_tool"}); err != nil || !res.IsError {
		t.Fatalf("no_such_tool = %+v, %v; want a denial", res, err)
	}
	cs.Close()
	stop() // the last head is published on shutdown
	seq, hash := verifyHead(t, state)
	heads, err := (&witness.HTTP{URL: wurl}).Heads(ctx)
	if err != nil || len(heads) < 2 {
		ents, _ := os.ReadDir(wdir)
		t.Fatalf("the witness kept %+v, %v; want heads at the interval and on shutdown (%v)", heads, err, ents)
	}
	if last := heads[len(heads)-1]; last.Seq != seq || last.Hash != hash {
		t.Fatalf("the witness's newest head = %d:%s; want the log's head %d:%s, published on shutdown", last.Seq, last.Hash, seq, hash)
	}
	if code, stdout, stderr := runCLI(t, "", "audit", "verify", "--witness", wurl, "--state", state); code != 0 || !strings.Contains(stdout, "kept heads matched") {
		t.Fatalf("audit verify --witness (untouched) = exit %d, %q, %q", code, stdout, stderr)
	}

	// Rewrite every row from the first decision on, consistently.
	rewriteChain(t, openStateDB(t, state), heads[0].Seq, allowInstead)
	if code, stdout, stderr := runCLI(t, "", "audit", "verify", "--state", state); code != 0 {
		t.Fatalf("audit verify of the consistent rewrite = exit %d, %q, %q; want it to verify alone", code, stdout, stderr)
	}
	code, _, stderr := runCLI(t, "", "audit", "verify", "--witness", wurl, "--state", state)
	want := fmt.Sprintf("row %d", heads[0].Seq)
	if code != 1 || !strings.Contains(stderr, want) || !strings.Contains(stderr, "witness "+wurl) || !strings.Contains(stderr, "rewritten") {
		t.Fatalf("audit verify --witness after the rewrite = exit %d, %q; want 1 naming %s and the witness", code, stderr, want)
	}

	// A head forged by someone without the audit key is refused.
	f, err := os.OpenFile(filepath.Join(t.TempDir(), "forged.jsonl"), os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, `{"seq":1,"hash":%q,"time":"2026-11-28T14:00:00Z","signature":"hmac-sha256:00"}`+"\n", hash)
	f.Close()
	if code, _, stderr := runCLI(t, "", "audit", "verify", "--witness", f.Name(), "--state", state); code != 1 || !strings.Contains(stderr, "bad signature") {
		t.Fatalf("audit verify --witness FORGED = exit %d, %q; want 1, bad signature", code, stderr)
	}
}

// TestServeWitnessDown points serve at a witness nobody listens on:
// decisions flow, and the metrics show the witness's lag.
func TestServeWitnessDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String() + "/heads/gw"
	ln.Close() // nothing listens there now
	cfg, token := writeServeConfig(t, "")
	addWitnessConfig(t, cfg, down)
	state := filepath.Join(filepath.Dir(cfg), "state")
	s := startServe(t, cfg)
	cs := connectHTTP(t, s.url, token)
	ctx := context.Background()
	for i := range 3 {
		if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_note", Arguments: map[string]any{"id": i}}); err != nil || res.IsError {
			t.Fatalf("read_note with the witness down = %+v, %v; want it forwarded", res, err)
		}
	}
	metricsToken := "Bearer " + readToken(t, filepath.Join(state, "metrics.token"))
	lag := regexp.MustCompile(`portcullis_audit_witness_lag_rows\{witness="` + regexp.QuoteMeta(down) + `"\} (\d+)`)
	failures := regexp.MustCompile(`portcullis_audit_witness_failures_total\{witness="` + regexp.QuoteMeta(down) + `"\} (\d+)`)
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, body := getMetrics(t, s.url, metricsToken)
		m, f := lag.FindStringSubmatch(body), failures.FindStringSubmatch(body)
		if m != nil && f != nil {
			n, _ := strconv.Atoi(m[1])
			fails, _ := strconv.Atoi(f[1])
			if n >= 3 && fails > 0 {
				break // three decisions at least, none anchored
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the metrics never showed the witness lagging 3 rows or more:\n%s", grepLines(body, "witness"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestWitnessServeCommand runs the reference witness as the command runs
// it and keeps a head through it.
func TestWitnessServeCommand(t *testing.T) {
	dir := t.TempDir()
	tokFile := filepath.Join(t.TempDir(), "witness.token")
	if err := os.WriteFile(tokFile, []byte("wtok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, []string{"witness", "serve", "--dir", dir, "--listen", "127.0.0.1:0", "--token-file", tokFile}, strings.NewReader(""), pw, os.Stderr)
		pw.Close()
		done <- err
	}()
	line := make([]byte, 256)
	n, err := pr.Read(line)
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, pr)
	m := regexp.MustCompile(`witness on (http://\S+)/heads/NAME`).FindSubmatch(line[:n])
	if m == nil {
		t.Fatalf("witness serve printed %q", line[:n])
	}
	w := &witness.HTTP{URL: string(m[1]) + "/heads/gw", Token: "wtok"}
	h := witness.Head{Seq: 2, Hash: "sha256:" + strings.Repeat("ab", 32), Time: time.Now().UTC(), Signature: "s"}
	if err := w.Publish(ctx, h); err != nil {
		t.Fatal(err)
	}
	if err := (&witness.HTTP{URL: w.URL}).Publish(ctx, h); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("Publish without the token: %v; want 401", err)
	}
	heads, err := w.Heads(ctx)
	if err != nil || len(heads) != 1 || heads[0].Seq != 2 {
		t.Fatalf("Heads = %+v, %v", heads, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("witness serve: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "gw.jsonl")); err != nil || !strings.Contains(string(b), h.Hash) {
		t.Fatalf("gw.jsonl = %q, %v", b, err)
	}
}

// TestMCPWitnessFlag runs the stdio wrapper with a file witness: when the
// client goes away, the log's last head is in the file, and verify checks
// the log against it.
func TestMCPWitnessFlag(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	policyPath := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policyPath, []byte(servePolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	heads := filepath.Join(t.TempDir(), "heads.jsonl")
	cmd := wrapperCmd(t, "--policy", policyPath, "--state", state, "--witness", heads, "--witness-interval", "1h",
		"--", "env", upstreamEnv+"=1", os.Args[0], "-test.run=^$")
	cmd.Stderr = os.Stderr
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "witness-test", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_note", Arguments: map[string]any{"id": i}}); err != nil || res.IsError {
			t.Fatalf("read_note = %+v, %v", res, err)
		}
	}
	if err := cs.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	seq, hash := verifyHead(t, state)
	kept, err := (&witness.File{Path: heads}).Heads(ctx)
	if err != nil || len(kept) == 0 {
		t.Fatalf("the file witness kept %+v, %v", kept, err)
	}
	if last := kept[len(kept)-1]; last.Seq != seq || last.Hash != hash {
		t.Fatalf("the file witness's newest head = %d:%s; want %d:%s, published when the wrapper ended", last.Seq, last.Hash, seq, hash)
	}
	if code, stdout, stderr := runCLI(t, "", "audit", "verify", "--witness", heads, "--state", state); code != 0 {
		t.Fatalf("audit verify --witness FILE = exit %d, %q, %q", code, stdout, stderr)
	}
}
