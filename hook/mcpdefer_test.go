package hook_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/hook"
)

// Definitions of MCP servers as Claude Code writes them.
const (
	wrappedFS   = `{"type": "stdio", "command": "/usr/local/bin/portcullis", "args": ["mcp", "--policy", "/etc/portcullis/fs.yaml", "--", "npx", "-y", "@modelcontextprotocol/server-filesystem", "/work"]}`
	unwrappedFS = `{"type": "stdio", "command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/work"]}`
)

// claudeConfig writes a user's ~/.claude.json and a project's .mcp.json
// (each omitted when empty) and returns their paths.
func claudeConfig(t *testing.T, userJSON, projectMCP string) (claudeJSON, project string) {
	t.Helper()
	dir := t.TempDir()
	claudeJSON = filepath.Join(dir, ".claude.json")
	project = filepath.Join(dir, "project")
	if err := os.MkdirAll(project, 0o755); err != nil {
		t.Fatal(err)
	}
	if userJSON != "" {
		if err := os.WriteFile(claudeJSON, []byte(strings.ReplaceAll(userJSON, "PROJECT", project)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if projectMCP != "" {
		if err := os.WriteFile(filepath.Join(project, ".mcp.json"), []byte(projectMCP), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return claudeJSON, project
}

// countingDecider counts the calls it is asked to decide.
type countingDecider struct {
	portcullis.Decider
	calls []string
}

func (c *countingDecider) Decide(ctx context.Context, call portcullis.Call) (portcullis.Decision, error) {
	c.calls = append(c.calls, call.Tool)
	return c.Decider.Decide(ctx, call)
}

// TestDeferMCP: a call of a deferred server's tool is allowed without a
// decision here (its wrapper decides) only while every definition of that
// server Claude Code reads runs it through `portcullis mcp`; anything
// else — a server not named, an unwrapped or shadowing definition, no
// definition, an unreadable file, an ambiguous tool name — is decided as
// before, which asks for a tool the policy does not know.
func TestDeferMCP(t *testing.T) {
	read := "mcp__filesystem__read_text_file"
	for _, tc := range []struct {
		name       string
		user, proj string
		tool       string
		deferred   bool
	}{
		{"user scope, wrapped", `{"mcpServers": {"filesystem": ` + wrappedFS + `}}`, "", read, true},
		{"local scope, wrapped", `{"projects": {"PROJECT": {"mcpServers": {"filesystem": ` + wrappedFS + `}}}}`, "", read, true},
		{"project scope, wrapped", "", `{"mcpServers": {"filesystem": ` + wrappedFS + `}}`, read, true},
		{"a write is deferred too: the wrapper holds it", `{"mcpServers": {"filesystem": ` + wrappedFS + `}}`, "", "mcp__filesystem__write_file", true},
		{"user scope, not wrapped", `{"mcpServers": {"filesystem": ` + unwrappedFS + `}}`, "", read, false},
		{"a wrapped user entry shadowed by an unwrapped project one", `{"mcpServers": {"filesystem": ` + wrappedFS + `}}`, `{"mcpServers": {"filesystem": ` + unwrappedFS + `}}`, read, false},
		{"an unwrapped entry whose name Claude Code writes the same", `{"mcpServers": {"filesystem": ` + wrappedFS + `}}`, `{"mcpServers": {"file.system": ` + unwrappedFS + `, "filesystem": ` + wrappedFS + `}}`, "mcp__file_system__read_text_file", false},
		{"a URL server", `{"mcpServers": {"filesystem": {"type": "http", "url": "http://127.0.0.1:8470/mcp"}}}`, "", read, false},
		{"a program named like portcullis that is not the wrapper", `{"mcpServers": {"filesystem": {"command": "portcullis", "args": ["serve"]}}}`, "", read, false},
		{"no definition", `{"mcpServers": {}}`, "", read, false},
		{"no configuration at all", "", "", read, false},
		{"an unreadable configuration", `{"mcpServers": `, "", read, false},
		{"another server", `{"mcpServers": {"filesystem": ` + wrappedFS + `, "github": ` + unwrappedFS + `}}`, "", "mcp__github__get_me", false},
		{"a tool name another server could own", `{"mcpServers": {"filesystem": ` + wrappedFS + `}}`, "", "mcp__filesystem__x__read", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claudeJSON, project := claudeConfig(t, tc.user, tc.proj)
			f := newFixture(t, policyFor["claude-code"])
			counter := &countingDecider{Decider: f.g}
			h, err := hook.New(hook.Options{
				Decider:  counter,
				Policy:   f.pol,
				DeferMCP: []string{"filesystem", "file_system"},
				MCPServers: func(server string) ([]hook.MCPServer, error) {
					return hook.ClaudeMCPServers(claudeJSON, project, server)
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			code, out, _ := run(t, h, hook.ClaudeCode{}, claudeEvent(tc.tool, map[string]any{"path": "/work/notes.txt"}))
			d, reason, _ := answerOf(t, out)
			switch {
			case code != 0:
				t.Errorf("%s: exit %d (%s); want 0", tc.tool, code, out)
			case tc.deferred && (d != "allow" || len(counter.calls) != 0 || !strings.Contains(reason, "Portcullis MCP wrapper")):
				t.Errorf("%s = %s (%s), %d decisions here; want allow, decided by the wrapper, none here", tc.tool, d, reason, len(counter.calls))
			case !tc.deferred && (len(counter.calls) != 1 || d == "allow"):
				t.Errorf("%s = %s (%s), %d decisions here; want it decided here (one decision), not allowed", tc.tool, d, reason, len(counter.calls))
			}
		})
	}
}

// TestDeferMCPLeavesTheRest: with a server deferred, every other tool is
// decided exactly as without.
func TestDeferMCPLeavesTheRest(t *testing.T) {
	claudeJSON, project := claudeConfig(t, `{"mcpServers": {"filesystem": `+wrappedFS+`}}`, "")
	for _, ev := range [][]byte{
		claudeEvent("Bash", map[string]any{"command": "rm -rf /home/dev/project"}),
		claudeEvent("Write", map[string]any{"file_path": "/home/dev/project/.claude/settings.json", "content": "{}"}),
		claudeEvent("mcp__github__get_issue", map[string]any{"owner": "a", "repo": "b", "issue_number": 1}),
		claudeEvent("mcp__github__merge_pull_request", map[string]any{"owner": "a", "repo": "b", "pullNumber": 1}),
	} {
		without := newFixture(t, policyFor["claude-code"])
		_, want, _ := run(t, without.handler(t, hook.Options{}), hook.ClaudeCode{}, ev)
		with := newFixture(t, policyFor["claude-code"])
		_, got, _ := run(t, with.handler(t, hook.Options{DeferMCP: []string{"filesystem"}, MCPServers: func(server string) ([]hook.MCPServer, error) {
			return hook.ClaudeMCPServers(claudeJSON, project, server)
		}}), hook.ClaudeCode{}, ev)
		if string(got) != string(want) {
			t.Errorf("with filesystem deferred:\n%s\nwithout:\n%s", got, want)
		}
	}
}

func TestDeferMCPOptions(t *testing.T) {
	f := newFixture(t, policyFor["claude-code"])
	for _, o := range []hook.Options{
		{Decider: f.g, DeferMCP: []string{"filesystem"}}, // no way to check the definitions
		{Decider: f.g, DeferMCP: []string{"a__b"}, MCPServers: func(string) ([]hook.MCPServer, error) { return nil, nil }},
		{Decider: f.g, DeferMCP: []string{""}, MCPServers: func(string) ([]hook.MCPServer, error) { return nil, nil }},
		{Decider: f.g, DeferMCP: []string{"file.system"}, MCPServers: func(string) ([]hook.MCPServer, error) { return nil, nil }},
	} {
		if _, err := hook.New(o); err == nil {
			t.Errorf("New(DeferMCP %q, MCPServers set %v) succeeded; want an error", o.DeferMCP, o.MCPServers != nil)
		}
	}
}

func TestMCPServerNames(t *testing.T) {
	got, err := hook.MCPServerNames([]string{"github", "fs,notes-2"})
	if err != nil || strings.Join(got, " ") != "github fs notes-2" {
		t.Errorf("MCPServerNames = %q, %v; want github fs notes-2", got, err)
	}
	for _, bad := range [][]string{{"a,"}, {"a__b"}, {"a b"}, {""}} {
		if got, err := hook.MCPServerNames(bad); err == nil {
			t.Errorf("MCPServerNames(%q) = %q; want an error", bad, got)
		}
	}
}
