package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/memstore"
	"github.com/portcullis/portcullis/metrics"
	"github.com/portcullis/portcullis/policy"
)

const reloadAllow = `version: 1
tools:
  read_note:  {endpoint: READ}
  write_note: {endpoint: UPDATE}
`

const reloadDeny = `version: 1
tools:
  read_note:  {endpoint: READ}
  write_note: {endpoint: UPDATE}
elements:
  - name: Lockdown
    type: persona
    active: true
    gatekeeper: {deny: [read_note]}
`

type reloadFixture struct {
	path string
	gate *gate.Gate
	st   *memstore.Store
	m    *metrics.Metrics
	w    *PolicyWatcher
	logs *bytes.Buffer
	// calls counts decisions (the session of each).
	calls int
}

func newReloadFixture(t *testing.T) *reloadFixture {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policy.yaml")
	replacePolicy(t, path, reloadAllow)
	st := memstore.New(nil)
	pol, _, err := policy.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	g, err := gate.New(pol, gate.WithStore(st))
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New(metrics.Options{})
	logs := &bytes.Buffer{}
	w := NewPolicyWatcher(path, g, st, slog.New(slog.NewTextHandler(logs, nil)), m)
	return &reloadFixture{path: path, gate: g, st: st, m: m, w: w, logs: logs}
}

func replacePolicy(t *testing.T, path, src string) {
	t.Helper()
	// Written to a temporary file and renamed over, as editors and
	// configuration managers do.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func (f *reloadFixture) outcome(t *testing.T) portcullis.Outcome {
	t.Helper()
	// A new session each time, so the retry guard never turns a repeated
	// denial into a stop.
	f.calls++
	d, err := f.gate.Decide(context.Background(), portcullis.Call{Tool: "read_note", Session: fmt.Sprint("s", f.calls), Agent: "a"})
	if err != nil {
		t.Fatal(err)
	}
	return d.Outcome
}

