package metrics_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/mcpgw"
	"github.com/portcullis/portcullis/memstore"
	"github.com/portcullis/portcullis/metrics"
	"github.com/portcullis/portcullis/policy"
)

// The metrics are the MCP gateway's observer too.
var _ mcpgw.Observer = (*metrics.Metrics)(nil)

const testPolicy = `
version: 1
tools:
  list_elements:  {endpoint: READ}
  delete_element: {endpoint: DELETE, canBeElevated: false}
  send_email:     {endpoint: CREATE, risk: external-write}
  edit_element:   {endpoint: UPDATE}
validator:
  provider: command
  command: [unused]
  rules: ./rules.md
elements:
  - name: Guard
    type: persona
    active: true
    gatekeeper: {deny: [edit_element]}
`

// model is the fake language model: it allows, or fails closed.
type model struct{ fail, overBudget bool }

func (m model) Validate(_ context.Context, _ portcullis.ValidationRequest) (portcullis.Verdict, error) {
	if m.overBudget {
		return portcullis.Verdict{FailClosed: true, OverBudget: true, Reasoning: "the validator's budget for agent \"a\" is spent", Provider: "fake", Model: "m"}, nil
	}
	if m.fail {
		return portcullis.Verdict{FailClosed: true, Reasoning: "timeout", Provider: "fake", Model: "m", Latency: time.Second}, nil
	}
	return portcullis.Verdict{Allow: true, Reasoning: "ok", Provider: "fake", Model: "m", Latency: 20 * time.Millisecond, Cached: true}, nil
}

// brokenBlocks is a store whose block table cannot be read.
type brokenBlocks struct{ *memstore.Store }

func (brokenBlocks) Block(context.Context, string) (portcullis.Block, bool, error) {
	return portcullis.Block{}, false, errors.New("disk I/O error")
}

func scrape(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics = %d: %s", resp.StatusCode, b)
	}
	return string(b)
}

