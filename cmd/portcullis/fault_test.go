package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/loadgen"
	"github.com/portcullis/portcullis/sqlite"
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
