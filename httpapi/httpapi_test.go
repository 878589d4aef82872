package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/httpapi"
	"github.com/portcullis/portcullis/memstore"
	"github.com/portcullis/portcullis/storetest"
)

func TestDecide(t *testing.T) {
	e := newEnv(t, envConfig{})
	for _, tc := range []struct {
		name    string
		call    string
		outcome portcullis.Outcome
		level   portcullis.Level
		code    portcullis.Code
	}{
		{"read", `{"tool": "list_elements"}`, portcullis.OutcomeAllow, portcullis.AutoApprove, ""},
		{"element confirm", `{"tool": "create_element", "session": "s1"}`, portcullis.OutcomeConfirm, portcullis.ConfirmSession, portcullis.CodeConfirmationRequired},
		{"single use", `{"tool": "delete_element", "args": {"name": "x", "n": 1.50}}`, portcullis.OutcomeConfirm, portcullis.ConfirmSingleUse, portcullis.CodeConfirmationRequired},
		{"unknown tool", `{"tool": "launch_rocket"}`, portcullis.OutcomeConfirm, portcullis.ConfirmSingleUse, portcullis.CodeConfirmationRequired},
		{"blocked command", `{"tool": "Bash", "args": {"command": "rm -rf ~/.local/state/portcullis"}}`, portcullis.OutcomeDeny, portcullis.Deny, portcullis.CodeBlockedCommand},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do("POST", "/v1/decide", botToken, tc.call)
			if r.status != http.StatusOK {
				t.Fatalf("POST /v1/decide %s = %s; want 200", tc.call, r)
			}
			if ct := r.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q; want application/json", ct)
			}
			d := decodeDecision(t, r.body)
			if d.Outcome != tc.outcome || d.PermissionLevel != tc.level || d.Code != tc.code {
				t.Fatalf("Decide(%s) = %s/%s/%q (%s); want %s/%s/%q", tc.call, d.Outcome, d.PermissionLevel, d.Code, d.Reason, tc.outcome, tc.level, tc.code)
			}
			if d.DecisionID == "" || len(d.Trace) == 0 {
				t.Errorf("decision without id or trace: %s", r.body)
			}
			// Every contract field is present, empty lists as [].
			for _, field := range []string{`"decisionId"`, `"outcome"`, `"permissionLevel"`, `"code"`, `"reason"`, `"source"`, `"sourceElement"`, `"matchedPolicy"`, `"conflictingElements":[`, `"challengeId"`, `"whatWouldAuthorize"`, `"failClosed"`, `"trace":[`} {
				if !strings.Contains(string(r.body), field) {
					t.Errorf("the decision lacks %s: %s", field, r.body)
				}
			}
		})
	}
}

// The agent's identity is the token's: a body naming another agent is
// decided, recorded and held as the token's agent, and its grants and
// active elements are ignored.
func TestDecideAgentFromToken(t *testing.T) {
	e := newEnv(t, envConfig{})
	d := e.decide(botToken, map[string]any{
		"tool": "delete_element", "args": map[string]any{"name": "x"}, "session": "s1", "agent": "other-bot",
		"grants":         []map[string]any{{"tool": "delete_element", "kind": "single", "args": map[string]any{"name": "x"}}},
		"activeElements": []string{},
	})
	if d.Outcome != portcullis.OutcomeConfirm {
		t.Fatalf("a call carrying its own grant = %s (%s); want confirm: an agent cannot grant itself", d.Outcome, d.Reason)
	}
	ap, err := e.store.Approval(context.Background(), d.ChallengeID)
	if err != nil {
		t.Fatal(err)
	}
	if ap.Call.Agent != "deploy-bot" || ap.Call.Grants != nil || ap.Call.ActiveElements != nil {
		t.Fatalf("approval request's call = agent %q grants %v active %v; want agent deploy-bot from the token, no grants, no active set", ap.Call.Agent, ap.Call.Grants, ap.Call.ActiveElements)
	}
	rows := e.auditRows(portcullis.AuditDecision)
	if last := rows[len(rows)-1]; last.Agent != "deploy-bot" {
		t.Fatalf("audit row agent = %q; want deploy-bot", last.Agent)
	}
	// The element confirm stays in force: an empty active set in the body
	// does not switch it off.
	if d := e.decide(botToken, `{"tool": "create_element", "activeElements": []}`); d.Outcome != portcullis.OutcomeConfirm {
		t.Fatalf("create_element with activeElements [] = %s; want confirm (the agent cannot change the active set)", d.Outcome)
	}
	// The other agent cannot see deploy-bot's decision.
	if r := e.do("GET", "/v1/decisions/"+d.DecisionID+"/wait?timeout=0", otherToken, nil); r.status != http.StatusNotFound {
		t.Fatalf("other agent waiting on deploy-bot's decision = %s; want 404", r)
	}
}

