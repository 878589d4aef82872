// Package replaytest records a real audit log for the tests and benchmarks
// of policy replay: a real gate deciding a fixed series of calls into a
// SQLite store. It is imported by tests only.
package replaytest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/policy"
	"github.com/portcullis/portcullis/sqlite"
)

// Policy is the policy in force when Record writes its audit log.
const Policy = `
version: 1
tools:
  list_items:  {endpoint: READ}
  create_item: {endpoint: CREATE}
  edit_item:   {endpoint: UPDATE}
  delete_item: {endpoint: DELETE}
  login:       {endpoint: UPDATE, redact: [password]}
  Bash:        {endpoint: EXECUTE, shellArg: command}
  send_email:  {endpoint: CREATE, risk: external-write}
  run_sql:     {endpoint: UPDATE, summary: "{{.q}}"}
elements:
  - name: Security Persona
    type: persona
    gatekeeper:
      confirm: [create_item]
      deny: [delete_*]
  - name: Mailer
    type: skill
    gatekeeper:
      allow: [send_email, edit_item]
  - name: Sandbox
    type: ensemble
    active: false
    gatekeeper:
      deny: [edit_item]
  - name: bot
    type: agent
    autonomy: {riskTolerance: aggressive, maxAutonomousSteps: 3}
validator:
  provider: command
  command: [judge]
`

