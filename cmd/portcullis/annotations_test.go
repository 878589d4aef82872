package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPTrustAnnotations runs the stdio wrapper in front of a server that
// marks read_note read-only, under a policy that names no tool: the
// server's own claim is not enough to auto-approve it, unless the operator
// passes --trust-annotations.
func TestMCPTrustAnnotations(t *testing.T) {
	dir := t.TempDir()
	policyPath := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policyPath, []byte("version: 1\nunknownTools: confirm\napprovals: {wait: 100ms}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	readNote := func(state string, flags ...string) *mcp.CallToolResult {
		t.Helper()
		args := append([]string{"--policy", policyPath, "--state", state}, flags...)
		args = append(args, "--", "env", upstreamEnv+"=1", os.Args[0], "-test.run=^$")
		cmd := wrapperCmd(t, args...)
		cmd.Stderr = os.Stderr
		ctx := context.Background()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "trust-test", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_note", Arguments: map[string]any{"id": 1}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := readNote(filepath.Join(dir, "untrusted"))
	if !res.IsError || strings.HasPrefix(resultText(res), "read_note ") {
		t.Fatalf("read_note with untrusted annotations = %q (isError %v); want it held for a person, never forwarded", resultText(res), res.IsError)
	}
	res = readNote(filepath.Join(dir, "trusted"), "--trust-annotations")
	if res.IsError || !strings.HasPrefix(resultText(res), "read_note ") {
		t.Fatalf("read_note with --trust-annotations = %q (isError %v); want it classified READ and forwarded", resultText(res), res.IsError)
	}
}

// TestToolAddedBetweenRunsIsHeld runs the stdio wrapper twice on one state
// directory; the second time the server offers tools it did not offer the
// first time. They are held for a person (never forwarded), whatever their
// annotations, even with --trust-annotations; portcullis tools lists them
// as new, and a person accepts one.
func TestToolAddedBetweenRunsIsHeld(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	policyPath := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policyPath, []byte("version: 1\nunknownTools: confirm\ntools:\n  run_shell: {endpoint: READ}\napprovals: {wait: 100ms}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	callLog := filepath.Join(dir, "calls.jsonl")
	connect := func(env ...string) *mcp.ClientSession {
		t.Helper()
		args := []string{"--policy", policyPath, "--state", state, "--name", "notes", "--trust-annotations", "--", "env", upstreamEnv + "=1"}
		args = append(append(args, env...), os.Args[0], "-test.run=^$")
		cmd := wrapperCmd(t, args...)
		cmd.Stderr = os.Stderr
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "new-tool-test", Version: "1"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	callTool := func(cs *mcp.ClientSession, name string) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	first := connect()
	if res := callTool(first, "read_note"); res.IsError {
		t.Fatalf("read_note on the first run = %q; want it allowed", resultText(res))
	}
	first.Close()

	// The second run's server also offers delete_note, run_shell and send_note.
	second := connect(upstreamLogEnv + "=" + callLog)
	for _, tool := range []string{"run_shell", "send_note"} {
		if res := callTool(second, tool); !res.IsError || !strings.Contains(resultText(res), "No person answered") {
			t.Fatalf("%s, new since the first run = %q (isError %v); want it held for a person", tool, resultText(res), res.IsError)
		}
	}
	if b, err := os.ReadFile(callLog); err != nil || strings.Contains(string(b), `"tool"`) {
		t.Fatalf("the upstream received calls to new tools no person accepted: %s %v", b, err)
	}
	code, out, stderr := runCLI(t, "", "tools", "--state", state)
	if code != 0 {
		t.Fatalf("portcullis tools: exit %d: %s", code, stderr)
	}
	for _, want := range []string{"run_shell", "send_note", "delete_note", "NEW (held)", "read_note"} {
		if !strings.Contains(out, want) {
			t.Fatalf("portcullis tools does not show %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, " * ") || strings.Contains(out, "notes  *") {
		t.Fatalf("portcullis tools lists the tool-set pin as a tool:\n%s", out)
	}
	code, out, stderr = runCLI(t, "", "tools", "accept", "--as", "ana", "--state", state, "notes", "run_shell")
	if code != 0 || !strings.Contains(out, "new tool") {
		t.Fatalf("tools accept: exit %d, %q, %q; want the new tool's definition shown and accepted", code, out, stderr)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		res := callTool(second, "run_shell")
		if !res.IsError {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run_shell after acceptance = %q; want it allowed (READ in the policy)", resultText(res))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
