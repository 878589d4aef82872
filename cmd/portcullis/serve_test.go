package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/policy"
	"github.com/portcullis/portcullis/postgres"
)

const servePolicy = `version: 1
tools:
  read_note:  {endpoint: READ}
  write_note: {endpoint: UPDATE}
approvals:
  wait: 60s
`

// serveProc is a running `portcullis serve` process.
type serveProc struct {
	cmd *exec.Cmd
	url string // base URL
}

// startServe starts `portcullis serve --config cfg` and waits for its
// "serving" line.
func startServe(t testing.TB, cfg string) *serveProc {
	t.Helper()
	raw, _ := json.Marshal([]string{"serve", "--config", cfg, "--listen", "127.0.0.1:0"})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), mainArgsEnv+"="+string(raw))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { terminate(cmd, 10*time.Second) })
	u, err := awaitServing(out)
	if err != nil {
		t.Fatal(err)
	}
	return &serveProc{cmd: cmd, url: u}
}

// terminate ends cmd with SIGTERM and waits for it, killing it if it has
// not exited within grace.
func terminate(cmd *exec.Cmd, grace time.Duration) {
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		cmd.Process.Kill()
		<-done
	}
}

// awaitServing reads serve's standard output until its "serving MCP on"
// line and returns the gateway's base URL; the rest of the output is
// read and dropped. It fails when the output ends first, or after a
// minute.
func awaitServing(out io.Reader) (string, error) {
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				return "", errors.New("serve exited before serving")
			}
			if i := strings.Index(l, "serving MCP on "); i >= 0 {
				u := strings.Fields(l[i+len("serving MCP on "):])[0]
				go func() {
					for range lines {
					}
				}()
				return strings.TrimSuffix(u, "/mcp"), nil
			}
		case <-deadline:
			return "", errors.New("serve did not start within a minute")
		}
	}
}

type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

func connectHTTP(t *testing.T, base, token string) *mcp.ClientSession {
	t.Helper()
	tr := &mcp.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "serve-test", Version: "1"}, nil).Connect(context.Background(), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func writeServeConfig(t testing.TB, store string) (cfgPath, token string) {
	t.Helper()
	dir := t.TempDir()
	var b [16]byte
	rand.Read(b[:])
	token = hex.EncodeToString(b[:])
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte(servePolicy), 0o600))
	must(os.WriteFile(filepath.Join(dir, "bot.token"), []byte(token+"\n"), 0o600))
	upArgs, _ := json.Marshal([]string{os.Args[0], "-test.run=^$"})
	cfg := fmt.Sprintf(`policy: policy.yaml
state: state
store: %q
agents:
  - name: bot
    tokenFile: bot.token
upstreams:
  - name: notes
    command: %s
    env: {%s: "1"}
`, store, upArgs, upstreamEnv)
	cfgPath = filepath.Join(dir, "portcullis.yaml")
	must(os.WriteFile(cfgPath, []byte(cfg), 0o600))
	return cfgPath, token
}

func TestServeRefusesAgentsWithoutToken(t *testing.T) {
	cfg, token := writeServeConfig(t, "")
	s := startServe(t, cfg)
	for _, tok := range []string{"", "wrong"} {
		req, _ := http.NewRequest("POST", s.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("token %q: status %d; want 401", tok, resp.StatusCode)
		}
	}
	cs := connectHTTP(t, s.url, token)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "read_note", Arguments: map[string]any{"id": 1}})
	if err != nil || res.IsError {
		t.Fatalf("read through serve: %v %+v", err, res)
	}

	// The same process serves the approvals API (people's token only),
	// the health probes and the console.
	human, err := os.ReadFile(filepath.Join(filepath.Dir(cfg), "state", "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	get := func(path, tok string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", s.url+path, nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		path, tok string
		want      int
	}{
		{"/healthz", "", 200},
		{"/readyz", "", 200},
		{"/v1/approvals", token, 403},
		{"/v1/approvals", strings.TrimSpace(string(human)), 200},
		{"/v1/openapi.json", "", 200},
	} {
		if got := get(c.path, c.tok); got != c.want {
			t.Errorf("GET %s (token %.6q…) = %d; want %d", c.path, c.tok, got, c.want)
		}
	}
	if got := get("/", ""); got != 200 && got != 303 && got != 302 {
		t.Errorf("GET / (the console) = %d; want its login page", got)
	}
}