// Record records an audit log with a real gate and a SQLite store, and
// returns its state directory and policy file. Its rows:
//
//	1 list_items            allow
//	2 create_item s1        confirm (approval request)
//	3 (a person approves it for the session: a human-action row)
//	4 create_item s1        allow by the session grant
//	5 delete_item s1        deny (Security Persona)
//	6 delete_item s1        stop (retry guard: the same denied call again)
//	7 Bash ls               allow (safe command)
//	8 Bash rm -r            confirm CONFIRM_SINGLE_USE (moderate)
//	9 send_email friend     allow (validator allowed)
//	10 send_email evil      deny (validator denied)
//	11 login password       confirm CONFIRM_SINGLE_USE (password redacted in the log)
//	12-15 edit_item run r1  allow ×3, confirm (AUTONOMY_PAUSE: 3 steps taken of 3)
//	16 run_sql run r2       stop: DROP TABLE is in the danger zone (bot blocked)
//	17 list_items bot       stop: bot is blocked (danger zone, not replayed)
//	18 read_text (MCP)      allow: pinned readOnlyHint annotation of upstream "fs"
//	19 ghost (MCP)          deny: no upstream offers it
//	20 edit_item trusted    deny: the request made Sandbox the only active element
func Record(t testing.TB) (stateDir, policyPath string) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	stateDir = filepath.Join(dir, "state")
	policyPath = filepath.Join(dir, "old.yaml")
	if err := os.WriteFile(policyPath, []byte(Policy), 0o600); err != nil {
		t.Fatal(err)
	}
	pol, _, err := policy.Load(policyPath)
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(ctx, filepath.Join(stateDir, "portcullis.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	g, err := gate.New(pol, gate.WithStore(st), gate.WithValidator(MailValidator{}))
	if err != nil {
		t.Fatal(err)
	}
	trusted, err := gate.New(pol, gate.WithStore(st), gate.WithValidator(MailValidator{}), gate.WithRequestOverrides())
	if err != nil {
		t.Fatal(err)
	}
	decide := func(g *gate.Gate, c portcullis.Call, want portcullis.Outcome) portcullis.Decision {
		t.Helper()
		d, err := g.Decide(ctx, c)
		if err != nil || d.Outcome != want {
			t.Fatalf("Decide(%s) = %s (%s), %v; want %s", c.Tool, d.Outcome, d.Reason, err, want)
		}
		return d
	}
	bash := func(cmd string) map[string]any { return map[string]any{"command": cmd} }
	decide(g, portcullis.Call{Tool: "list_items", Session: "s1"}, portcullis.OutcomeAllow)
	d := decide(g, portcullis.Call{Tool: "create_item", Session: "s1"}, portcullis.OutcomeConfirm)
	if _, err := g.Approve(ctx, d.ChallengeID, "alice", true); err != nil {
		t.Fatal(err)
	}
	decide(g, portcullis.Call{Tool: "create_item", Session: "s1"}, portcullis.OutcomeAllow)
	decide(g, portcullis.Call{Tool: "delete_item", Session: "s1", Args: map[string]any{"id": "7"}}, portcullis.OutcomeDeny)
	decide(g, portcullis.Call{Tool: "delete_item", Session: "s1", Args: map[string]any{"id": "7"}}, portcullis.OutcomeStop)
	decide(g, portcullis.Call{Tool: "Bash", Session: "s1", Args: bash("ls -l")}, portcullis.OutcomeAllow)
	decide(g, portcullis.Call{Tool: "Bash", Session: "s1", Args: bash("rm -r build")}, portcullis.OutcomeConfirm)
	decide(g, portcullis.Call{Tool: "send_email", Session: "s1", Args: map[string]any{"to": "friend@example.com"}}, portcullis.OutcomeAllow)
	decide(g, portcullis.Call{Tool: "send_email", Session: "s1", Args: map[string]any{"to": "evil@example.com"}}, portcullis.OutcomeDeny)
	decide(g, portcullis.Call{Tool: "login", Session: "s1", Args: map[string]any{"user": "u", "password": "hunter2"}}, portcullis.OutcomeConfirm)
	for i, want := range []portcullis.Outcome{portcullis.OutcomeAllow, portcullis.OutcomeAllow, portcullis.OutcomeAllow, portcullis.OutcomeConfirm} {
		d := decide(g, portcullis.Call{Tool: "edit_item", Agent: "bot", Session: "s2", Run: &portcullis.Run{ID: "r1"}, Args: map[string]any{"n": i}}, want)
		if i == 3 && d.Code != portcullis.CodeAutonomyPause {
			t.Fatalf("fourth step: code %s; want AUTONOMY_PAUSE", d.Code)
		}
	}
	decide(g, portcullis.Call{Tool: "run_sql", Agent: "bot", Session: "s2", Run: &portcullis.Run{ID: "r2"}, Args: map[string]any{"q": "DROP TABLE users"}}, portcullis.OutcomeStop)
	decide(g, portcullis.Call{Tool: "list_items", Agent: "bot", Session: "s2"}, portcullis.OutcomeStop)
	decide(g, portcullis.Call{Tool: "read_text", Session: "s3", Upstream: &portcullis.UpstreamTool{Server: "fs", Offered: true, Annotated: true, ReadOnly: true, Trusted: true}}, portcullis.OutcomeAllow)
	decide(g, portcullis.Call{Tool: "ghost", Session: "s3", Upstream: &portcullis.UpstreamTool{Offered: false}}, portcullis.OutcomeDeny)
	decide(trusted, portcullis.Call{Tool: "edit_item", Session: "s4", ActiveElements: []string{"Sandbox"}}, portcullis.OutcomeDeny)
	return stateDir, policyPath
}

// MailValidator is the stand-in model of the recorded run: it allows mail
// to anyone but evil.
type MailValidator struct{}

// Validate allows mail unless its "to" starts with "evil".
func (MailValidator) Validate(_ context.Context, r portcullis.ValidationRequest) (portcullis.Verdict, error) {
	to, _ := r.Args["to"].(string)
	return portcullis.Verdict{Allow: !strings.HasPrefix(to, "evil"), Confidence: 0.9, Reasoning: "mail policy", Provider: "test", Model: "m"}, nil
}

// Grow appends to the SQLite audit log at dst the events of the one at
// src, in a loop, until it has n rows; each copy of a decision gets its
// own id. A benchmark grows Record's log into a long one.
func Grow(b testing.TB, src, dst string, n int64) {
	b.Helper()
	ctx := context.Background()
	from, err := sqlite.Open(ctx, src, sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	var evs []portcullis.AuditEvent
	err = from.ScanAudit(ctx, 0, func(r portcullis.AuditRecord) (bool, error) {
		ev, err := r.Event()
		evs = append(evs, ev)
		return true, err
	})
	if cerr := from.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		b.Fatal(err)
	}
	to, err := sqlite.Open(ctx, dst, sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer to.Close()
	last, err := to.QueryAudit(ctx, portcullis.AuditQuery{Newest: true, Limit: 1})
	if err != nil {
		b.Fatal(err)
	}
	written := int64(0)
	if len(last) > 0 {
		written = last[0].Seq
	}
	batch := make([]portcullis.AuditEvent, 0, 1000)
	for written < n {
		batch = batch[:0]
		for len(batch) < cap(batch) && written+int64(len(batch)) < n {
			i := written + int64(len(batch))
			ev := evs[i%int64(len(evs))]
			if ev.DecisionID != "" {
				ev.DecisionID = fmt.Sprintf("%s-%d", ev.DecisionID, i)
			}
			batch = append(batch, ev)
		}
		if _, err := to.AppendAudit(ctx, batch...); err != nil {
			b.Fatal(err)
		}
		written += int64(len(batch))
	}
}
