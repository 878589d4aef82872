package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/httpapi"
	"github.com/portcullis/portcullis/memstore"
	"github.com/portcullis/portcullis/policy"
)

// FuzzDecide posts arbitrary bodies to POST /v1/decide: the answer is a
// decision or a JSON error, never a server error; a decided call is always
// the token's agent's, and an agent never confirms its own call.
func FuzzDecide(f *testing.F) {
	for _, seed := range []string{
		`{"tool": "list_elements"}`,
		`{"tool": "delete_element", "args": {"name": "x"}, "agent": "other-bot", "grants": [{"tool": "delete_element", "kind": "single", "args": {"name": "x"}}]}`,
		`{"tool": "create_element", "activeElements": [], "run": {"id": "r1", "step": 0, "previousOutcome": "success", "riskScore": 0}}`,
		`{"tool": "Bash", "args": {"command": "rm -rf /"}, "run": {"id": "r2"}}`,
		`{"tool": ""}`, `[]`, `null`, `{"tool": "x"} trailing`, "\xff",
	} {
		f.Add([]byte(seed))
	}
	st := memstore.New(nil)
	pol, _, err := policy.Parse("policy.yaml", []byte(testPolicy))
	if err != nil {
		f.Fatal(err)
	}
	g, err := gate.New(pol, gate.WithStore(st))
	if err != nil {
		f.Fatal(err)
	}
	h, err := httpapi.New(httpapi.Options{Gate: g, Store: st, AgentToken: func(tok string) (string, bool) { return "deploy-bot", tok == botToken }})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest("POST", "http://127.0.0.1/v1/decide", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+botToken)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		switch w.Code {
		case http.StatusOK:
			var d portcullis.Decision
			if err := json.Unmarshal(w.Body.Bytes(), &d); err != nil {
				t.Fatalf("200 with a body that is not a decision: %v\n%s", err, w.Body)
			}
			c, err := portcullis.DecodeCall(body)
			if err != nil {
				t.Fatalf("an invalid request (%v) was decided", err)
			}
			if d.Outcome == portcullis.OutcomeAllow && d.Source == portcullis.SourceSessionGrant {
				t.Fatalf("%s was allowed by a grant no person made: %s", c.Tool, w.Body)
			}
			if d.Outcome == portcullis.OutcomeConfirm {
				a, err := st.Approval(context.Background(), d.ChallengeID)
				if err != nil || a.Call.Agent != "deploy-bot" || a.Call.Grants != nil || a.Call.ActiveElements != nil {
					t.Fatalf("approval request %+v, %v; want deploy-bot's call without grants or active set", a, err)
				}
			}
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			var eb struct {
				Error struct{ Code, Message string } `json:"error"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &eb); err != nil || eb.Error.Code == "" {
				t.Fatalf("%d without a JSON error: %s", w.Code, w.Body)
			}
		default:
			t.Fatalf("POST /v1/decide %q = %d %s", body, w.Code, w.Body)
		}
	})
}
