package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// `portcullis mcp` in front of a real TypeScript-SDK server that prints
// log lines on its stdout, between and during its answers: the wrapper
// skips them and keeps the upstream's session, so a call in flight
// meanwhile is answered and the upstream is never restarted.
func TestE2EStrayStdoutLinesThroughTheWrapper(t *testing.T) {
	e2e := e2eDir(t)
	dir := t.TempDir()
	pol := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(pol, []byte("version: 1\ntools:\n  echo: {endpoint: READ}\n  noisy: {endpoint: READ}\n  slow: {endpoint: READ}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := wrapperCmd(t, "--policy", pol, "--state", filepath.Join(dir, "state"), "--agent", "e2e-bot", "--",
		"node", filepath.Join(e2e, "noisy-server.mjs"))
	cmd.Stderr = os.Stderr
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-go", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	type answer struct {
		res *mcp.CallToolResult
		err error
	}
	slow := make(chan answer, 1)
	go func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"text": "slow one", "ms": 1500}})
		slow <- answer{res, err}
	}()
	for i := range 3 {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "noisy", Arguments: map[string]any{"text": "loud"}})
		if err != nil || res.IsError || resultText(res) != "loud" {
			t.Fatalf("noisy call %d = %v %+v; want its answer", i, err, res)
		}
	}
	if a := <-slow; a.err != nil || a.res.IsError || resultText(a.res) != "slow one" {
		t.Fatalf("the call in flight while the server printed = %v %+v; want its answer", a.err, a.res)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "still here"}})
	if err != nil || res.IsError || resultText(res) != "still here" {
		t.Fatalf("echo = %v %+v", err, res)
	}
}
