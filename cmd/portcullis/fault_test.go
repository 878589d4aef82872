package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/loadgen"
	"github.com/portcullis/portcullis/postgres"
	"github.com/portcullis/portcullis/sqlite"
	"github.com/portcullis/portcullis/validator/providers"
	"github.com/portcullis/portcullis/validator/remote/remotetest"
)

// checkAudit opens the gateway's SQLite store and checks the run against
// its audit log: every decision answered has its row, the chain verifies.
func checkAuditSQLite(t *testing.T, g *loadGateway, rep *loadgen.Report) *loadgen.AuditCheck {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(g.dir, "state", "portcullis.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c, err := rep.CheckAudit(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Complete() || c.Found == 0 {
		t.Fatalf("audit after the run = %+v; want every answered decision found and the chain verified", c)
	}
	return c
}

// answeredAfter counts the calls answered (allowed) that started after t0.
func answeredAfter(rep *loadgen.Report, t0 time.Time, via loadgen.Via) int {
	n := 0
	for _, a := range rep.Answers {
		if a.Via == via && a.Start.After(t0) && a.Outcome == portcullis.OutcomeAllow {
			n++
		}
	}
	return n
}

// TestFaultGatewayKilledMidLoad kills `portcullis serve` with SIGKILL
// while agents call it through the decision API and MCP, and starts it
// again on the same state and address: every decision an agent was
// answered has its audit row, the chain verifies, the upstream never
// received a call the policy denies, and both entry points serve again.
func TestFaultGatewayKilledMidLoad(t *testing.T) {
	needFaults(t)
	g := newLoadGateway(t, "", loadPolicy)
	g.start(t, "127.0.0.1:0")
	addr := g.url[len("http://"):]
	snaps, stop := runLoad(t, g.loadConfig(t))
	before := waitFor(t, snaps, "200 answered calls", func(s loadgen.Snapshot) bool { return s.Answered >= 200 })

	g.kill(t)
	waitFor(t, snaps, "calls to fail while the gateway is down", func(s loadgen.Snapshot) bool { return s.Failed > before.Failed })
	restarted := time.Now()
	g.start(t, addr)
	after := waitFor(t, snaps, "calls answered after the restart", func(s loadgen.Snapshot) bool { return s.Answered >= before.Answered+300 })
	rep := stop()
	g.stop()

	checkAnswers(t, rep)
	g.checkNothingRefusedForwarded(t)
	c := checkAuditSQLite(t, g, rep)
	for _, via := range []loadgen.Via{loadgen.API, loadgen.MCP} {
		if answeredAfter(rep, restarted, via) == 0 {
			t.Errorf("no %s call was allowed after the restart", via)
		}
	}
	t.Logf("%d calls, %d answered (%d before the kill, %d at the end), %d unanswered; audit: %d decisions found, %d MCP calls forwarded, %d rows",
		rep.Calls, rep.Answered, before.Answered, after.Answered, rep.Overall.Failed, c.Found, c.MCPAllowed, c.Rows)
}

// TestFaultUpstreamKilledMidLoad kills the upstream MCP server under the
// gateway with SIGKILL while agents call it: the calls it can no longer
// answer get error results (never a pass around the gate), the gateway
// starts it again, and calls are forwarded again.
func TestFaultUpstreamKilledMidLoad(t *testing.T) {
	needFaults(t)
	g := newLoadGateway(t, "", loadPolicy)
	g.start(t, "127.0.0.1:0")
	snaps, stop := runLoad(t, g.loadConfig(t))
	before := waitFor(t, snaps, "200 answered calls", func(s loadgen.Snapshot) bool { return s.Answered >= 200 })
	_, pids := g.upstreamCalls(t)
	if len(pids) != 1 {
		t.Fatalf("the upstream started %d times before the kill; want once", len(pids))
	}
	killed := time.Now()
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, snaps, "an MCP call to get an error result", func(s loadgen.Snapshot) bool { return s.Errors > before.Errors })
	waitFor(t, snaps, "the gateway to start the upstream again", func(loadgen.Snapshot) bool {
		_, pids := g.upstreamCalls(t)
		return len(pids) >= 2
	})
	restarted := time.Now()
	waitFor(t, snaps, "calls allowed after the upstream's restart", func(s loadgen.Snapshot) bool { return s.Allowed >= before.Allowed+300 })
	rep := stop()
	g.stop()

	checkAnswers(t, rep)
	g.checkNothingRefusedForwarded(t)
	checkAuditSQLite(t, g, rep)
	errs := 0
	for _, a := range rep.Answers {
		if a.Outcome == loadgen.OutcomeError {
			errs++
			if a.Start.Add(a.Latency).Before(killed) {
				t.Errorf("an error result before the upstream was killed: %s %s: %s", a.Via, a.Tool, a.Err)
			}
		}
	}
	if answeredAfter(rep, restarted, loadgen.MCP) == 0 {
		t.Error("no MCP call was forwarded after the upstream's restart")
	}
	t.Logf("%d calls, %d answered, %d MCP error results while the upstream was down", rep.Calls, rep.Answered, errs)
}

