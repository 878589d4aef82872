package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestServeUnauthenticatedClientsCannotHoldConnections replays the attack
// of clients that send a request's headers with no token and then trickle
// its body, against a real `portcullis serve`: 5,000 of them at once, on
// the MCP endpoint, the decision API, the approvals API, the console's
// login form (which reads its body before any credential) and an unknown
// path. While they trickle, /healthz and an authenticated MCP call are
// answered; soon after (the config's short timeouts), the gateway holds
// none of their connections: each one sees the server close it.
func TestServeUnauthenticatedClientsCannotHoldConnections(t *testing.T) {
	const n = 5000
	// This process holds one end of each connection and the gateway the
	// other; Go raises the soft limit of open files to the hard one.
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Cur < n+1000 {
		t.Fatalf("the limit of open files is %d; this test needs %d: raise it (ulimit -n)", lim.Cur, n+1000)
	}
	cfg, token := writeServeConfig(t, "")
	f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(f, "http:\n  readHeaderTimeout: 2s\n  bodyTimeout: 2s\n  idleTimeout: 2s\n")
	f.Close()
	s := startServe(t, cfg)
	u, err := url.Parse(s.url)
	if err != nil {
		t.Fatal(err)
	}
	addr := u.Host

	targets := []string{
		"POST /mcp HTTP/1.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n",
		"POST /v1/decide HTTP/1.1\r\nContent-Type: application/json\r\n",
		"POST /v1/approvals/x/approve HTTP/1.1\r\nContent-Type: application/json\r\n",
		"POST /login HTTP/1.1\r\nContent-Type: application/x-www-form-urlencoded\r\nOrigin: http://" + addr + "\r\n",
		"POST /nowhere HTTP/1.1\r\n",
	}
	conns := make([]net.Conn, n)
	var closed atomic.Int64
	var mu sync.Mutex // guards conns while the trickler writes
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	})
	// Dial them all, a few hundred at a time.
	sem := make(chan struct{}, 200)
	var dialErr atomic.Value
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := net.DialTimeout("tcp", addr, 30*time.Second)
			if err != nil {
				dialErr.Store(err)
				return
			}
			head := targets[i%len(targets)] + "Host: " + addr + "\r\nContent-Length: 100000\r\n\r\n{"
			if _, err := io.WriteString(c, head); err != nil {
				c.Close()
				dialErr.Store(err)
				return
			}
			mu.Lock()
			conns[i] = c
			mu.Unlock()
			go func() {
				// Read until the server closes the connection (EOF or a
				// reset): then it no longer holds it.
				io.Copy(io.Discard, c)
				closed.Add(1)
			}()
		}()
	}
	wg.Wait()
	if err, _ := dialErr.Load().(error); err != nil {
		t.Fatalf("opening the attacking connections: %v", err)
	}
	// Trickle one byte a second into every connection.
	stop := make(chan struct{})
	trickled := make(chan struct{})
	go func() {
		defer close(trickled)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			mu.Lock()
			for _, c := range conns {
				c.SetWriteDeadline(time.Now().Add(10 * time.Millisecond))
				c.Write([]byte(" "))
			}
			mu.Unlock()
		}
	}()
	defer func() { close(stop); <-trickled }()

	// While they trickle, the gateway answers a probe and an agent. The
	// client timeouts are generous: only failing to answer fails.
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(s.url + "/healthz")
	if err != nil {
		t.Fatalf("/healthz during the flood: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz during the flood = %d; want 200", resp.StatusCode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tr := &mcp.StreamableClientTransport{Endpoint: s.url + "/mcp", HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "flood-test", Version: "1"}, nil).Connect(ctx, tr, nil)
	if err != nil {
		t.Fatalf("an agent connecting during the flood: %v", err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_note", Arguments: map[string]any{"id": 1}})
	if err != nil || res.IsError {
		t.Fatalf("an authenticated MCP call during the flood: %v %+v", err, res)
	}

	// 15 seconds on, the gateway holds none of the attacking connections.
	deadline := time.Now().Add(15 * time.Second)
	for closed.Load() < n && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if held := n - closed.Load(); held > 0 {
		var b strings.Builder
		if fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", s.cmd.Process.Pid)); err == nil {
			fmt.Fprintf(&b, " (the gateway has %d open files)", len(fds))
		}
		t.Fatalf("15s after the flood began, the gateway still held %d of the %d unauthenticated connections%s", held, n, b.String())
	}
}

// TestServeWrongTokensLockNoOneOut replays the lock-out against a real
// `portcullis serve`: a local process with no token floods the API and the
// MCP endpoint with wrong ones from the address every local client shares.
// It is limited (429) and counted (portcullis_auth_failures_total); the
// person's token and the agent's keep working throughout.
func TestServeWrongTokensLockNoOneOut(t *testing.T) {
	cfg, token := writeServeConfig(t, "")
	s := startServe(t, cfg)
	dir := filepath.Join(filepath.Dir(cfg), "state")
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	human, metricsToken := read("admin.token"), read("metrics.token")
	do := func(method, path, tok string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, s.url+path, strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b)
	}
	limited := 0
	for i := range 40 {
		method, path := "GET", "/v1/approvals"
		if i%2 == 1 {
			method, path = "POST", "/mcp"
		}
		status, _ := do(method, path, fmt.Sprintf("guess-%d-0123456789abcdef", i))
		switch status {
		case http.StatusUnauthorized:
		case http.StatusTooManyRequests:
			limited++
		default:
			t.Fatalf("wrong token %d on %s = %d; want 401 or 429", i, path, status)
		}
		if i%5 == 4 {
			if status, body := do("GET", "/v1/approvals", human); status != http.StatusOK {
				t.Fatalf("the human token during the flood = %d %s; want 200", status, body)
			}
		}
	}
	if limited == 0 {
		t.Fatal("40 wrong tokens in a row were never answered 429")
	}
	cs := connectHTTP(t, s.url, token)
	if res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "read_note", Arguments: map[string]any{"id": 1}}); err != nil || res.IsError {
		t.Fatalf("the agent's MCP call after the flood: %v %+v", err, res)
	}
	status, body := do("GET", "/metrics", metricsToken)
	if status != http.StatusOK {
		t.Fatalf("/metrics = %d", status)
	}
	for _, want := range []string{`portcullis_auth_failures_total{entry="api",limited="true"}`, `portcullis_auth_failures_total{entry="mcp",limited="true"}`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
}

