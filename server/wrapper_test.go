package server_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/mcpgw"
	"github.com/portcullis/portcullis/policy"
	"github.com/portcullis/portcullis/server"
	"github.com/portcullis/portcullis/sqlite"
)

// upstreamEnv makes the test binary a stdio MCP server with the tools of
// testPolicy: the wrapper's real upstream.
const upstreamEnv = "PORTCULLIS_SERVER_TEST_UPSTREAM"

func TestMain(m *testing.M) {
	if os.Getenv(upstreamEnv) == "1" {
		s := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "1"}, nil)
		type args struct {
			Name string `json:"name"`
		}
		for _, name := range []string{"read_note", "write_note"} {
			mcp.AddTool(s, &mcp.Tool{Name: name}, func(ctx context.Context, req *mcp.CallToolRequest, a args) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + " " + a.Name}}}, nil, nil
			})
		}
		if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// syncBuffer is a buffer written by one goroutine and read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// wrapperOptions are a Wrapper's options as the binary gives them: the
// test binary as the upstream, a SQLite store in a state directory, a
// gate built from the policy file.
func wrapperOptions(t *testing.T) server.WrapperOptions {
	dir := t.TempDir()
	pol := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(pol, []byte(testPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	return server.WrapperOptions{
		Command: []string{"env", upstreamEnv + "=1", os.Args[0], "-test.run=^$"},
		Name:    "notes",
		Policy:  pol,
		OpenStore: func(ctx context.Context) (portcullis.Store, string, error) {
			if err := os.MkdirAll(state, 0o700); err != nil {
				return nil, "", err
			}
			st, err := sqlite.Open(ctx, filepath.Join(state, "portcullis.db"), sqlite.Options{})
			return st, state, err
		},
		LoadGate: func(path string, opts ...gate.Option) (*gate.Gate, error) {
			pol, _, err := policy.Load(path)
			if err != nil {
				return nil, err
			}
			return gate.New(pol, opts...)
		},
		// A channel of its own, so that the test never reaches for the
		// desktop.
		Notifier: notifyFunc(func(portcullis.Notice) {}),
		Channels: []string{"the test"},
	}
}

type notifyFunc func(portcullis.Notice)

func (f notifyFunc) Notify(_ context.Context, n portcullis.Notice) error { f(n); return nil }

// wrapperClient runs the wrapper w on pipes and connects an MCP client to
// it; run receives what Run returned.
func wrapperClient(t *testing.T, w *server.Wrapper, signals chan os.Signal) (*mcp.ClientSession, <-chan error) {
	t.Helper()
	cr, ww := io.Pipe() // the wrapper's stdout
	wr, cw := io.Pipe() // the wrapper's stdin
	run := make(chan error, 1)
	go func() { run <- w.Run(context.Background(), wr, ww, signals) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(), &mcp.IOTransport{Reader: cr, Writer: cw}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cs, run
}

func TestWrapperGatesItsUpstream(t *testing.T) {
	opts := wrapperOptions(t)
	w := server.NewWrapper(opts)
	if err := w.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	cs, run := wrapperClient(t, w, make(chan os.Signal))
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "read_note", Arguments: map[string]any{"name": "a"}})
	if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "read_note a" {
		t.Fatalf("read_note through the wrapper = %+v, %v; want the upstream's answer", res, err)
	}
	// The client leaving ends Run without an error.
	cs.Close()
	if err := <-run; err != nil {
		t.Fatalf("Run after the client left = %v; want nil", err)
	}
	w.Close()
	st, err := sqlite.Open(context.Background(), filepath.Join(filepath.Dir(opts.Policy), "state", "portcullis.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	recs, err := st.QueryAudit(context.Background(), portcullis.AuditQuery{Tool: "read_note", Agent: "notes"})
	if err != nil || len(recs) != 1 {
		t.Fatalf("audit rows of read_note = %+v, %v; want one, of agent notes (the upstream's name)", recs, err)
	}
}

func TestWrapperRefusesAnUpstreamThatCannotStart(t *testing.T) {
	opts := wrapperOptions(t)
	opts.Command = []string{filepath.Join(t.TempDir(), "no-such-server")}
	opened := false
	open := opts.OpenStore
	opts.OpenStore = func(ctx context.Context) (portcullis.Store, string, error) {
		opened = true
		return open(ctx)
	}
	err := server.NewWrapper(opts).Open(context.Background())
	if err == nil || !strings.Contains(err.Error(), "no-such-server") {
		t.Fatalf("Open with a missing upstream = %v; want an error naming it", err)
	}
	if opened {
		t.Error("the store was opened for an upstream that cannot start")
	}
}

func TestWrapperServesMetrics(t *testing.T) {
	opts := wrapperOptions(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	opts.Metrics = ln
	w := server.NewWrapper(opts)
	if err := w.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	url := "http://" + ln.Addr().String() + "/metrics"
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /metrics without the token = %d; want 401", resp.StatusCode)
	}
	tok, err := os.ReadFile(filepath.Join(filepath.Dir(opts.Policy), "state", "metrics.token"))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "portcullis_") {
		t.Fatalf("GET /metrics with the token = %d %q, %v; want the metrics", resp.StatusCode, body, err)
	}
	w.Close()
	if _, err := http.Get(url); err == nil {
		t.Error("after Close the metrics are still served")
	}
}

// heldCall starts a write_note call, which the policy holds for a
// person, and returns once the gateway holds it; result receives the
// call's answer.
func heldCall(t *testing.T, cs *mcp.ClientSession, held func() int) <-chan *mcp.CallToolResult {
	t.Helper()
	result := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "write_note", Arguments: map[string]any{"name": "a"}})
		if err != nil {
			res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "error: " + err.Error()}}}
		}
		result <- res
	}()
	deadline := time.Now().Add(30 * time.Second)
	for held() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the write_note call was never held for a person")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return result
}

