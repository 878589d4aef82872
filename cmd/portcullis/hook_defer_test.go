package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHookDeferMCP runs `hook claude-code --defer-mcp filesystem` as
// Claude Code does, with the user's ~/.claude.json naming the server
// behind `portcullis mcp`: the server's tools are left to the wrapper;
// rewriting the project's .mcp.json (which could shadow the wrapped
// definition) is denied; an unwrapped definition is decided as before.
func TestHookDeferMCP(t *testing.T) {
	root := t.TempDir()
	home := filepath.Join(root, "home")
	project := filepath.Join(root, "project")
	for _, d := range []string{home, project} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("HOME", home)
	t.Setenv("CLAUDE_CONFIG_DIR", "")
	t.Setenv("CLAUDE_PROJECT_DIR", project)
	writeServer := func(command string, args ...string) {
		b, err := json.Marshal(map[string]any{"mcpServers": map[string]any{"filesystem": map[string]any{"type": "stdio", "command": command, "args": args}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(home, ".claude.json"), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	hookArgs := []string{"hook", "claude-code", "--policy", claudePolicy, "--state", filepath.Join(root, "state"), "--defer-mcp", "filesystem"}
	read := claudeEvent(t, "mcp__filesystem__read_text_file", map[string]any{"path": filepath.Join(project, "a.txt")})

	writeServer("/usr/local/bin/portcullis", "mcp", "--policy", "/etc/portcullis/fs.yaml", "--", "npx", "-y", "@modelcontextprotocol/server-filesystem", project)
	code, out, stderr := runCLI(t, read, hookArgs...)
	if d, reason := preToolUse(t, out); code != 0 || d != "allow" || !strings.Contains(reason, "Portcullis MCP wrapper") {
		t.Errorf("a read of the wrapped server: exit %d, %s (%s; %s); want allow, left to the wrapper", code, d, reason, stderr)
	}
	for _, path := range []string{filepath.Join(project, ".mcp.json"), filepath.Join(home, ".claude.json")} {
		code, out, _ = runCLI(t, claudeEvent(t, "Write", map[string]any{"file_path": path, "content": "{}"}), hookArgs...)
		if d, reason := preToolUse(t, out); code != 0 || d != "deny" {
			t.Errorf("a Write of %s while servers are deferred: exit %d, %s (%s); want deny", path, code, d, reason)
		}
	}

	writeServer("npx", "-y", "@modelcontextprotocol/server-filesystem", project)
	code, out, _ = runCLI(t, read, hookArgs...)
	if d, reason := preToolUse(t, out); code != 0 || d != "ask" {
		t.Errorf("a read of the server, not wrapped: exit %d, %s (%s); want ask, decided by the hook", code, d, reason)
	}

	for _, args := range [][]string{
		{"hook", "claude-code", "--policy", claudePolicy, "--defer-mcp", "a__b"},
		{"hook", "codex", "--policy", claudePolicy, "--defer-mcp", "filesystem"},
	} {
		code, out, _ := runCLI(t, read, args...)
		if code != 2 || !strings.Contains(out, "deny") {
			t.Errorf("%q: exit %d, %s; want 2 and a deny", args, code, out)
		}
	}
}

// TestHookInstallDeferMCP: `hook install claude-code --defer-mcp SERVER`
// writes the flag into the hook command in the settings.
func TestHookInstallDeferMCP(t *testing.T) {
	bin := lastingBinary(t)
	project := t.TempDir()
	code, out, errOut := runCLI(t, "", "hook", "install", "claude-code", "--dir", project, "--policy", claudePolicy, "--defer-mcp", "filesystem", "--defer-mcp", "github", "--binary", bin)
	if code != 0 {
		t.Fatalf("install: exit %d: %s%s", code, out, errOut)
	}
	b, err := os.ReadFile(filepath.Join(project, ".claude", "settings.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "--defer-mcp filesystem --defer-mcp github") {
		t.Errorf("settings:\n%s\nwant the hook command to carry --defer-mcp filesystem --defer-mcp github", b)
	}
	if code, _, _ := runCLI(t, "", "hook", "install", "codex", "--policy", claudePolicy, "--defer-mcp", "filesystem"); code != 2 {
		t.Errorf("hook install codex --defer-mcp: exit %d; want 2", code)
	}
}