func TestDecideMalformed(t *testing.T) {
	e := newEnv(t, envConfig{})
	huge := `{"tool": "write_file", "args": {"content": "` + strings.Repeat("x", portcullis.MaxRequestBytes) + `"}}`
	for _, tc := range []struct {
		name   string
		body   string
		ctype  string
		status int
		code   portcullis.Code
	}{
		{"empty", ``, "", http.StatusBadRequest, portcullis.CodeInvalidRequest},
		{"truncated", `{"tool": "list_`, "", http.StatusBadRequest, portcullis.CodeInvalidRequest},
		{"not an object", `["list_elements"]`, "", http.StatusBadRequest, portcullis.CodeInvalidRequest},
		{"no tool", `{"args": {}}`, "", http.StatusBadRequest, portcullis.CodeInvalidRequest},
		{"unknown field", `{"tool": "list_elements", "tools": 1}`, "", http.StatusBadRequest, portcullis.CodeInvalidRequest},
		{"trailing data", `{"tool": "list_elements"} {"tool": "x"}`, "", http.StatusBadRequest, portcullis.CodeInvalidRequest},
		{"args not an object", `{"tool": "list_elements", "args": [1]}`, "", http.StatusBadRequest, portcullis.CodeInvalidRequest},
		{"bad grant kind", `{"tool": "list_elements", "grants": [{"tool": "x", "kind": "forever"}]}`, "", http.StatusBadRequest, portcullis.CodeInvalidRequest},
		{"huge arguments", huge, "", http.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE"},
		{"form post", `tool=list_elements`, "application/x-www-form-urlencoded", http.StatusUnsupportedMediaType, "UNSUPPORTED_MEDIA_TYPE"},
		{"text", `{"tool": "list_elements"}`, "text/plain", http.StatusUnsupportedMediaType, "UNSUPPORTED_MEDIA_TYPE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hdr []string
			if tc.ctype != "" {
				hdr = []string{"Content-Type", tc.ctype}
			}
			r := e.do("POST", "/v1/decide", botToken, tc.body, hdr...)
			if r.status != tc.status || r.errorCode() != tc.code {
				t.Fatalf("POST /v1/decide (%s) = %s; want %d %s", tc.name, r, tc.status, tc.code)
			}
		})
	}
	// A huge body sent without a Content-Length (chunked) is cut off too.
	req, err := http.NewRequest("POST", e.srv.URL+"/v1/decide", strings.NewReader(huge))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+botToken)
	req.ContentLength = -1
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked huge request = %d; want 413", resp.StatusCode)
	}
	// Nothing malformed was decided.
	if rows := e.auditRows(portcullis.AuditDecision); len(rows) != 0 {
		t.Fatalf("%d decisions audited; want none", len(rows))
	}
}

func TestTokens(t *testing.T) {
	e := newEnv(t, envConfig{})
	agentEndpoints := []struct{ method, path, body string }{
		{"POST", "/v1/decide", `{"tool": "list_elements"}`},
		{"POST", "/v1/outcomes", `{"runId": "r1", "outcome": "success"}`},
		{"GET", "/v1/decisions/d1/wait?timeout=0", ""},
	}
	peopleEndpoints := []struct{ method, path, body string }{
		{"GET", "/v1/approvals", ""},
		{"GET", "/v1/approvals/apr_x", ""},
		{"POST", "/v1/approvals/apr_x/approve", `{}`},
		{"POST", "/v1/approvals/apr_x/deny", `{"reason": "no"}`},
		{"GET", "/v1/blocks", ""},
		{"POST", "/v1/blocks/deploy-bot/unblock", `{"challengeId": "c", "code": "ABCDEF"}`},
		{"GET", "/v1/grants", ""},
		{"DELETE", "/v1/grants/grt_x", ""},
	}
	type ep = struct{ method, path, body string }
	check := func(eps []ep, token string, status int, code portcullis.Code) {
		t.Helper()
		for _, ep := range eps {
			var body any
			if ep.body != "" {
				body = ep.body
			}
			r := e.do(ep.method, ep.path, token, body)
			if r.status != status || r.errorCode() != code {
				t.Errorf("%s %s with token %.12q = %s; want %d %s", ep.method, ep.path, token, r, status, code)
			}
		}
	}
	check(agentEndpoints, "", http.StatusUnauthorized, "UNAUTHORIZED")
	check(peopleEndpoints, "", http.StatusUnauthorized, "UNAUTHORIZED")
	check(peopleEndpoints, botToken, http.StatusForbidden, "FORBIDDEN")
	check(agentEndpoints, humanToken, http.StatusForbidden, "FORBIDDEN")
	check(agentEndpoints[:1], humanToken+"x", http.StatusUnauthorized, "UNAUTHORIZED")
	check(peopleEndpoints[:1], botToken[:len(botToken)-1], http.StatusUnauthorized, "UNAUTHORIZED")
	// Other schemes are not bearer tokens.
	if r := e.do("GET", "/v1/approvals", "", nil, "Authorization", "Basic "+humanToken); r.status != http.StatusUnauthorized {
		t.Errorf("Basic auth = %s; want 401", r)
	}
	if r := e.do("GET", "/v1/approvals", "", nil, "Authorization", "bearer "+humanToken); r.status != http.StatusOK {
		t.Errorf("lower-case bearer scheme = %s; want 200", r)
	}
}

