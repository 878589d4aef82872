package gate_test

import (
	"context"
	"testing"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/memstore"
	"github.com/portcullis/portcullis/policy"
)

// The requests an upstream sends its client are decided under
// upstreamRequests, only when the gateway says the call is one; a tool
// named like one is an ordinary tool.
func TestUpstreamRequests(t *testing.T) {
	req := func(method string) portcullis.Call {
		return portcullis.Call{Tool: portcullis.UpstreamRequestTool(method), Session: "s1", Agent: "bot",
			Args:     map[string]any{"upstream": "ev"},
			Upstream: &portcullis.UpstreamTool{Server: "ev", Offered: true, Request: method}}
	}
	forged := req(portcullis.MethodRoots)
	forged.Upstream = &portcullis.UpstreamTool{Server: "ev", Offered: true}
	allowAll := `
elements:
  - {name: Loose, type: skill, active: true, gatekeeper: {allow: ["*"]}}
`
	cases := []struct {
		name   string
		policy string
		call   portcullis.Call
		want   portcullis.Outcome
		level  portcullis.Level
	}{
		{"sampling is denied by default", "", req(portcullis.MethodSampling), portcullis.OutcomeDeny, portcullis.Deny},
		{"elicitation is allowed by default", "", req(portcullis.MethodElicitation), portcullis.OutcomeAllow, portcullis.AutoApprove},
		{"roots are allowed by default", "", req(portcullis.MethodRoots), portcullis.OutcomeAllow, portcullis.AutoApprove},
		{"sampling held for a person", "upstreamRequests: {sampling: confirm}\n", req(portcullis.MethodSampling), portcullis.OutcomeConfirm, portcullis.ConfirmSingleUse},
		{"an element's allow does not lower a held sampling", "upstreamRequests: {sampling: confirm}\n" + allowAll, req(portcullis.MethodSampling), portcullis.OutcomeConfirm, portcullis.ConfirmSingleUse},
		{"an element's deny refuses roots", "elements:\n  - {name: Strict, type: skill, active: true, gatekeeper: {deny: [\"mcp:*\"]}}\n", req(portcullis.MethodRoots), portcullis.OutcomeDeny, portcullis.Deny},
		{"roots denied", "upstreamRequests: {roots: deny}\n", req(portcullis.MethodRoots), portcullis.OutcomeDeny, portcullis.Deny},
		{"an unknown method is denied", "", req("tasks/get"), portcullis.OutcomeDeny, portcullis.Deny},
		{"a tool named like a request is an ordinary tool", "", forged, portcullis.OutcomeConfirm, portcullis.ConfirmSingleUse},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pol, _, err := policy.Parse("policy.yaml", []byte("version: 1\n"+tc.policy))
			if err != nil {
				t.Fatal(err)
			}
			st := memstore.New(portcullis.SystemClock{})
			g, err := gate.New(pol, gate.WithStore(st))
			if err != nil {
				t.Fatal(err)
			}
			d, err := g.Decide(context.Background(), tc.call)
			if err != nil {
				t.Fatal(err)
			}
			if d.Outcome != tc.want || d.PermissionLevel != tc.level {
				t.Fatalf("Decide(%s) = %s %s (%s); want %s %s", tc.call.Tool, d.Outcome, d.PermissionLevel, d.Reason, tc.want, tc.level)
			}
			recs, err := st.QueryAudit(context.Background(), portcullis.AuditQuery{})
			if err != nil || len(recs) != 1 {
				t.Fatalf("audit rows = %d, %v; want the decision's one", len(recs), err)
			}
		})
	}
}
