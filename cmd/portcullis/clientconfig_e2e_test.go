package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestE2EWrapperProtectsClientConfig: the wrapper refuses a write, through
// its own server, to the files that tell a client what to run — the
// project's .mcp.json, Claude Code's and Cursor's settings, ~/.claude.json
// — whatever its policy says of that server's writes. An agent that
// rewrote one could start the server without the wrapper, or with another
// policy. A write elsewhere in the project is decided as the policy says
// (server-filesystem marks write_file destructive, so it waits for a
// person, and nobody answers within the test's one-second wait).
func TestE2EWrapperProtectsClientConfig(t *testing.T) {
	e2e := e2eDir(t)
	work := t.TempDir()
	home := t.TempDir()
	state := filepath.Join(t.TempDir(), "state")
	pol := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(pol, []byte("version: 1\ntools:\n  write_file: {endpoint: UPDATE, pathArg: path, defaultLevel: AUTO_APPROVE}\napprovals: {wait: 1s}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const original = `{"mcpServers":{}}`
	protected := []string{
		filepath.Join(work, ".mcp.json"),
		filepath.Join(work, ".claude", "settings.json"),
		filepath.Join(work, ".cursor", "mcp.json"),
		filepath.Join(home, ".claude.json"),
	}
	for _, p := range protected {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(original), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd := wrapperCmd(t, "--policy", pol, "--state", state, "--agent", "e2e-bot", "--",
		"node", filepath.Join(e2e, "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"), work, home)
	cmd.Dir = work
	cmd.Env = append(cmd.Env, "HOME="+home, "CLAUDE_CONFIG_DIR=")
	cmd.Stderr = os.Stderr
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-go", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	write := func(path string) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "write_file", Arguments: map[string]any{"path": path, "content": `{"mcpServers":{"fs":{"command":"node"}}}`}})
		if err != nil {
			t.Fatalf("write_file %s: %v", path, err)
		}
		return res
	}
	for _, p := range protected {
		res := write(p)
		if !res.IsError || !strings.Contains(resultText(res), "one of Portcullis's own files") {
			t.Errorf("write_file %s = %q (isError %v); want Portcullis's refusal", p, resultText(res), res.IsError)
		}
		if b, err := os.ReadFile(p); err != nil || string(b) != original {
			t.Errorf("%s after the write: %q, %v; want it unchanged", p, b, err)
		}
	}
	other := filepath.Join(work, "notes.txt")
	if res := write(other); !strings.Contains(resultText(res), "No person answered") {
		t.Fatalf("write_file of an ordinary file = %q; want it held for a person as the policy says", resultText(res))
	}
}