// Wrong tokens are counted per client and, past ten in a row, answered
// 429; a right token is always served, during the flood too: no process
// can lock the agents and the people out by guessing from their address.
func TestWrongTokensAreLimitedRightOnesServed(t *testing.T) {
	clock := storetest.NewClock()
	e := newEnv(t, envConfig{store: "memstore", clock: clock})
	for i := range 10 {
		r := e.do("GET", "/v1/approvals", fmt.Sprintf("guess-%02d-aaaaaaaaaaaaaaaa", i), nil)
		if r.status != http.StatusUnauthorized || !r.closed {
			t.Fatalf("guess %d = %s (connection closed: %v); want 401 and the connection closed", i, r, r.closed)
		}
	}
	r := e.do("GET", "/v1/approvals", "guess-10-aaaaaaaaaaaaaaaa", nil)
	if r.status != http.StatusTooManyRequests || r.errorCode() != portcullis.CodeRateLimited || r.header.Get("Retry-After") == "" {
		t.Fatalf("the 11th wrong token = %s (Retry-After %q); want 429 RATE_LIMITED with Retry-After", r, r.header.Get("Retry-After"))
	}
	// The flood goes on while the person and the agent use their tokens.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var flooded atomic.Int64
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequest("POST", e.srv.URL+"/v1/decide", strings.NewReader(`{"tool": "list_elements"}`))
				req.Header.Set("Authorization", fmt.Sprintf("Bearer flood-%d-%d-aaaaaaaaaaaaaaaa", w, i))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusTooManyRequests {
					flooded.Add(1)
				}
			}
		}()
	}
	for i := range 20 {
		if r := e.do("GET", "/v1/approvals", humanToken, nil); r.status != http.StatusOK {
			t.Fatalf("the human token during the flood (%d) = %s; want 200", i, r)
		}
		if r := e.do("POST", "/v1/decide", botToken, `{"tool": "list_elements"}`); r.status != http.StatusOK {
			t.Fatalf("an agent token during the flood (%d) = %s; want 200", i, r)
		}
	}
	close(stop)
	wg.Wait()
	if flooded.Load() == 0 {
		t.Fatal("no guess of the flood was answered 429")
	}
	// The allowance comes back one attempt at a time, not all at once.
	clock.Advance(7 * time.Second)
	if r := e.do("GET", "/v1/approvals", "guess-after-aaaaaaaaaaaaaaaa", nil); r.status != http.StatusUnauthorized {
		t.Fatalf("a wrong token after the client earned one more attempt = %s; want 401", r)
	}
	if r := e.do("GET", "/v1/approvals", "guess-again-aaaaaaaaaaaaaaaa", nil); r.status != http.StatusTooManyRequests {
		t.Fatalf("the next wrong token at once = %s; want 429", r)
	}
}

func TestHostAndOrigin(t *testing.T) {
	e := newEnv(t, envConfig{store: "memstore"})
	for _, tc := range []struct {
		name   string
		header []string
		status int
	}{
		{"loopback", nil, http.StatusOK},
		{"localhost", []string{"Host", "localhost:8080"}, http.StatusOK},
		{"rebound name", []string{"Host", "attacker.example:8080"}, http.StatusForbidden},
		{"rebound name without port", []string{"Host", "attacker.example"}, http.StatusForbidden},
		{"foreign origin", []string{"Origin", "http://attacker.example"}, http.StatusForbidden},
		{"null origin", []string{"Origin", "null"}, http.StatusForbidden},
		{"same origin", []string{"Host", "localhost:8080", "Origin", "http://localhost:8080"}, http.StatusOK},
		{"same origin, trailing dot", []string{"Host", "localhost.:8080", "Origin", "http://localhost:8080"}, http.StatusOK},
		{"another port of this host", []string{"Host", "localhost:8080", "Origin", "http://localhost:5173"}, http.StatusForbidden},
		{"another name of this host", []string{"Host", "localhost:8080", "Origin", "http://127.0.0.1:8080"}, http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do("GET", "/v1/approvals", humanToken, nil, tc.header...)
			if r.status != tc.status {
				t.Fatalf("GET /v1/approvals with %v = %s; want %d", tc.header, r, tc.status)
			}
			if r.status == http.StatusForbidden && r.errorCode() != "FORBIDDEN" {
				t.Fatalf("code = %s; want FORBIDDEN", r.errorCode())
			}
		})
	}
	// A rebound name cannot reach the decision API either, nor the 404.
	if r := e.do("POST", "/v1/decide", botToken, `{"tool": "list_elements"}`, "Host", "attacker.example"); r.status != http.StatusForbidden {
		t.Fatalf("decide via a rebound name = %s; want 403", r)
	}
	if r := e.do("GET", "/nowhere", "", nil, "Host", "attacker.example"); r.status != http.StatusForbidden {
		t.Fatalf("404 via a rebound name = %s; want 403", r)
	}
	// Health probes come from anywhere.
	if r := e.do("GET", "/healthz", "", nil, "Host", "10.1.2.3:8080"); r.status != http.StatusOK {
		t.Fatalf("healthz from a probe = %s; want 200", r)
	}
}

