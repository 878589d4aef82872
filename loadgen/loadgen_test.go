package loadgen_test

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/httpapi"
	"github.com/portcullis/portcullis/loadgen"
	"github.com/portcullis/portcullis/memstore"
	"github.com/portcullis/portcullis/policy"
	"github.com/portcullis/portcullis/sqlite"
)

const testPolicy = `version: 1
tools:
  read_note:   {endpoint: READ}
  write_note:  {endpoint: UPDATE, defaultLevel: CONFIRM_SESSION}
  delete_note: {endpoint: DELETE, defaultLevel: DENY}
  run_shell:   {endpoint: EXECUTE, shellArg: command}
`

const (
	agentToken = "agent-token-0123456789"
	humanToken = "human-token-0123456789abcdef"
)

// apiGateway serves the real decision and approvals API on a real gate
// with a memstore.
func apiGateway(t *testing.T) (string, *memstore.Store) {
	t.Helper()
	pol, _, err := policy.Parse("policy.yaml", []byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	st := memstore.New(nil)
	g, err := gate.New(pol, gate.WithStore(st))
	if err != nil {
		t.Fatal(err)
	}
	h, err := httpapi.New(httpapi.Options{
		Gate: g, Store: st, HumanToken: humanToken,
		AgentToken: func(tok string) (string, bool) { return "bot", tok == agentToken },
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL, st
}

func config(url string) loadgen.Config {
	return loadgen.Config{
		BaseURL: url, AgentToken: agentToken, HumanToken: humanToken,
		Via: []loadgen.Via{loadgen.API}, Sessions: 4, Count: 300,
		Mix:   map[loadgen.Kind]int{loadgen.Read: 5, loadgen.Write: 2, loadgen.Deny: 2, loadgen.Shell: 1},
		Tools: loadgen.Tools{Read: "read_note", Write: "write_note", Deny: "delete_note", Shell: "run_shell", ShellArg: "command"},
	}
}

func TestRunThroughTheDecisionAPI(t *testing.T) {
	url, st := apiGateway(t)
	rep, err := loadgen.Run(context.Background(), config(url))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Calls != 300 || rep.Answered != 300 {
		t.Fatalf("Run = %d calls, %d answered; want 300 of 300", rep.Calls, rep.Answered)
	}
	kinds := map[string]loadgen.Stats{}
	for _, s := range rep.Rows {
		if s.Via == "" {
			kinds[s.Kind] = s
		}
	}
	if s := kinds["read"]; s.Allow != s.Calls || s.Calls == 0 {
		t.Errorf("reads = %+v; want all allowed", s)
	}
	if s := kinds["deny"]; s.Deny != s.Calls || s.Calls == 0 {
		t.Errorf("denials = %+v; want all denied", s)
	}
	if s := kinds["write"]; s.Allow != s.Calls || s.Approved == 0 || s.Approved > 4 {
		t.Errorf("writes = %+v; want all allowed, one approval per session at most", s)
	}
	if s := kinds["shell"]; s.Allow == 0 || s.Allow+s.Deny != s.Calls {
		t.Errorf("shell = %+v; want safe commands allowed and blocked ones denied", s)
	}
	for _, a := range rep.Answers {
		if a.Kind == loadgen.Shell && strings.Contains(a.Args["command"].(string), "portcullis ") && a.Outcome != portcullis.OutcomeDeny {
			t.Errorf("%v = %s; want the blocked command denied", a.Args, a.Outcome)
		}
	}
	if rep.Overall.P50 <= 0 || rep.Overall.P99 < rep.Overall.P50 || rep.Overall.P999 < rep.Overall.P99 || rep.Overall.Max < rep.Overall.P999 {
		t.Errorf("percentiles = %+v; want 0 < p50 ≤ p99 ≤ p99.9 ≤ max", rep.Overall)
	}
	c, err := rep.CheckAudit(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Complete() || c.Found != c.Decisions || c.Found < 300 {
		t.Fatalf("CheckAudit = %+v; want every decision found and the chain verified", c)
	}
	var out strings.Builder
	if err := rep.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "audit: complete") {
		t.Errorf("table:\n%s\nwant the audit's verdict", out.String())
	}
}

// TestCheckAuditFindsMissingDecisions checks a run against another
// gateway's log: none of its decisions is there.
func TestCheckAuditFindsMissingDecisions(t *testing.T) {
	url, _ := apiGateway(t)
	cfg := config(url)
	cfg.Count = 20
	rep, err := loadgen.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := rep.CheckAudit(context.Background(), memstore.New(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Complete() || c.MissingCount < 20 || c.Found != 0 {
		t.Fatalf("CheckAudit against an empty log = %+v; want every decision missing", c)
	}
}

// TestUnansweredIsNeverAllowed runs against a port where nothing listens:
// every call failed, none counted as allowed.
func TestUnansweredIsNeverAllowed(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cfg := config("http://" + addr)
	cfg.Count, cfg.Duration, cfg.Via = 0, 300*time.Millisecond, []loadgen.Via{loadgen.API, loadgen.MCP}
	rep, err := loadgen.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Calls == 0 || rep.Answered != 0 || rep.Overall.Allow != 0 || rep.Overall.Failed != rep.Calls {
		t.Fatalf("against nothing: %+v; want every call failed, none allowed", rep.Overall)
	}
}

func TestConfigErrors(t *testing.T) {
	for name, mut := range map[string]func(*loadgen.Config){
		"no URL":             func(c *loadgen.Config) { c.BaseURL = "" },
		"no sessions":        func(c *loadgen.Config) { c.Sessions = 0 },
		"no bound":           func(c *loadgen.Config) { c.Count, c.Duration = 0, 0 },
		"writes, no person":  func(c *loadgen.Config) { c.HumanToken = "" },
		"shell, no tool":     func(c *loadgen.Config) { c.Tools.Shell = "" },
		"empty mix":          func(c *loadgen.Config) { c.Mix = nil },
		"no entry point":     func(c *loadgen.Config) { c.Via = nil },
		"negative weight":    func(c *loadgen.Config) { c.Mix[loadgen.Read] = -1 },
		"reads with no tool": func(c *loadgen.Config) { c.Tools.Read = "" },
	} {
		cfg := config("http://127.0.0.1:1")
		mut(&cfg)
		if _, err := loadgen.Run(context.Background(), cfg); err == nil {
			t.Errorf("%s: Run succeeded; want an error", name)
		}
	}
}

// TestCheckAuditChecksLookupTables: on SQLite, a run's audit check also
// checks the log's lookup tables, as `portcullis audit verify` does; an
// edited watermark, which hides rows from filtered queries, fails it.
func TestCheckAuditChecksLookupTables(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	st, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for i := range 3 {
		ev := portcullis.AuditEvent{Time: time.Now(), Kind: portcullis.AuditDecision, Session: "s1", Agent: "bot", Tool: "read_note", Outcome: portcullis.OutcomeAllow, DecisionID: fmt.Sprintf("dec_%d", i)}
		if _, err := st.AppendAudit(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	rep := &loadgen.Report{}
	if c, err := rep.CheckAudit(ctx, st); err != nil || !c.Verified {
		t.Fatalf("CheckAudit of an untouched log = %+v, %v; want it verified", c, err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE audit_indexed SET seq = 100 WHERE id = 1`); err != nil {
		t.Fatal(err)
	}
	c, err := rep.CheckAudit(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if c.Verified || c.Complete() || !strings.Contains(c.Problem, "lookup tables") {
		t.Fatalf("CheckAudit after the watermark was raised = %+v; want it not verified, naming the lookup tables", c)
	}
}