// TestFaultPostgresRestartedMidLoad stops the gateway's PostgreSQL (a
// private cluster) under load and starts it again: every decision in the
// outage is a fail-closed refusal, never an allow; every decision answered
// has its audit row, except refusals that said their row could not be
// written; decisions are allowed again once the database is back.
func TestFaultPostgresRestartedMidLoad(t *testing.T) {
	needFaults(t)
	c := newPrivateCluster(t)
	dsn := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=2", c.port)
	g := newLoadGateway(t, dsn, loadPolicy)
	g.start(t, "127.0.0.1:0")
	snaps, stop := runLoad(t, g.loadConfig(t))
	before := waitFor(t, snaps, "200 answered calls", func(s loadgen.Snapshot) bool { return s.Answered >= 200 })

	c.stop()
	down := waitFor(t, snaps, "fail-closed refusals during the outage", func(s loadgen.Snapshot) bool { return s.FailClosed >= before.FailClosed+20 })
	c.start()
	restarted := time.Now()
	waitFor(t, snaps, "calls allowed after the restart", func(s loadgen.Snapshot) bool { return s.Allowed >= down.Allowed+300 })
	rep := stop()
	g.stop()

	checkAnswers(t, rep)
	g.checkNothingRefusedForwarded(t)
	for _, a := range rep.Answers {
		if a.FailClosed && a.Outcome == portcullis.OutcomeAllow {
			t.Errorf("a fail-closed allow: %+v", a)
		}
	}
	st, err := postgres.Open(context.Background(), dsn, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ac, err := rep.CheckAudit(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	if !ac.Complete() {
		for _, a := range rep.Answers {
			for _, d := range a.Decisions {
				if slices.Contains(ac.Missing, d.DecisionID) {
					t.Logf("missing: %s %s %s: %+v", a.Via, a.Kind, a.Outcome, d)
				}
			}
		}
		t.Fatalf("audit after the outage = %+v; want every answered decision found (or declared unrecorded) and the chain verified", ac)
	}
	for _, via := range []loadgen.Via{loadgen.API, loadgen.MCP} {
		if answeredAfter(rep, restarted, via) == 0 {
			t.Errorf("no %s call was allowed after PostgreSQL came back", via)
		}
	}
	t.Logf("%d calls, %d answered, %d fail-closed; audit: %d found, %d refusals said they were not recorded, %d rows",
		rep.Calls, rep.Answered, rep.Overall.FailClosed, ac.Found, ac.Unrecorded, ac.Rows)
}

// fakeOpenAI is an OpenAI-compatible chat completions server whose answer
// is an allow verdict, at once or — while hang is set — only after the
// caller has given up.
type fakeOpenAI struct {
	hang     atomic.Bool
	requests atomic.Int64
}

func (f *fakeOpenAI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
	io.Copy(io.Discard, r.Body)
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, `{"error":{"message":"not found","type":"invalid_request_error"}}`, http.StatusNotFound)
		return
	}
	if f.hang.Load() {
		select {
		case <-r.Context().Done():
			return
		case <-time.After(30 * time.Second):
		}
	}
	verdict, _ := json.Marshal(`{"verdict":"allow","reasoning":"sending a note is within the rules","whatWouldAuthorize":"","confidence":0.9}`)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1741570283,"model":"gpt-test",`+
		`"choices":[{"index":0,"message":{"role":"assistant","content":`+string(verdict)+`,"refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],`+
		`"usage":{"prompt_tokens":412,"completion_tokens":40,"total_tokens":452}}`)
}

// TestFaultValidatorTimesOutMidLoad makes the validator's provider (an
// OpenAI-compatible server) stop answering in time while agents send notes
// the validator must judge: every such call decided while it hangs is a
// fail-closed refusal, none reaches the upstream, and the validator's
// allows come back once the provider answers again.
func TestFaultValidatorTimesOutMidLoad(t *testing.T) {
	needFaults(t)
	t.Setenv(providers.ProgramEnv, remotetest.Build(t, t.TempDir()))
	fake := &fakeOpenAI{}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	pol := strings.Replace(loadPolicy, "approvals:", `  send_note:   {endpoint: CREATE, risk: external-write, defaultLevel: AUTO_APPROVE}
validator:
  provider: openai
  model: gpt-test
  baseURL: `+srv.URL+`/v1
  timeout: 500ms
  rules: ./groundRules.md
  scope: {risks: [external-write]}
  # A load test: the one agent makes far more calls than a person's agent
  # would, so its budget of validator calls is raised out of the way.
  budget: {perMinute: 1000000, burst: 100000, concurrent: 1000}
approvals:`, 1)
	g := newLoadGateway(t, "", pol)
	if err := os.WriteFile(filepath.Join(g.dir, "groundRules.md"), []byte("Notes may be sent to the team.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g.start(t, "127.0.0.1:0")
	cfg := g.loadConfig(t)
	cfg.Mix = map[loadgen.Kind]int{loadgen.Read: 50, loadgen.Deny: 50}
	cfg.Tools.Deny = "send_note" // the validator's calls
	cfg.HumanToken = ""
	snaps, stop := runLoad(t, cfg)
	before := waitFor(t, snaps, "100 calls allowed with the provider answering", func(s loadgen.Snapshot) bool { return s.Allowed >= 100 })

	fake.hang.Store(true)
	hangAt := time.Now()
	waitFor(t, snaps, "fail-closed refusals while the provider hangs", func(s loadgen.Snapshot) bool { return s.FailClosed >= before.FailClosed+20 })
	restoreAt := time.Now()
	fake.hang.Store(false)
	hung := waitFor(t, snaps, "the load to go on", func(loadgen.Snapshot) bool { return true })
	waitFor(t, snaps, "the validator's allows to come back", func(s loadgen.Snapshot) bool { return s.Allowed >= hung.Allowed+200 })
	rep := stop()
	g.stop()

	judged, refused, allowedBefore, allowedAfter := 0, 0, 0, 0
	for _, a := range rep.Answers {
		if a.Tool != "send_note" || !a.Answered() {
			continue
		}
		end := a.Start.Add(a.Latency)
		switch {
		case a.Start.After(hangAt) && end.Before(restoreAt):
			// Decided entirely while the provider hung.
			judged++
			if a.Outcome == portcullis.OutcomeAllow || !a.FailClosed {
				t.Errorf("send_note while the provider hung = %s failClosed=%v; want a fail-closed refusal", a.Outcome, a.FailClosed)
			}
			refused++
		case end.Before(hangAt) && a.Outcome == portcullis.OutcomeAllow:
			allowedBefore++
		case a.Start.After(restoreAt) && a.Outcome == portcullis.OutcomeAllow:
			allowedAfter++
		}
	}
	if judged == 0 || allowedBefore == 0 || allowedAfter == 0 {
		for i, a := range rep.Answers {
			if a.Tool == "send_note" && i < 400 {
				t.Logf("%s %s %s %v %s %+v", a.Via, a.Outcome, a.Err, a.FailClosed, a.Start.Sub(hangAt), a.Decisions)
				break
			}
		}
		t.Fatalf("send_note: %d decided while the provider hung, %d allowed before, %d after; want some of each", judged, allowedBefore, allowedAfter)
	}
	calls, _ := g.upstreamCalls(t)
	sent := 0
	for _, c := range calls {
		if c.Tool == "send_note" {
			sent++
		}
	}
	mcpAllowed := 0
	for _, a := range rep.Answers {
		if a.Via == loadgen.MCP && a.Tool == "send_note" && a.Outcome == portcullis.OutcomeAllow {
			mcpAllowed++
		}
	}
	if sent > mcpAllowed {
		t.Errorf("the upstream received %d send_note calls; the gateway allowed %d", sent, mcpAllowed)
	}
	checkAuditSQLite(t, g, rep)
	t.Logf("%d provider requests; send_note: %d refused fail-closed while it hung, %d allowed before, %d after", fake.requests.Load(), refused, allowedBefore, allowedAfter)
}