func TestAllowedHostsOption(t *testing.T) {
	st := memstore.New(nil)
	g, err := gate.New(&portcullis.Policy{Version: 1}, gate.WithStore(st))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := httpapi.New(httpapi.Options{Gate: g, Store: st, HumanToken: "short"}); err == nil {
		t.Fatal("New accepted a 5-character human token")
	}
	if _, err := httpapi.New(httpapi.Options{Store: st}); err == nil {
		t.Fatal("New accepted no gate")
	}
	h, err := httpapi.New(httpapi.Options{Gate: g, Store: st, AllowedHosts: []string{"gate.internal:8443", "Console.Example."}})
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]int{
		"gate.internal:8443": http.StatusOK,
		"gate.internal:9000": http.StatusForbidden,
		"console.example":    http.StatusOK,
		"CONSOLE.EXAMPLE:80": http.StatusOK,
		"localhost":          http.StatusForbidden, // the list replaces the loopback default
	} {
		req, err := http.NewRequest("GET", "http://x/v1/openapi.json", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != want {
			t.Errorf("Host %q = %d; want %d", host, w.Code, want)
		}
	}
}

// A person's answer reaches the waiting agent: approved, the call is
// decided again and allowed once; denied, the agent gets the reason.
func TestWaitForAPerson(t *testing.T) {
	e := newEnv(t, envConfig{})
	call := map[string]any{"tool": "delete_element", "args": map[string]any{"name": "notes"}, "session": "s1"}
	d := e.pendingApproval(call)

	r := e.do("GET", "/v1/decisions/"+d.DecisionID+"/wait?timeout=0", botToken, nil)
	p := decodeInto[httpapi.Pending](t, r)
	if r.status != http.StatusAccepted || p.Status != portcullis.ApprovalPending || p.ChallengeID != d.ChallengeID || p.DecisionID != d.DecisionID {
		t.Fatalf("wait before an answer = %s; want 202 pending for %s", r, d.ChallengeID)
	}

	// The agent waits; a person approves meanwhile.
	done := make(chan response, 1)
	go func() { done <- e.do("GET", "/v1/decisions/"+d.DecisionID+"/wait?timeout=50s", botToken, nil) }()
	// Whether the person answers before or after the wait begins, the
	// agent gets the answer.
	if r := e.do("POST", "/v1/approvals/"+d.ChallengeID+"/approve", humanToken, `{}`, httpapi.ActorHeader, "ana"); r.status != http.StatusOK {
		t.Fatalf("approve = %s; want 200", r)
	}
	r = <-done
	if r.status != http.StatusOK {
		t.Fatalf("wait = %s; want 200", r)
	}
	got := decodeDecision(t, r.body)
	if got.Outcome != portcullis.OutcomeAllow || got.Source != portcullis.SourceSessionGrant || got.DecisionID == d.DecisionID {
		t.Fatalf("wait after approval = %s/%s id %s; want a new allow decision from the grant", got.Outcome, got.Source, got.DecisionID)
	}
	// The grant was used: waiting again does not allow the call twice, nor
	// make a new approval request.
	if r := e.do("GET", "/v1/decisions/"+d.DecisionID+"/wait?timeout=0", botToken, nil); r.status != http.StatusConflict {
		t.Fatalf("second wait = %s; want 409 (the grant is used)", r)
	}
	if list, err := e.store.Approvals(context.Background(), portcullis.ApprovalFilter{Status: portcullis.ApprovalPending}); err != nil || len(list) != 0 {
		t.Fatalf("pending approvals after the second wait = %d, %v; want none", len(list), err)
	}
	// The same call again needs a person again.
	e.pendingApproval(call)

	// Denied: the agent gets the person's reason.
	d2 := e.pendingApproval(map[string]any{"tool": "delete_element", "args": map[string]any{"name": "other"}, "session": "s1"})
	if r := e.do("POST", "/v1/approvals/"+d2.ChallengeID+"/deny", humanToken, `{"reason": "keep the other notes"}`); r.status != http.StatusOK {
		t.Fatalf("deny = %s; want 200", r)
	}
	r = e.do("GET", "/v1/decisions/"+d2.DecisionID+"/wait", botToken, nil)
	denied := decodeDecision(t, r.body)
	if r.status != http.StatusOK || denied.Outcome != portcullis.OutcomeDeny || !strings.Contains(denied.Reason, "keep the other notes") || denied.ChallengeID != d2.ChallengeID {
		t.Fatalf("wait after deny = %s; want 200 deny with the person's reason", r)
	}

	// The audit log names who answered.
	var actors []string
	for _, ev := range e.auditRows(portcullis.AuditApproval) {
		actors = append(actors, ev.Actor)
	}
	if want := "[ana (token:human) token:human]"; fmt.Sprint(actors) != want {
		t.Fatalf("approval audit actors = %v; want %s", actors, want)
	}
}

