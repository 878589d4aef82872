package mcpgw_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/portcullis/portcullis/internal/guard"
	"github.com/portcullis/portcullis/mcpgw"
)

// A gateway closed while HTTP clients still hold sessions ends those
// sessions and returns; it does not wait for the clients to leave.
func TestCloseEndsOpenHTTPSessions(t *testing.T) {
	srv, gw := httpGateway(t)
	s, err := rawConnect(http.DefaultClient, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if isErr, err := s.callRaw("read_note", `{"id":1}`); err != nil || isErr {
		t.Fatalf("read_note before Close: isError %v, %v", isErr, err)
	}
	closed := make(chan error, 1)
	go func() { closed <- gw.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not return while a client held a session")
	}
	// The session is gone: the gateway no longer serves it.
	if _, err := s.callRaw("read_note", `{"id":1}`); err == nil {
		t.Fatal("a call on a session of a closed gateway succeeded")
	}
}

// initialize posts an initialize request to the endpoint with the given
// token and headers (name, value pairs; "Host" sets the Host) and returns
// the answer's status.
func initialize(t *testing.T, url, token string, header ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
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
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// A browser's request from a foreign origin is refused even with a valid
// token (the MCP specification: servers must validate Origin); the
// gateway's own origin, and programs that send no Origin, are served.
func TestForeignOriginRefused(t *testing.T) {
	srv, _ := httpGateway(t)
	for _, origin := range []string{"http://evil.example", "null", "http://127.0.0.1:1", strings.Replace(srv.URL, "http:", "https:", 1)} {
		if resp := initialize(t, srv.URL, "agent-token", "Origin", origin); resp.StatusCode != http.StatusForbidden || !resp.Close {
			t.Errorf("initialize with a valid token and Origin %s = %d (connection closed: %v); want 403, closed", origin, resp.StatusCode, resp.Close)
		}
	}
	if resp := initialize(t, srv.URL, "agent-token", "Origin", srv.URL); resp.StatusCode != http.StatusOK {
		t.Errorf("initialize from the gateway's own origin = %d; want 200", resp.StatusCode)
	}
	if resp := initialize(t, srv.URL, "agent-token"); resp.StatusCode != http.StatusOK {
		t.Errorf("initialize without an Origin = %d; want 200", resp.StatusCode)
	}
}

// With the server's guard, the endpoint answers only the allowed Host
// names, as the API and the console do.
func TestGuardHostAllowList(t *testing.T) {
	srv, gw := httpGateway(t)
	gd, err := guard.New(guard.Options{Hosts: []string{"gate.example.com", "127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := gw.Handler(mcpgw.HTTPOptions{Guard: gd, AgentOf: func(tok string) (string, bool) { return "bot", tok == "agent-token" }})
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = h
	for host, want := range map[string]int{
		"gate.example.com":      http.StatusOK, // a public name on a loopback listener: the guard decides, not the SDK
		"gate.example.com.":     http.StatusOK,
		"rebound.example.com":   http.StatusForbidden,
		"localhost":             http.StatusForbidden,
		"gate.example.com.evil": http.StatusForbidden,
	} {
		if resp := initialize(t, srv.URL, "agent-token", "Host", host); resp.StatusCode != want {
			t.Errorf("initialize with Host %s = %d; want %d", host, resp.StatusCode, want)
		}
	}
}

// Wrong tokens are limited per client; a right token is always served,
// during the flood too.
func TestWrongTokensLimitedRightOneServed(t *testing.T) {
	srv, _ := httpGateway(t)
	for i := range 10 {
		if resp := initialize(t, srv.URL, fmt.Sprintf("guess-%d", i)); resp.StatusCode != http.StatusUnauthorized || !resp.Close {
			t.Fatalf("guess %d = %d (connection closed: %v); want 401, closed", i, resp.StatusCode, resp.Close)
		}
	}
	resp := initialize(t, srv.URL, "guess-10")
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("the 11th guess = %d (Retry-After %q); want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{}`))
			req.Header.Set("Authorization", fmt.Sprintf("Bearer flood-%d", i))
			if resp, err := http.DefaultClient.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	s, err := rawConnect(http.DefaultClient, srv.URL)
	if err != nil {
		t.Fatalf("connect with the right token during the flood: %v", err)
	}
	for i := range 10 {
		if isErr, err := s.callRaw("read_note", `{"id":1}`); err != nil || isErr {
			t.Fatalf("call %d with the right token during the flood: isError %v, %v", i, isErr, err)
		}
	}
}
