package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/httpapi"
	"github.com/portcullis/portcullis/internal/noticetest"
	"github.com/portcullis/portcullis/memstore"
	"github.com/portcullis/portcullis/policy"
	"github.com/portcullis/portcullis/sqlite"
)

const testPolicy = `
version: 1
tools:
  list_elements:  {endpoint: READ}
  create_element: {endpoint: CREATE}
  delete_element: {endpoint: DELETE, defaultLevel: CONFIRM_SINGLE_USE, canBeElevated: false}
  Bash:           {endpoint: EXECUTE, shellArg: command}
elements:
  - name: Careful
    type: persona
    active: true
    gatekeeper:
      confirm: [create_element]
  - name: deploy-bot
    type: agent
    autonomy: {riskTolerance: aggressive, maxAutonomousSteps: 50}
`

// The tokens of the test gateway.
const (
	humanToken = "human-token-0123456789abcdef"
	botToken   = "agent-token-deploy-bot-0123456789"
	otherToken = "agent-token-other-bot-0123456789"
)

var agentTokens = map[string]string{botToken: "deploy-bot", otherToken: "other-bot"}

// env is a real gateway: the API over a real HTTP server on 127.0.0.1, a
// real gate, and a real store.
type env struct {
	t     *testing.T
	srv   *httptest.Server
	gate  *gate.Gate
	store portcullis.Store
	human *noticetest.Recorder

	mu          sync.Mutex
	agentBodies [][]byte // every body an agent token was answered with
}

type envConfig struct {
	store    string // "sqlite" (default) or "memstore"
	clock    portcullis.Clock
	ready    func(context.Context) error
	gateOpts []gate.Option
}

func newEnv(t *testing.T, cfg envConfig) *env {
	t.Helper()
	ctx := context.Background()
	var st portcullis.Store
	switch cfg.store {
	case "memstore":
		st = memstore.New(cfg.clock)
	default:
		s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "portcullis.db"), sqlite.Options{Clock: cfg.clock})
		if err != nil {
			t.Fatal(err)
		}
		st = s
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	pol, _, err := policy.Parse("policy.yaml", []byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	human := &noticetest.Recorder{}
	opts := append([]gate.Option{gate.WithStore(st), gate.WithNotifier(human)}, cfg.gateOpts...)
	if cfg.clock != nil {
		opts = append(opts, gate.WithClock(cfg.clock))
	}
	g, err := gate.New(pol, opts...)
	if err != nil {
		t.Fatal(err)
	}
	h, err := httpapi.New(httpapi.Options{
		Gate: g, Store: st, HumanToken: humanToken, Ready: cfg.ready, Clock: cfg.clock,
		AgentToken: agentOf,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := serveLoopback(t, h)
	e := &env{t: t, srv: srv, gate: g, store: st, human: human}
	t.Cleanup(e.checkNoCodeLeaked)
	return e
}

// agentOf names the agent of a test token.
func agentOf(tok string) (string, bool) {
	a, ok := agentTokens[tok]
	return a, ok
}

// serveLoopback serves h on 127.0.0.1 until the test ends.
func serveLoopback(t testing.TB, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// response is an answer of the API.
type response struct {
	status int
	header http.Header
	body   []byte
	closed bool // the server closes the connection after the answer
}

func (r response) errorCode() portcullis.Code {
	var eb struct {
		Error struct {
			Code    portcullis.Code `json:"code"`
			Message string          `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.body, &eb); err != nil {
		return ""
	}
	return eb.Error.Code
}

func (r response) String() string {
	return http.StatusText(r.status) + " " + strings.TrimSpace(string(r.body))
}

// do sends a request. body is sent as is when a string, as JSON otherwise;
// header is name, value pairs.
func (e *env) do(method, path, token string, body any, header ...string) response {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	if _, ok := agentTokens[token]; ok {
		e.mu.Lock()
		e.agentBodies = append(e.agentBodies, b)
		e.mu.Unlock()
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b, closed: resp.Close}
}

// decide posts a call with an agent's token and decodes the Decision.
func (e *env) decide(token string, call any) portcullis.Decision {
	e.t.Helper()
	r := e.do("POST", "/v1/decide", token, call)
	if r.status != http.StatusOK {
		e.t.Fatalf("POST /v1/decide = %s; want 200", r)
	}
	return decodeDecision(e.t, r.body)
}

func decodeDecision(t *testing.T, b []byte) portcullis.Decision {
	t.Helper()
	var d portcullis.Decision
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("not a decision: %v\n%s", err, b)
	}
	return d
}

func decodeInto[T any](t *testing.T, r response) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("decode %T: %v\n%s", v, err, r.body)
	}
	return v
}

// checkNoCodeLeaked fails the test when any verification code the gate
// sent to people appears in any answer an agent token got.
func (e *env) checkNoCodeLeaked() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, code := range e.human.Codes() {
		for _, b := range e.agentBodies {
			if bytes.Contains(b, []byte(code)) {
				e.t.Errorf("the verification code %s reached an agent:\n%s", code, b)
			}
		}
	}
}

// pendingApproval makes a confirm decision of deploy-bot and returns it.
func (e *env) pendingApproval(call map[string]any) portcullis.Decision {
	e.t.Helper()
	d := e.decide(botToken, call)
	if d.Outcome != portcullis.OutcomeConfirm || d.ChallengeID == "" {
		e.t.Fatalf("decide(%v) = %s (%s), challenge %q; want confirm with an approval request", call, d.Outcome, d.Reason, d.ChallengeID)
	}
	return d
}

func (e *env) auditRows(kind portcullis.AuditKind) []portcullis.AuditEvent {
	e.t.Helper()
	recs, err := e.store.QueryAudit(context.Background(), portcullis.AuditQuery{Kind: kind, Limit: 1000})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []portcullis.AuditEvent
	for _, r := range recs {
		ev, err := r.Event()
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}