func TestScrapeAfterDecisions(t *testing.T) {
	ctx := context.Background()
	pol, _, err := policy.Parse("policy.yaml", []byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	mem := memstore.New(nil)
	m := metrics.New(metrics.Options{State: mem})
	st := m.Store(mem)
	g, err := gate.New(pol, gate.WithStore(st), gate.WithObserver(m), gate.WithValidator(model{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []portcullis.Call{
		{Tool: "list_elements", Session: "s1", Agent: "a"},
		{Tool: "list_elements", Session: "s1", Agent: "a"},
		{Tool: "edit_element", Session: "s1", Agent: "a"},
		{Tool: "delete_element", Session: "s1", Agent: "a"},
		{Tool: "send_email", Session: "s1", Agent: "a", Args: map[string]any{"to": "x"}},
		{Tool: "invented_one", Session: "s1", Agent: "a"},
		{Tool: "invented_two", Session: "s1", Agent: "a"},
	} {
		if _, err := g.Decide(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	// Explanations decide nothing and are not counted.
	if _, err := g.Explain(ctx, portcullis.Call{Tool: "list_elements"}); err != nil {
		t.Fatal(err)
	}
	// A validator that cannot answer.
	g2, err := gate.New(pol, gate.WithObserver(m), gate.WithValidator(model{fail: true}))
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := g2.Decide(ctx, portcullis.Call{Tool: "send_email", Args: map[string]any{"to": "y"}}); !d.FailClosed {
		t.Fatalf("Decide(send_email) with a failing validator = %+v; want fail closed", d)
	}
	// A validator whose budget for the agent is spent.
	g4, err := gate.New(pol, gate.WithObserver(m), gate.WithValidator(model{overBudget: true}))
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := g4.Decide(ctx, portcullis.Call{Tool: "send_email", Agent: "a", Args: map[string]any{"to": "z"}}); !d.FailClosed {
		t.Fatalf("Decide(send_email) over the validator's budget = %+v; want fail closed", d)
	}
	// A store that fails: the decision fails closed and the error counts.
	g3, err := gate.New(pol, gate.WithStore(m.Store(brokenBlocks{memstore.New(nil)})), gate.WithObserver(m))
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := g3.Decide(ctx, portcullis.Call{Tool: "list_elements", Agent: "a"}); d.Outcome != portcullis.OutcomeStop {
		t.Fatalf("Decide with a broken store = %s; want stop", d.Outcome)
	}
	if err := mem.PutBlock(ctx, portcullis.Block{Agent: "b", Reason: "test", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	// The MCP gateway's events.
	m.UpstreamCall(ctx, "notes", "read_note", 30*time.Millisecond, false, nil)
	m.UpstreamCall(ctx, "notes", "read_note", 0, false, errors.New("upstream down"))
	m.UpstreamRestart("notes", io.EOF)
	m.ApprovalWait("write_note", "approved", 3*time.Second)
	_, end := m.StartCall(ctx, "read_note", "s", "a")
	end("forwarded", nil)
	m.PolicyReloadFailed()
	m.PolicyLoaded(time.Now(), true)

	body := scrape(t, m.Handler())
	for _, want := range []string{
		`portcullis_decisions_total{code="",level="AUTO_APPROVE",outcome="allow",stage="elements",tool="list_elements"} 2`,
		`portcullis_decisions_total{code="ELEMENT_POLICY_VIOLATION",level="DENY",outcome="deny",stage="elements",tool="edit_element"} 1`,
		`portcullis_decisions_total{code="CONFIRMATION_REQUIRED",level="CONFIRM_SINGLE_USE",outcome="confirm",stage="confirmation",tool="delete_element"} 1`,
		`portcullis_decisions_total{code="CONFIRMATION_REQUIRED",level="CONFIRM_SINGLE_USE",outcome="confirm",stage="confirmation",tool="other"} 2`,
		`portcullis_decisions_total{code="CONFIRMATION_REQUIRED",level="CONFIRM_SESSION",outcome="confirm",stage="confirmation",tool="send_email"} 1`,
		`portcullis_decisions_total{code="FAIL_CLOSED",level="DENY",outcome="deny",stage="validator",tool="send_email"} 2`,
		`portcullis_decisions_total{code="DANGER_ZONE",level="DENY",outcome="stop",stage="danger_zone",tool="list_elements"} 1`,
		`portcullis_decision_duration_seconds_count{outcome="allow"} 2`,
		`portcullis_stage_duration_seconds_count{stage="route"} 9`,
		`portcullis_stage_duration_seconds_count{stage="audit"} 8`,
		`portcullis_stage_duration_seconds_count{stage="validator"} 3`,
		`portcullis_validator_calls_total{cached="true",fail_closed="false",provider="fake",verdict="allow"} 1`,
		`portcullis_validator_calls_total{cached="false",fail_closed="true",provider="fake",verdict="deny"} 2`,
		`portcullis_validator_budget_refusals_total{provider="fake"} 1`,
		`portcullis_validator_duration_seconds_count{cached="true",provider="fake"} 1`,
		`portcullis_approvals_pending 4`,
		`portcullis_blocks_active 1`,
		`portcullis_store_up 1`,
		`portcullis_store_errors_total{op="block"} 1`,
		`portcullis_store_operation_duration_seconds_count{op="append_audit"} 8`,
		`portcullis_upstream_calls_total{result="ok",upstream="notes"} 1`,
		`portcullis_upstream_calls_total{result="error",upstream="notes"} 1`,
		`portcullis_upstream_errors_total{upstream="notes"} 1`,
		`portcullis_upstream_call_duration_seconds_count{upstream="notes"} 1`,
		`portcullis_upstream_restarts_total{upstream="notes"} 1`,
		`portcullis_approval_wait_seconds_count{result="approved"} 1`,
		`portcullis_mcp_calls_total{result="forwarded"} 1`,
		`portcullis_policy_reload_failures_total 1`,
		`portcullis_policy_reloads_total 1`,
		`go_goroutines `,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the scrape has no line %q", want)
		}
	}
	for _, never := range []string{"invented_one", "invented_two", `to="`, "s1"} {
		if strings.Contains(body, never) {
			t.Errorf("the scrape contains %q; labels must be bounded and never carry arguments or sessions", never)
		}
	}
	if n := strings.Count(body, "\nportcullis_decisions_total{"); n != 7 {
		t.Errorf("the scrape has %d decision series; want 7 (explanations are not counted):\n%s", n, body)
	}
}

func TestScrapeWithStoreDown(t *testing.T) {
	mem := memstore.New(nil)
	m := metrics.New(metrics.Options{State: closedState{mem}})
	body := scrape(t, m.Handler())
	if !strings.Contains(body, "portcullis_store_up 0") {
		t.Errorf("a scrape that cannot read the store must say so; got:\n%s", body)
	}
	if strings.Contains(body, "portcullis_approvals_pending ") {
		t.Error("a scrape that cannot read the store reported pending approvals")
	}
}

type closedState struct{ *memstore.Store }

func (closedState) Approvals(context.Context, portcullis.ApprovalFilter) ([]portcullis.Approval, error) {
	return nil, errors.New("connection refused")
}

// Budgets are exported by budget name only: their use at scrape time, and
// what the store wrapper saw taken and refused.
func TestBudgetMetrics(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New(nil)
	m := metrics.New(metrics.Options{State: mem})
	st := m.Store(mem)
	now := time.Now()
	start, end := portcullis.WindowOf(now, time.Hour)
	c := portcullis.BudgetCharge{Budget: "email-rate", Agent: "secret-agent", Start: start, End: end, Limit: portcullis.Units(2), Cost: portcullis.Units(1)}
	for range 3 {
		if _, err := st.TakeBudget(ctx, []portcullis.BudgetCharge{c}, portcullis.BudgetTakeIfFits, now); err != nil {
			t.Fatal(err)
		}
	}
	body := scrape(t, m.Handler())
	for _, want := range []string{
		`portcullis_budget_used{budget="email-rate"} 2`,
		`portcullis_budget_limit{budget="email-rate"} 2`,
		`portcullis_budget_counters{budget="email-rate"} 1`,
		`portcullis_budget_taken_total{budget="email-rate"} 2`,
		`portcullis_budget_refusals_total{budget="email-rate"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the scrape has no line %q", want)
		}
	}
	if strings.Contains(body, "secret-agent") {
		t.Error("budget metrics carry an agent name; labels must be bounded to budget names")
	}
}
