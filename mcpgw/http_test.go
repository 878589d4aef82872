package mcpgw_test

import (
	"net/http"
	"testing"
	"time"
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