// TestServeMCPOrigin: a real `portcullis serve` refuses a browser's
// request to /mcp from a foreign origin, or for a rebound Host name, even
// with a valid token, as its API and console do; programs that send no
// Origin, and the gateway's own origin, are served.
func TestServeMCPOrigin(t *testing.T) {
	cfg, token := writeServeConfig(t, "")
	s := startServe(t, cfg)
	u, err := url.Parse(s.url)
	if err != nil {
		t.Fatal(err)
	}
	initialize := func(header ...string) int {
		t.Helper()
		req, _ := http.NewRequest("POST", s.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+token)
		for i := 0; i+1 < len(header); i += 2 {
			if header[i] == "Host" {
				req.Host = header[i+1]
				continue
			}
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		name   string
		header []string
		want   int
	}{
		{"no Origin", nil, http.StatusOK},
		{"its own origin", []string{"Origin", s.url}, http.StatusOK},
		{"a foreign site", []string{"Origin", "http://evil.example"}, http.StatusForbidden},
		{"another port of this host", []string{"Origin", "http://" + u.Hostname() + ":5173"}, http.StatusForbidden},
		{"an opaque origin", []string{"Origin", "null"}, http.StatusForbidden},
		{"a rebound name", []string{"Host", "rebound.example:" + u.Port()}, http.StatusForbidden},
	} {
		if got := initialize(c.header...); got != c.want {
			t.Errorf("initialize with a valid token, %s = %d; want %d", c.name, got, c.want)
		}
	}
}