func TestWaitBadRequests(t *testing.T) {
	e := newEnv(t, envConfig{store: "memstore"})
	d := e.pendingApproval(map[string]any{"tool": "delete_element"})
	allow := e.decide(botToken, `{"tool": "list_elements"}`)
	for _, tc := range []struct {
		path   string
		status int
	}{
		{"/v1/decisions/" + d.DecisionID + "/wait?timeout=soon", http.StatusBadRequest},
		{"/v1/decisions/" + d.DecisionID + "/wait?timeout=-1s", http.StatusBadRequest},
		{"/v1/decisions/" + d.DecisionID + "/wait?timeout=0&x=1", http.StatusBadRequest},
		{"/v1/decisions/" + d.DecisionID + "/wait?timeout=0", http.StatusAccepted},
		{"/v1/decisions/" + allow.DecisionID + "/wait?timeout=0", http.StatusNotFound},
		{"/v1/decisions/nope/wait?timeout=0", http.StatusNotFound},
	} {
		if r := e.do("GET", tc.path, botToken, nil); r.status != tc.status {
			t.Errorf("GET %s = %s; want %d", tc.path, r, tc.status)
		}
	}
}

// An approval request that nobody answered in time can no longer be
// approved, and the waiting agent is told no.
func TestExpiredApproval(t *testing.T) {
	clock := storetest.NewClock()
	e := newEnv(t, envConfig{clock: clock, gateOpts: []gate.Option{gate.WithApprovalTTL(time.Minute)}})
	d := e.pendingApproval(map[string]any{"tool": "delete_element", "args": map[string]any{"name": "x"}})
	clock.Advance(2 * time.Minute)

	r := e.do("GET", "/v1/approvals?status=expired", humanToken, nil)
	if list := decodeInto[httpapi.ApprovalList](t, r); len(list.Approvals) != 1 || list.Approvals[0].ID != d.ChallengeID {
		t.Fatalf("expired approvals = %s; want %s", r, d.ChallengeID)
	}
	if r := e.do("POST", "/v1/approvals/"+d.ChallengeID+"/approve", humanToken, nil); r.status != http.StatusConflict || r.errorCode() != portcullis.CodeConflict {
		t.Fatalf("approving an expired request = %s; want 409 CONFLICT", r)
	}
	if r := e.do("POST", "/v1/approvals/"+d.ChallengeID+"/deny", humanToken, `{"reason": "late"}`); r.status != http.StatusConflict {
		t.Fatalf("denying an expired request = %s; want 409", r)
	}
	r = e.do("GET", "/v1/decisions/"+d.DecisionID+"/wait", botToken, nil)
	got := decodeDecision(t, r.body)
	if r.status != http.StatusOK || got.Outcome != portcullis.OutcomeDeny || !strings.Contains(got.Reason, "expired") {
		t.Fatalf("wait on an expired request = %s; want 200 deny saying it expired", r)
	}
	if grants := decodeInto[httpapi.GrantList](t, e.do("GET", "/v1/grants", humanToken, nil)); len(grants.Grants) != 0 {
		t.Fatalf("grants after an expired request = %+v; want none", grants.Grants)
	}
}

// Many people approve the same request at once over HTTP: exactly one
// wins, and exactly one grant is made.
func TestDoubleApprovalRace(t *testing.T) {
	e := newEnv(t, envConfig{})
	d := e.pendingApproval(map[string]any{"tool": "delete_element", "args": map[string]any{"name": "x"}, "session": "s1"})
	const n = 8
	statuses := make([]int, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			path := "/v1/approvals/" + d.ChallengeID + "/approve"
			body := `{}`
			if i%2 == 1 {
				path = "/v1/approvals/" + d.ChallengeID + "/deny"
				body = `{"reason": "no"}`
			}
			statuses[i] = e.do("POST", path, humanToken, body, httpapi.ActorHeader, fmt.Sprintf("person-%d", i)).status
		})
	}
	close(start)
	wg.Wait()
	won := 0
	for i, s := range statuses {
		switch s {
		case http.StatusOK:
			won++
		case http.StatusConflict:
		default:
			t.Errorf("person %d got %d; want 200 or 409", i, s)
		}
	}
	if won != 1 {
		t.Fatalf("%d of %d concurrent answers succeeded (%v); want exactly 1", won, n, statuses)
	}
	ap := decodeInto[portcullis.Approval](t, e.do("GET", "/v1/approvals/"+d.ChallengeID, humanToken, nil))
	grants := decodeInto[httpapi.GrantList](t, e.do("GET", "/v1/grants", humanToken, nil))
	wantGrants := 0
	if ap.Status == portcullis.ApprovalApproved {
		wantGrants = 1
	}
	if len(grants.Grants) != wantGrants {
		t.Fatalf("approval %s, %d grants; want %d", ap.Status, len(grants.Grants), wantGrants)
	}
	if rows := e.auditRows(portcullis.AuditApproval); len(rows) != 1 || rows[0].Actor != ap.DecidedBy {
		t.Fatalf("approval audit rows = %+v; want one, by %s", rows, ap.DecidedBy)
	}
}

