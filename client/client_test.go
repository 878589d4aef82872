package client_test

import (
	"context"
	"errors"
	"net"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/client"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/httpapi"
	"github.com/portcullis/portcullis/internal/noticetest"
	"github.com/portcullis/portcullis/policy"
	"github.com/portcullis/portcullis/sqlite"
)

const testPolicy = `
version: 1
tools:
  list_elements:  {endpoint: READ}
  create_element: {endpoint: CREATE, defaultLevel: CONFIRM_SESSION}
  delete_element: {endpoint: DELETE, defaultLevel: CONFIRM_SINGLE_USE, canBeElevated: false}
elements:
  - name: team/bot
    type: agent
    autonomy: {riskTolerance: aggressive, maxAutonomousSteps: 50}
`

const (
	humanToken = "human-token-0123456789abcdef"
	botToken   = "agent-token-team-bot-0123456789"
)

// gateway starts a real gateway on 127.0.0.1 and returns an agent's
// client, a person's client, and the gate.
func gateway(t *testing.T) (agent, person *client.Client, g *gate.Gate, human *noticetest.Recorder) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "portcullis.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	pol, _, err := policy.Parse("policy.yaml", []byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	human = &noticetest.Recorder{}
	g, err = gate.New(pol, gate.WithStore(st), gate.WithNotifier(human))
	if err != nil {
		t.Fatal(err)
	}
	h, err := httpapi.New(httpapi.Options{
		Gate: g, Store: st, HumanToken: humanToken,
		AgentToken: func(tok string) (string, bool) { return "team/bot", tok == botToken },
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	agent, err = client.New(srv.URL, botToken)
	if err != nil {
		t.Fatal(err)
	}
	person, err = client.New(srv.URL+"/", humanToken, client.WithActor("ana"), client.WithHTTPClient(srv.Client()))
	if err != nil {
		t.Fatal(err)
	}
	return agent, person, g, human
}

func TestNew(t *testing.T) {
	for _, tc := range []struct{ url, token string }{
		{"127.0.0.1:8080", "t"},
		{"ftp://host", "t"},
		{"http://", "t"},
		{"http://127.0.0.1:8080", ""},
	} {
		if _, err := client.New(tc.url, tc.token); err == nil {
			t.Errorf("New(%q, %q) succeeded; want an error", tc.url, tc.token)
		}
	}
}

func TestDecideAndWait(t *testing.T) {
	ctx := context.Background()
	agent, person, _, _ := gateway(t)

	d, err := agent.Decide(ctx, portcullis.Call{Tool: "list_elements", Agent: "someone-else"})
	if err != nil || d.Outcome != portcullis.OutcomeAllow {
		t.Fatalf("Decide(list_elements) = %s, %v; want allow", d.Outcome, err)
	}
	_, err = agent.Decide(ctx, portcullis.Call{})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != 400 || portcullis.ErrorCode(err) != portcullis.CodeInvalidRequest {
		t.Fatalf("Decide(no tool) error = %v; want a 400 INVALID_REQUEST", err)
	}

	// Approved while the agent waits: the call is allowed.
	call := portcullis.Call{Tool: "delete_element", Session: "s1", Args: map[string]any{"name": "notes"}}
	d, err = agent.Decide(ctx, call)
	if err != nil || d.Outcome != portcullis.OutcomeConfirm {
		t.Fatalf("Decide(delete_element) = %s, %v; want confirm", d.Outcome, err)
	}
	if _, done, err := agent.Poll(ctx, d.DecisionID, 0); err != nil || done {
		t.Fatalf("Poll before an answer = done %v, %v; want pending", done, err)
	}
	got := make(chan error, 1)
	var final portcullis.Decision
	go func() {
		var err error
		final, err = agent.Wait(ctx, d.DecisionID)
		got <- err
	}()
	a, err := person.Approve(ctx, d.ChallengeID, false)
	if err != nil || a.Status != portcullis.ApprovalApproved || a.DecidedBy != "ana (token:human)" {
		t.Fatalf("Approve = %+v, %v; want approved by ana (token:human)", a, err)
	}
	if err := <-got; err != nil || final.Outcome != portcullis.OutcomeAllow {
		t.Fatalf("Wait = %s, %v; want allow", final.Outcome, err)
	}
	if _, err := person.Approve(ctx, d.ChallengeID, false); portcullis.ErrorCode(err) != portcullis.CodeConflict {
		t.Fatalf("Approve twice = %v; want CONFLICT", err)
	}

	// Denied: the agent gets the reason.
	d, err = agent.Decide(ctx, portcullis.Call{Tool: "delete_element", Session: "s1", Args: map[string]any{"name": "other"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := person.Deny(ctx, d.ChallengeID, "not today"); err != nil {
		t.Fatal(err)
	}
	final, err = agent.Wait(ctx, d.DecisionID)
	if err != nil || final.Outcome != portcullis.OutcomeDeny || !strings.Contains(final.Reason, "not today") {
		t.Fatalf("Wait after a denial = %s %q, %v; want deny with the reason", final.Outcome, final.Reason, err)
	}
	// A cancelled wait ends.
	d, err = agent.Decide(ctx, portcullis.Call{Tool: "delete_element", Args: map[string]any{"name": "third"}})
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := agent.Wait(short, d.DecisionID); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait with an ending context = %v; want DeadlineExceeded", err)
	}
}

func TestPeopleCalls(t *testing.T) {
	ctx := context.Background()
	agent, person, g, human := gateway(t)
	d, err := agent.Decide(ctx, portcullis.Call{Tool: "create_element", Session: "s1"})
	if err != nil || d.Outcome != portcullis.OutcomeConfirm {
		t.Fatalf("Decide = %s, %v", d.Outcome, err)
	}
	list, err := person.Approvals(ctx, portcullis.ApprovalFilter{Status: portcullis.ApprovalPending, DecisionID: d.DecisionID, Limit: 5})
	if err != nil || len(list) != 1 || list[0].ID != d.ChallengeID || list[0].Call.Agent != "team/bot" {
		t.Fatalf("Approvals = %+v, %v; want the one request of team/bot", list, err)
	}
	if a, err := person.Approval(ctx, d.ChallengeID); err != nil || a.Tool != "create_element" {
		t.Fatalf("Approval = %+v, %v", a, err)
	}
	if _, err := person.Approval(ctx, "apr_x/../../v1/grants"); portcullis.ErrorCode(err) != portcullis.CodeNotFound {
		t.Fatalf("Approval(an id with slashes) = %v; want NOT_FOUND", err)
	}
	if _, err := person.Approve(ctx, d.ChallengeID, true); err != nil {
		t.Fatal(err)
	}
	grants, err := person.Grants(ctx, "s1")
	if err != nil || len(grants) != 1 || grants[0].Kind != portcullis.GrantSession {
		t.Fatalf("Grants = %+v, %v; want one session grant", grants, err)
	}
	if err := person.RevokeGrant(ctx, grants[0].ID); err != nil {
		t.Fatal(err)
	}
	if err := person.RevokeGrant(ctx, grants[0].ID); portcullis.ErrorCode(err) != portcullis.CodeNotFound {
		t.Fatalf("RevokeGrant twice = %v; want NOT_FOUND", err)
	}

	// An agent whose name holds a slash is blocked and unblocked.
	if _, err := g.BlockAgent(ctx, "team/bot", "test", ""); err != nil {
		t.Fatal(err)
	}
	blocks, err := person.Blocks(ctx)
	if err != nil || len(blocks) != 1 || blocks[0].Agent != "team/bot" {
		t.Fatalf("Blocks = %+v, %v", blocks, err)
	}
	if err := person.Unblock(ctx, "team/bot", blocks[0].ChallengeID, "WRONG1"); portcullis.ErrorCode(err) != portcullis.CodeVerificationFailed {
		t.Fatalf("Unblock with a wrong code = %v; want VERIFICATION_FAILED", err)
	}
	codes := human.Codes()
	if len(codes) == 0 {
		t.Fatal("no verification code was sent to the human channel")
	}
	code := codes[len(codes)-1]
	if err := person.Unblock(ctx, "team/bot", blocks[0].ChallengeID, code); err != nil {
		t.Fatalf("Unblock with the code = %v", err)
	}

	// The agent's token is refused on the people's calls; a wrong token
	// everywhere.
	if _, err := agent.Approvals(ctx, portcullis.ApprovalFilter{}); portcullis.ErrorCode(err) != "FORBIDDEN" {
		t.Fatalf("Approvals with an agent token = %v; want FORBIDDEN", err)
	}
	if _, err := person.Decide(ctx, portcullis.Call{Tool: "list_elements"}); portcullis.ErrorCode(err) != "FORBIDDEN" {
		t.Fatalf("Decide with the human token = %v; want FORBIDDEN", err)
	}
}

func TestReportOutcome(t *testing.T) {
	ctx := context.Background()
	agent, _, _, _ := gateway(t)
	step := portcullis.Call{Tool: "list_elements", Run: &portcullis.Run{ID: "r1"}}
	if d, err := agent.Decide(ctx, step); err != nil || d.Outcome != portcullis.OutcomeAllow {
		t.Fatalf("step = %s, %v", d.Outcome, err)
	}
	if err := agent.ReportOutcome(ctx, "r1", portcullis.StepFailure); err != nil {
		t.Fatal(err)
	}
	if err := agent.ReportOutcome(ctx, "r2", portcullis.StepFailure); portcullis.ErrorCode(err) != portcullis.CodeNotFound {
		t.Fatalf("ReportOutcome(unknown run) = %v; want NOT_FOUND", err)
	}
	if d, err := agent.Decide(ctx, step); err != nil || d.Code != portcullis.CodeAutonomyPause {
		t.Fatalf("the step after a failure = %s/%s, %v; want AUTONOMY_PAUSE", d.Outcome, d.Code, err)
	}
}

func TestGatewayDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	c, err := client.New("http://"+addr, botToken)
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.Decide(context.Background(), portcullis.Call{Tool: "list_elements"})
	if err == nil || d.Allowed() {
		t.Fatalf("Decide with no gateway = %s, %v; want an error and no allow", d.Outcome, err)
	}
	var ue *client.UnreachableError
	if !errors.As(err, &ue) || ue.Gateway != "http://"+addr || ue.Err == nil {
		t.Fatalf("Decide with no gateway = %v; want an *UnreachableError naming http://%s and the cause", err, addr)
	}
	// A gateway that answers, even with an error, is reachable.
	_, person, _, _ := gateway(t)
	if _, err := person.Approval(context.Background(), "apr_nope"); errors.As(err, &ue) || portcullis.ErrorCode(err) != portcullis.CodeNotFound {
		t.Fatalf("Approval(unknown) = %v; want NOT_FOUND and no UnreachableError", err)
	}
}
