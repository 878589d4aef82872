package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/portcullis/portcullis/hostconfig"
)

// TestDoctorMCPBinary runs `portcullis doctor` on a project whose
// .mcp.json starts the real server-filesystem (from npm) three ways:
// behind `portcullis mcp` (probed: it answers the handshake and lists its
// tools through the gate), behind a wrapper whose policy file is gone
// (not protected, and doctor says why), and directly (not protected, with
// the command that fixes it). Once the Claude Code hook is installed, the
// direct server's calls are the hook's to decide. Without --trust-project
// doctor starts nothing the project's own files name.
func TestDoctorMCPBinary(t *testing.T) {
	dir := e2eDir(t)
	h := newUserHome(t, buildPortcullis(t, t.TempDir()))
	project := filepath.Join(h.home, "project")
	if err := os.MkdirAll(project, 0o755); err != nil {
		t.Fatal(err)
	}
	fsPolicy := filepath.Join(h.home, ".config", "portcullis", "filesystem.yaml")
	if err := os.MkdirAll(filepath.Dir(fsPolicy), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fsPolicy, []byte("version: 1\ntools:\n  read_text_file: {endpoint: READ, pathArg: path}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	server := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-filesystem", "dist", "index.js")
	gone := filepath.Join(h.home, "gone.yaml")
	wrappedArgs := func(policy string) []string {
		return []string{"mcp", "--policy", policy, "--", "node", server, project}
	}
	writeMCP := func(servers map[string]any) {
		t.Helper()
		b, err := json.Marshal(map[string]any{"mcpServers": servers})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(project, ".mcp.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	doctor := func(flags ...string) (int, map[string]hostconfig.Finding, string) {
		t.Helper()
		code, out, errOut := h.run(t, project, append([]string{"doctor", "claude-code", "--json"}, flags...)...)
		var all []hostconfig.Finding
		if err := json.Unmarshal([]byte(out), &all); err != nil {
			t.Fatalf("doctor --json: %v\n%s%s", err, out, errOut)
		}
		byServer := map[string]hostconfig.Finding{}
		for _, f := range all {
			byServer[f.Server] = f
		}
		return code, byServer, out
	}

	// Without --trust-project, nothing the project's own .mcp.json names
	// is started: a cloned repository can name any command there.
	marker := filepath.Join(h.root, "started")
	writeMCP(map[string]any{
		"filesystem": map[string]any{"command": h.bin, "args": []string{"mcp", "--policy", fsPolicy, "--", "sh", "-c", "touch " + marker}},
	})
	code, found, out := doctor()
	if f := found["filesystem"]; code != 0 || f.Status != "protected" || !strings.Contains(strings.Join(f.Why, "\n"), "not started") {
		t.Errorf("doctor without --trust-project: exit %d, %+v; want protected, not started\n%s", code, f, out)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("doctor started a server the project's .mcp.json names, without --trust-project")
	}

	writeMCP(map[string]any{
		"filesystem": map[string]any{"command": h.bin, "args": wrappedArgs(fsPolicy)},
		"broken":     map[string]any{"command": h.bin, "args": wrappedArgs(gone)},
		"raw":        map[string]any{"command": "node", "args": []string{server, project}, "env": map[string]string{"NODE_NO_WARNINGS": "1"}},
	})
	code, found, out = doctor("--trust-project")
	if code != 1 {
		t.Errorf("doctor: exit %d; want 1 (two servers are not protected)\n%s", code, out)
	}
	if f := found["filesystem"]; f.Status != "protected" || !strings.Contains(strings.Join(f.Why, "\n"), "tools through the gate") {
		t.Errorf("the wrapped server: %+v; want protected, probed", f)
	}
	if f := found["broken"]; f.Status != "not protected" || !strings.Contains(strings.Join(f.Why, "\n"), gone+" no longer exists") || !strings.Contains(strings.Join(f.Why, "\n"), "did not answer") || f.Fix == "" {
		t.Errorf("the wrapper with no policy: %+v; want not protected, saying the policy is gone and the probe failed, with a fix", f)
	}
	if f := found["raw"]; f.Status != "not protected" || !strings.Contains(f.Fix, "portcullis init mcp --name raw -- node "+server) {
		t.Errorf("the server not behind the wrapper: %+v; want not protected, fixed by init mcp", f)
	}

	// The text report names each server and the fix.
	code, text, _ := h.run(t, project, "doctor", "claude-code", "--trust-project")
	if code != 1 || !strings.Contains(text, "MCP server: raw") || !strings.Contains(text, "NOT PROTECTED") || !strings.Contains(text, "fix: portcullis init mcp --name raw") {
		t.Errorf("doctor: exit %d:\n%s", code, text)
	}

	// With the Claude Code hook in front, the hook decides the direct
	// server's calls; the broken wrapper is dropped.
	hookPolicy, err := filepath.Abs(claudePolicy)
	if err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := h.run(t, project, "hook", "install", "claude-code", "--project", "--policy", hookPolicy); code != 0 {
		t.Fatalf("hook install: exit %d:\n%s%s", code, out, errOut)
	}
	writeMCP(map[string]any{
		"filesystem": map[string]any{"command": h.bin, "args": wrappedArgs(fsPolicy)},
		"raw":        map[string]any{"command": "node", "args": []string{server, project}},
	})
	code, found, out = doctor("--trust-project")
	if code != 0 {
		t.Errorf("doctor with the hook: exit %d; want 0\n%s", code, out)
	}
	if f := found["raw"]; f.Status != "protected" || !strings.Contains(strings.Join(f.Why, "\n"), "hook of claude-code decides") {
		t.Errorf("the direct server with the hook installed: %+v; want protected by the hook", f)
	}
}