func (f *reloadFixture) scrape(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(f.m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (f *reloadFixture) policyRows(t *testing.T) []string {
	t.Helper()
	recs, err := f.st.QueryAudit(context.Background(), portcullis.AuditQuery{Kind: portcullis.AuditPolicy})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range recs {
		ev, err := r.Event()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev.Detail)
	}
	return out
}

func TestReloadPutsANewPolicyInForce(t *testing.T) {
	f := newReloadFixture(t)
	ctx := context.Background()
	if got := f.outcome(t); got != portcullis.OutcomeAllow {
		t.Fatalf("read_note under the first policy = %s; want allow", got)
	}
	if f.w.check(ctx) {
		t.Fatal("check reloaded an unchanged file")
	}
	first := f.gate.Policy().Hash
	replacePolicy(t, f.path, reloadDeny)
	if !f.w.check(ctx) {
		t.Fatalf("check did not reload the changed file; logs:\n%s", f.logs)
	}
	if got := f.outcome(t); got != portcullis.OutcomeDeny {
		t.Fatalf("read_note after the reload = %s; want deny", got)
	}
	if f.gate.Policy().Hash == first {
		t.Fatal("the policy hash did not change")
	}
	// Decisions record the new policy's hash.
	recs, err := f.st.QueryAudit(ctx, portcullis.AuditQuery{Kind: portcullis.AuditDecision, Newest: true, Limit: 1})
	if err != nil || len(recs) != 1 {
		t.Fatal(recs, err)
	}
	ev, err := recs[0].Event()
	if err != nil {
		t.Fatal(err)
	}
	if ev.PolicyHash != f.gate.Policy().Hash {
		t.Errorf("decision recorded policy %s; want %s", ev.PolicyHash, f.gate.Policy().Hash)
	}
	rows := f.policyRows(t)
	if len(rows) != 1 || !strings.HasPrefix(rows[0], "reloaded ") {
		t.Errorf("policy audit rows = %q; want one reload", rows)
	}
	if body := f.scrape(t); !strings.Contains(body, "portcullis_policy_reloads_total 1") {
		t.Errorf("reloads not counted:\n%s", body)
	}
}

func TestReloadRejectsABrokenPolicyAndKeepsTheLastGoodOne(t *testing.T) {
	f := newReloadFixture(t)
	ctx := context.Background()
	replacePolicy(t, f.path, reloadDeny)
	if !f.w.check(ctx) {
		t.Fatal("no reload")
	}
	good := f.gate.Policy().Hash
	for name, src := range map[string]string{
		"syntax":          "version: 1\ntools: [\n",
		"unknown level":   "version: 1\ntools:\n  read_note: {endpoint: READ, defaultLevel: MAYBE}\n",
		"validator added": reloadAllow + "validator:\n  provider: command\n  command: [true]\n  rules: ./rules.md\n",
		"empty":           "",
	} {
		t.Run(name, func(t *testing.T) {
			rows := len(f.policyRows(t))
			replacePolicy(t, f.path, src)
			if f.w.check(ctx) {
				t.Fatalf("check put a broken policy (%s) in force", name)
			}
			if got := f.outcome(t); got != portcullis.OutcomeDeny {
				t.Fatalf("read_note after a rejected reload = %s; want deny (the last good policy)", got)
			}
			if f.gate.Policy().Hash != good {
				t.Fatal("the policy in force changed")
			}
			if f.w.Problem() == "" {
				t.Error("the watcher does not say why the file's version is not in force (the console's banner)")
			}
			// Judged once: the same broken file is not rejected again
			// every second.
			f.w.check(ctx)
			if got := f.policyRows(t); len(got) != rows+1 || !strings.HasPrefix(got[len(got)-1], "rejected ") {
				t.Errorf("policy audit rows = %q; want one more rejection", got)
			}
		})
	}
	if body := f.scrape(t); !strings.Contains(body, "portcullis_policy_reload_failures_total 4") {
		t.Errorf("failures not counted once each:\n%s", body)
	}
	if !strings.Contains(f.logs.String(), "level=ERROR msg=\"policy reload rejected; the last good policy stays in force\"") {
		t.Errorf("no error log for the rejections:\n%s", f.logs)
	}
	// Fixed: the next good version goes in force.
	replacePolicy(t, f.path, reloadAllow)
	if !f.w.check(ctx) {
		t.Fatal("a fixed policy was not reloaded")
	}
	if got := f.outcome(t); got != portcullis.OutcomeAllow {
		t.Fatalf("read_note after the fix = %s; want allow", got)
	}
	if p := f.w.Problem(); p != "" {
		t.Errorf("after a good reload the watcher still reports %q", p)
	}
}

func TestReloadToleratesAMomentarilyMissingFile(t *testing.T) {
	f := newReloadFixture(t)
	ctx := context.Background()
	if err := os.Remove(f.path); err != nil {
		t.Fatal(err)
	}
	f.w.check(ctx)
	if rows := f.policyRows(t); len(rows) != 0 {
		t.Fatalf("a file missing for one look was rejected: %q", rows)
	}
	f.w.check(ctx)
	if rows := f.policyRows(t); len(rows) != 1 || !strings.Contains(rows[0], "no such file") {
		t.Fatalf("a file missing for two looks: rows %q; want one rejection", rows)
	}
	if got := f.outcome(t); got != portcullis.OutcomeAllow {
		t.Fatalf("read_note with the file gone = %s; want allow (the last good policy)", got)
	}
}

// TestWatcherReloadsUnderARunningGate runs the watcher's loop and changes
// the file under it while decisions go on.
func TestWatcherReloadsUnderARunningGate(t *testing.T) {
	f := newReloadFixture(t)
	f.w.every = 10 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.w.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	loaded := f.w.LoadedAt()
	replacePolicy(t, f.path, reloadDeny)
	deadline := time.Now().Add(10 * time.Second)
	for f.outcome(t) != portcullis.OutcomeDeny {
		if time.Now().After(deadline) {
			t.Fatalf("the watcher did not reload; logs:\n%s", f.logs)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !f.w.LoadedAt().After(loaded) {
		t.Error("LoadedAt did not move with the reload")
	}
}
