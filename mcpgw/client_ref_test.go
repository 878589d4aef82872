package mcpgw_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/mcpgw"
	"github.com/portcullis/portcullis/memstore"
	"github.com/portcullis/portcullis/policy"
)

// claudeCode sends what Claude Code sends with its HTTP requests: the
// agent's token and its session ID.
type claudeCode struct{ session string }

func (c claudeCode) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer agent-token")
	if c.session != "" {
		r.Header.Set("X-Claude-Code-Session-Id", c.session)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestAuditRowsCarryTheClientsOwnIDs: a call's audit row carries the
// client's own session ID and tool-use ID when the client sends them (in
// Claude Code's header and _meta key), so its rows join the rows of the
// same session's hook; a client that sends neither gets no client field,
// and an oversized or control-character value is not kept.
func TestAuditRowsCarryTheClientsOwnIDs(t *testing.T) {
	pol, _, err := policy.Parse("p.yaml", []byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	st := memstore.New(portcullis.SystemClock{})
	g, err := gate.New(pol, gate.WithStore(st))
	if err != nil {
		t.Fatal(err)
	}
	gw, err := mcpgw.New(context.Background(), mcpgw.Config{Gate: g, Store: st, Upstreams: []mcpgw.Upstream{newNotes().upstream("notes")}})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	h, err := gw.Handler(mcpgw.HTTPOptions{AgentOf: func(tok string) (string, bool) { return "bot", tok == "agent-token" }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	for _, tc := range []struct {
		name, session, toolUse string
		want                   *portcullis.ClientRef
	}{
		{"both", "3f1c7e1a-session", "toolu_01abc", &portcullis.ClientRef{Session: "3f1c7e1a-session", ToolUseID: "toolu_01abc"}},
		{"tool use only", "", "toolu_02def", &portcullis.ClientRef{ToolUseID: "toolu_02def"}},
		{"neither", "", "", nil},
		{"control characters", "", "toolu\x00x", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := &mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: &http.Client{Transport: claudeCode{tc.session}}}
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "claude-code", Version: "2.1"}, nil).Connect(context.Background(), tr, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			p := &mcp.CallToolParams{Name: "read_note", Arguments: map[string]any{"id": tc.name}}
			if tc.toolUse != "" {
				p.Meta = mcp.Meta{"claudecode/toolUseId": tc.toolUse}
			}
			if res, err := cs.CallTool(context.Background(), p); err != nil || res.IsError {
				t.Fatalf("read_note = %+v, %v", res, err)
			}
			recs, err := st.QueryAudit(context.Background(), portcullis.AuditQuery{Kind: portcullis.AuditDecision, Tool: "read_note", Newest: true, Limit: 1})
			if err != nil || len(recs) != 1 {
				t.Fatalf("audit rows = %d, %v", len(recs), err)
			}
			ev, err := recs[0].Event()
			if err != nil {
				t.Fatal(err)
			}
			got := ev.Request.Client
			if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
				t.Errorf("the row's request.client = %+v; want %+v", got, tc.want)
			}
			if ev.Session == tc.session && tc.session != "" {
				t.Errorf("the row's session is the client's %q; want the gateway's own (Mcp-Session-Id)", ev.Session)
			}
		})
	}
}