func resultText(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// TestUntilStoppedSIGTERMRefusesHeldCalls: SIGTERM refuses the calls
// held for a person at once, each agent told why, each refusal audited
// as the operator's.
func TestUntilStoppedSIGTERMRefusesHeldCalls(t *testing.T) {
	cfg := loadConfig(t, "")
	srv := server.New(options(t, cfg))
	if err := srv.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cs := agentSession(t, srv, cfg)
	defer cs.Close()
	result := heldCall(t, cs, func() int { return len(srv.Gateway().Held()) })

	signals := make(chan os.Signal, 1)
	signals <- syscall.SIGTERM
	var stderr syncBuffer
	ended, err := server.UntilStopped(context.Background(), signals, server.Held{Gateway: srv.Gateway(), Gate: srv.Gate(), Stderr: &stderr}, srv.Failed())
	if ended || err != nil {
		t.Fatalf("UntilStopped on SIGTERM = %v, %v; want false, nil", ended, err)
	}
	if got := stderr.String(); !strings.Contains(got, "refused 1 held call: the gateway was stopped (SIGTERM) before a person answered") {
		t.Errorf("stderr = %q; want it to say the held call was refused on SIGTERM", got)
	}
	res := <-result
	if !res.IsError || !strings.Contains(resultText(res), "stopped (SIGTERM)") {
		t.Errorf("the held call's answer = %q (isError %v); want a refusal naming SIGTERM", resultText(res), res.IsError)
	}
	if n := len(srv.Gateway().Held()); n != 0 {
		t.Errorf("%d calls still held after the refusal", n)
	}
}

// TestUntilStoppedCtrlCTwice: a first Ctrl-C lists the held calls and
// keeps serving; a second refuses them.
func TestUntilStoppedCtrlCTwice(t *testing.T) {
	cfg := loadConfig(t, "")
	srv := server.New(options(t, cfg))
	if err := srv.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cs := agentSession(t, srv, cfg)
	defer cs.Close()
	result := heldCall(t, cs, func() int { return len(srv.Gateway().Held()) })

	signals := make(chan os.Signal)
	var stderr syncBuffer
	type stopped struct {
		ended bool
		err   error
	}
	done := make(chan stopped, 1)
	go func() {
		ended, err := server.UntilStopped(context.Background(), signals, server.Held{
			Gateway: srv.Gateway(), Gate: srv.Gate(), Stderr: &stderr,
			Answer: func(h mcpgw.HeldCall) string { return " | console/" + h.ApprovalID },
		}, srv.Failed())
		done <- stopped{ended, err}
	}()
	signals <- os.Interrupt
	id := srv.Gateway().Held()[0].ApprovalID
	// The second send is taken only once the first was answered: the
	// listing is written by then.
	signals <- os.Interrupt
	s := <-done
	if s.ended || s.err != nil {
		t.Fatalf("UntilStopped after two Ctrl-C = %v, %v; want false, nil", s.ended, s.err)
	}
	got := stderr.String()
	for _, want := range []string{
		"stopping, but 1 call waiting for a person's answer",
		"write_note of agent bot",
		"portcullis approve " + id + " | portcullis deny " + id + " | console/" + id,
		"press Ctrl-C again",
		"refused 1 held call: the gateway was stopped (Ctrl-C) before a person answered",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("stderr = %q; want it to contain %q", got, want)
		}
	}
	if res := <-result; !res.IsError || !strings.Contains(resultText(res), "stopped (Ctrl-C)") {
		t.Errorf("the held call's answer = %q; want a refusal naming Ctrl-C", resultText(res))
	}
	a, err := srv.Gate().AwaitApproval(context.Background(), id)
	if err != nil || a.Status != portcullis.ApprovalDenied || a.DecidedBy != server.RefusedBy {
		t.Errorf("approval %s = %+v, %v; want denied by %q", id, a, err, server.RefusedBy)
	}
}

// TestUntilStoppedNothingHeld: a signal with no call held stops at once;
// serving that ends returns what it ended with.
func TestUntilStoppedNothingHeld(t *testing.T) {
	cfg := loadConfig(t, "")
	srv := server.New(options(t, cfg))
	if err := srv.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	h := server.Held{Gateway: srv.Gateway(), Gate: srv.Gate()}
	signals := make(chan os.Signal, 1)
	signals <- os.Interrupt
	if ended, err := server.UntilStopped(context.Background(), signals, h, nil); ended || err != nil {
		t.Errorf("UntilStopped on Ctrl-C with nothing held = %v, %v; want false, nil", ended, err)
	}
	done := make(chan error, 1)
	done <- io.ErrUnexpectedEOF
	if ended, err := server.UntilStopped(context.Background(), nil, h, done); !ended || err != io.ErrUnexpectedEOF {
		t.Errorf("UntilStopped when serving ended = %v, %v; want true and its error", ended, err)
	}
}

// agentSession is the configured agent's MCP session with srv.
func agentSession(t *testing.T, srv *server.Server, cfg *server.Config) *mcp.ClientSession {
	t.Helper()
	tok, err := os.ReadFile(cfg.Agents[0].TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	tr := &mcp.StreamableClientTransport{Endpoint: srv.URL() + "/mcp", HTTPClient: &http.Client{Transport: bearer{strings.TrimSpace(string(tok))}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}