func TestApprovalsAPI(t *testing.T) {
	e := newEnv(t, envConfig{})
	session := e.pendingApproval(map[string]any{"tool": "create_element", "session": "s1", "elementType": "persona"})
	single := e.pendingApproval(map[string]any{"tool": "delete_element", "session": "s2", "args": map[string]any{"name": "x", "big": json.Number("12345678901234567890")}})
	other := e.decide(otherToken, `{"tool": "delete_element", "session": "s3"}`)

	list := func(query string) []string {
		t.Helper()
		r := e.do("GET", "/v1/approvals"+query, humanToken, nil)
		if r.status != http.StatusOK {
			t.Fatalf("GET /v1/approvals%s = %s", query, r)
		}
		var ids []string
		for _, a := range decodeInto[httpapi.ApprovalList](t, r).Approvals {
			ids = append(ids, a.ID)
		}
		return ids
	}
	for query, want := range map[string][]string{
		"":                               {other.ChallengeID, single.ChallengeID, session.ChallengeID},
		"?status=pending":                {other.ChallengeID, single.ChallengeID, session.ChallengeID},
		"?status=all&limit=1":            {other.ChallengeID},
		"?agent=other-bot":               {other.ChallengeID},
		"?session=s1":                    {session.ChallengeID},
		"?decision=" + single.DecisionID: {single.ChallengeID},
		"?status=approved":               nil,
	} {
		if got := list(query); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("GET /v1/approvals%s = %v; want %v", query, got, want)
		}
	}
	for _, q := range []string{"?status=maybe", "?limit=0", "?limit=1001", "?limit=x", "?sesion=s1"} {
		if r := e.do("GET", "/v1/approvals"+q, humanToken, nil); r.status != http.StatusBadRequest {
			t.Errorf("GET /v1/approvals%s = %s; want 400", q, r)
		}
	}

	// One approval in full; numbers exactly as the agent sent them.
	r := e.do("GET", "/v1/approvals/"+single.ChallengeID, humanToken, nil)
	if r.status != http.StatusOK || !strings.Contains(string(r.body), `"big":12345678901234567890`) {
		t.Fatalf("GET approval = %s; want the full call with its exact arguments", r)
	}
	if r := e.do("GET", "/v1/approvals/apr_nope", humanToken, nil); r.status != http.StatusNotFound || r.errorCode() != portcullis.CodeNotFound {
		t.Fatalf("GET a missing approval = %s; want 404 NOT_FOUND", r)
	}

	// A single-use call cannot be approved for the session.
	if r := e.do("POST", "/v1/approvals/"+single.ChallengeID+"/approve", humanToken, `{"session": true}`); r.status != http.StatusBadRequest {
		t.Fatalf("approve a CONFIRM_SINGLE_USE call for the session = %s; want 400", r)
	}
	for _, body := range []string{`{"session": "yes"}`, `{"sesion": true}`, `{}{}`, `[`} {
		if r := e.do("POST", "/v1/approvals/"+session.ChallengeID+"/approve", humanToken, body); r.status != http.StatusBadRequest || r.errorCode() != portcullis.CodeInvalidRequest {
			t.Errorf("approve with body %s = %s; want 400 INVALID_REQUEST", body, r)
		}
	}
	if r := e.do("POST", "/v1/approvals/"+session.ChallengeID+"/deny", humanToken, map[string]string{"reason": strings.Repeat("x", 2001)}); r.status != http.StatusBadRequest {
		t.Errorf("deny with a 2001-byte reason = %s; want 400", r)
	}
	if r := e.do("POST", "/v1/approvals/apr_nope/approve", humanToken, nil); r.status != http.StatusNotFound {
		t.Fatalf("approve a missing request = %s; want 404", r)
	}
	// For the session: a session grant, and the tool is allowed in that
	// session from now on.
	r = e.do("POST", "/v1/approvals/"+session.ChallengeID+"/approve", humanToken, `{"session": true}`, httpapi.ActorHeader, "ana")
	ap := decodeInto[portcullis.Approval](t, r)
	if r.status != http.StatusOK || ap.Status != portcullis.ApprovalApproved || ap.DecidedBy != "ana (token:human)" {
		t.Fatalf("approve for the session = %s; want 200 approved by ana (token:human)", r)
	}
	if r := e.do("POST", "/v1/approvals/"+session.ChallengeID+"/approve", humanToken, nil); r.status != http.StatusConflict {
		t.Fatalf("approving twice = %s; want 409", r)
	}
	for range 2 {
		if d := e.decide(botToken, `{"tool": "create_element", "session": "s1", "elementType": "persona"}`); d.Outcome != portcullis.OutcomeAllow {
			t.Fatalf("create_element in s1 after a session approval = %s; want allow", d.Outcome)
		}
	}
	if d := e.decide(botToken, `{"tool": "create_element", "session": "s9", "elementType": "persona"}`); d.Outcome != portcullis.OutcomeConfirm {
		t.Fatalf("create_element in another session = %s; want confirm", d.Outcome)
	}
	// Bad actor names are refused.
	if r := e.do("POST", "/v1/approvals/"+single.ChallengeID+"/deny", humanToken, nil, httpapi.ActorHeader, strings.Repeat("a", 65)); r.status != http.StatusBadRequest {
		t.Fatalf("a 65-byte actor = %s; want 400", r)
	}
}