// TestServeReplicasSharePostgres runs two `portcullis serve` processes on
// one PostgreSQL: an approval answered by a person elsewhere releases the
// call held by one replica, and a block is in force on both at once.
func TestServeReplicasSharePostgres(t *testing.T) {
	dsn := os.Getenv("PORTCULLIS_TEST_POSTGRES_DSN")
	if dsn == "" {
		t.Skip("PORTCULLIS_TEST_POSTGRES_DSN is not set")
	}
	var b [6]byte
	rand.Read(b[:])
	schema := "serve_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), dsn)
		if err == nil {
			conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
			conn.Close(context.Background())
		}
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("schema", schema)
	u.RawQuery = q.Encode()
	cfg, token := writeServeConfig(t, u.String())
	a := startServe(t, cfg)
	b2 := startServe(t, cfg)

	ctx := context.Background()
	st, err := postgres.Open(ctx, dsn, postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	pol, _, err := policy.Parse("policy.yaml", []byte(servePolicy))
	if err != nil {
		t.Fatal(err)
	}
	person, err := gate.New(pol, gate.WithStore(st))
	if err != nil {
		t.Fatal(err)
	}

	csA, csB := connectHTTP(t, a.url, token), connectHTTP(t, b2.url, token)
	var wg sync.WaitGroup
	var held *mcp.CallToolResult
	wg.Go(func() {
		r, err := csA.CallTool(ctx, &mcp.CallToolParams{Name: "write_note", Arguments: map[string]any{"id": 7}})
		if err != nil {
			t.Error(err)
		}
		held = r
	})
	var pending []portcullis.Approval
	deadline := time.Now().Add(30 * time.Second)
	for len(pending) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the write held by replica A never showed as pending")
		}
		time.Sleep(20 * time.Millisecond)
		if pending, err = st.Approvals(ctx, portcullis.ApprovalFilter{Status: portcullis.ApprovalPending}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := person.Approve(ctx, pending[0].ID, "ana", false); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if held == nil || held.IsError || !strings.HasPrefix(held.Content[0].(*mcp.TextContent).Text, "write_note") {
		t.Fatalf("the approved write on replica A = %+v", held)
	}

	if _, err := person.BlockAgent(ctx, "bot", "replica test", "d-replica"); err != nil {
		t.Fatal(err)
	}
	for name, cs := range map[string]*mcp.ClientSession{"A": csA, "B": csB} {
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_note", Arguments: map[string]any{"id": 1}})
		if err != nil {
			t.Fatal(err)
		}
		if !r.IsError || !strings.Contains(r.Content[0].(*mcp.TextContent).Text, "blocked") {
			t.Fatalf("replica %s let a blocked agent read: %+v", name, r.Content)
		}
	}
}

// BenchmarkServeIdleMemory builds the portcullis binary, starts `serve`
// with one upstream, and reports the idle process's resident memory: all of
// it, and the anonymous part (heap, stacks) without the binary's
// file-backed pages.
func BenchmarkServeIdleMemory(b *testing.B) {
	bin := filepath.Join(b.TempDir(), "portcullis")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	for b.Loop() {
		b.StopTimer()
		cfg, _ := writeServeConfig(b, "")
		cmd := exec.Command(bin, "serve", "--config", cfg, "--listen", "127.0.0.1:0")
		out, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		for sc.Scan() && !strings.Contains(sc.Text(), "serving MCP") {
		}
		go io.Copy(io.Discard, out)
		time.Sleep(3 * time.Second) // idle
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
		cmd.Process.Kill()
		cmd.Wait()
		if err != nil {
			b.Fatal(err)
		}
		for _, line := range strings.Split(string(status), "\n") {
			for key, metric := range map[string]string{"VmRSS:": "idle-RSS-MB", "RssAnon:": "idle-anon-MB"} {
				if strings.HasPrefix(line, key) {
					var kb float64
					fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(line, key)), "%f", &kb)
					b.ReportMetric(kb/1024, metric)
				}
			}
		}
		b.StartTimer()
	}
}