func TestGrantsAPI(t *testing.T) {
	e := newEnv(t, envConfig{})
	d := e.pendingApproval(map[string]any{"tool": "create_element", "session": "s1"})
	if r := e.do("POST", "/v1/approvals/"+d.ChallengeID+"/approve", humanToken, `{"session": true}`); r.status != http.StatusOK {
		t.Fatal(r)
	}
	grants := decodeInto[httpapi.GrantList](t, e.do("GET", "/v1/grants?session=s1", humanToken, nil)).Grants
	if len(grants) != 1 || grants[0].Kind != portcullis.GrantSession || grants[0].Tool != "create_element" || grants[0].GrantedBy != "token:human" {
		t.Fatalf("grants of s1 = %+v; want the session grant for create_element by token:human", grants)
	}
	if g := decodeInto[httpapi.GrantList](t, e.do("GET", "/v1/grants?session=s2", humanToken, nil)).Grants; len(g) != 0 {
		t.Fatalf("grants of s2 = %+v; want none", g)
	}
	if r := e.do("GET", "/v1/grants?sessions=s1", humanToken, nil); r.status != http.StatusBadRequest {
		t.Fatalf("misspelt filter = %s; want 400", r)
	}
	r := e.do("DELETE", "/v1/grants/"+grants[0].ID, humanToken, nil, httpapi.ActorHeader, "bo")
	if r.status != http.StatusNoContent || len(r.body) != 0 {
		t.Fatalf("revoke = %s; want 204", r)
	}
	if r := e.do("DELETE", "/v1/grants/"+grants[0].ID, humanToken, nil); r.status != http.StatusNotFound {
		t.Fatalf("revoke twice = %s; want 404", r)
	}
	if d := e.decide(botToken, `{"tool": "create_element", "session": "s1"}`); d.Outcome != portcullis.OutcomeConfirm {
		t.Fatalf("create_element after the grant was revoked = %s; want confirm", d.Outcome)
	}
	rows := e.auditRows(portcullis.AuditGrant)
	if len(rows) != 1 || rows[0].Actor != "bo (token:human)" || !strings.Contains(rows[0].Detail, grants[0].ID) {
		t.Fatalf("grant audit rows = %+v; want one revocation by bo (token:human)", rows)
	}
}

// A danger-zone stop: the agent gets the challenge's ID, never its code;
// a person clears the block with the code over the people's API.
func TestBlocksAPI(t *testing.T) {
	e := newEnv(t, envConfig{})
	stop := e.decide(botToken, `{"tool": "Bash", "args": {"command": "rm -rf /"}, "run": {"id": "r1"}}`)
	if stop.Outcome != portcullis.OutcomeStop || stop.ChallengeID == "" {
		t.Fatalf("a catastrophic step = %s (%s); want stop with a challenge", stop.Outcome, stop.Reason)
	}
	if d := e.decide(botToken, `{"tool": "list_elements"}`); d.Outcome != portcullis.OutcomeStop || d.Code != portcullis.CodeDangerZone {
		t.Fatalf("a blocked agent's next call = %s/%s; want stop DANGER_ZONE", d.Outcome, d.Code)
	}
	codes := e.human.Codes()
	if len(codes) != 1 {
		t.Fatalf("codes sent to people = %v; want one", codes)
	}
	blocks := decodeInto[httpapi.BlockList](t, e.do("GET", "/v1/blocks", humanToken, nil)).Blocks
	if len(blocks) != 1 || blocks[0].Agent != "deploy-bot" || blocks[0].ChallengeID != stop.ChallengeID {
		t.Fatalf("blocks = %+v; want deploy-bot's", blocks)
	}
	unblock := "/v1/blocks/deploy-bot/unblock"
	for _, tc := range []struct {
		body   string
		status int
		code   portcullis.Code
	}{
		{`{"challengeId": "` + stop.ChallengeID + `"}`, http.StatusBadRequest, portcullis.CodeInvalidRequest},
		{`{"challengeId": "` + stop.ChallengeID + `", "code": "WRONG1"}`, http.StatusBadRequest, portcullis.CodeVerificationFailed},
		{`{"challengeId": "chl_other", "code": "` + codes[0] + `"}`, http.StatusBadRequest, portcullis.CodeVerificationFailed},
	} {
		if r := e.do("POST", unblock, humanToken, tc.body); r.status != tc.status || r.errorCode() != tc.code {
			t.Errorf("unblock %s = %s; want %d %s", tc.body, r, tc.status, tc.code)
		}
	}
	if r := e.do("POST", "/v1/blocks/other-bot/unblock", humanToken, `{"challengeId": "c", "code": "ABCDEF"}`); r.status != http.StatusNotFound {
		t.Fatalf("unblock an agent that is not blocked = %s; want 404", r)
	}
	r := e.do("POST", unblock, humanToken, map[string]string{"challengeId": stop.ChallengeID, "code": codes[0]}, httpapi.ActorHeader, "ana")
	if r.status != http.StatusNoContent {
		t.Fatalf("unblock with the code = %s; want 204", r)
	}
	if d := e.decide(botToken, `{"tool": "list_elements"}`); d.Outcome != portcullis.OutcomeAllow {
		t.Fatalf("after the unblock = %s; want allow", d.Outcome)
	}
	rows := e.auditRows(portcullis.AuditUnblock)
	if len(rows) != 1 || rows[0].Agent != "deploy-bot" || rows[0].Actor != "ana (token:human)" {
		t.Fatalf("unblock audit rows = %+v; want one for deploy-bot by ana (token:human)", rows)
	}
	// Too many wrong codes: refused with 429.
	e.decide(botToken, `{"tool": "Bash", "args": {"command": "rm -rf /"}, "run": {"id": "r2"}}`)
	blocks = decodeInto[httpapi.BlockList](t, e.do("GET", "/v1/blocks", humanToken, nil)).Blocks
	var last response
	for range 11 {
		last = e.do("POST", unblock, humanToken, map[string]string{"challengeId": blocks[0].ChallengeID, "code": "WRONG1"})
	}
	if last.status != http.StatusTooManyRequests || last.errorCode() != portcullis.CodeRateLimited {
		t.Fatalf("the 11th wrong code = %s; want 429 RATE_LIMITED", last)
	}
}

func TestOutcomes(t *testing.T) {
	e := newEnv(t, envConfig{})
	step := `{"tool": "list_elements", "run": {"id": "r1"}}`
	if d := e.decide(botToken, step); d.Outcome != portcullis.OutcomeAllow {
		t.Fatalf("first step = %s; want allow", d.Outcome)
	}
	for _, tc := range []struct {
		token, body string
		status      int
	}{
		{botToken, `{"runId": "r1", "outcome": "sideways"}`, http.StatusBadRequest},
		{botToken, `{"runId": "", "outcome": "failure"}`, http.StatusBadRequest},
		{botToken, `{"runId": "r1", "outcome": "failure", "extra": 1}`, http.StatusBadRequest},
		{botToken, `{"runId": "r404", "outcome": "failure"}`, http.StatusNotFound},
		{otherToken, `{"runId": "r1", "outcome": "failure"}`, http.StatusNotFound}, // not its run
		{botToken, `{"runId": "r1", "outcome": "failure"}`, http.StatusNoContent},
	} {
		if r := e.do("POST", "/v1/outcomes", tc.token, tc.body); r.status != tc.status {
			t.Errorf("POST /v1/outcomes %s = %s; want %d", tc.body, r, tc.status)
		}
	}
	// The failure pauses the run at its next step.
	if d := e.decide(botToken, step); d.Outcome != portcullis.OutcomeConfirm || d.Code != portcullis.CodeAutonomyPause {
		t.Fatalf("the step after a reported failure = %s/%s; want confirm AUTONOMY_PAUSE", d.Outcome, d.Code)
	}
}

func TestHealthAndRouting(t *testing.T) {
	notReady := errors.New("store at postgres://secret@db unreachable")
	var ready error
	var mu sync.Mutex
	e := newEnv(t, envConfig{store: "memstore", ready: func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		return ready
	}})
	if r := e.do("GET", "/healthz", "", nil); r.status != http.StatusOK {
		t.Fatalf("healthz = %s", r)
	}
	if r := e.do("GET", "/readyz", "", nil); r.status != http.StatusOK {
		t.Fatalf("readyz = %s", r)
	}
	mu.Lock()
	ready = notReady
	mu.Unlock()
	r := e.do("GET", "/readyz", "", nil)
	if r.status != http.StatusServiceUnavailable || strings.Contains(string(r.body), "secret") {
		t.Fatalf("readyz when not ready = %s; want 503 without the detail", r)
	}
	if r := e.do("GET", "/healthz", "", nil); r.status != http.StatusOK {
		t.Fatalf("healthz when not ready = %s; want 200", r)
	}
	r = e.do("DELETE", "/v1/decide", botToken, nil)
	if r.status != http.StatusMethodNotAllowed || r.errorCode() != "METHOD_NOT_ALLOWED" || r.header.Get("Allow") != "POST" {
		t.Fatalf("DELETE /v1/decide = %s (Allow %q); want 405 with Allow: POST", r, r.header.Get("Allow"))
	}
	if r := e.do("GET", "/v1/nothing", humanToken, nil); r.status != http.StatusNotFound || r.errorCode() != portcullis.CodeNotFound {
		t.Fatalf("GET /v1/nothing = %s; want 404 NOT_FOUND", r)
	}
	if r := e.do("GET", "/v1/approvals", humanToken, nil); r.header.Get("Cache-Control") != "no-store" || r.header.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("headers = %v; want no-store and nosniff", r.header)
	}
}

func TestMountPoints(t *testing.T) {
	e := newEnv(t, envConfig{store: "memstore"})
	mux := http.NewServeMux()
	h := e.srv.Config.Handler
	for _, p := range httpapi.MountPoints() {
		mux.Handle(p, h)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	for _, rt := range httpapi.Routes() {
		_, path, _ := strings.Cut(rt.Pattern, " ")
		req, err := http.NewRequest("GET", "http://localhost"+strings.ReplaceAll(strings.ReplaceAll(path, "{id}", "x"), "{agent}", "x"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, pattern := mux.Handler(req); pattern == "/" {
			t.Errorf("%s is not under any of MountPoints %v", rt.Pattern, httpapi.MountPoints())
		}
	}
}
