package hostconfig_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/portcullis/portcullis/hostconfig"
)

// TestCheckHookedMCP: doctor reads the MCP servers of Claude Code (the
// user scope and this project's local scope of ~/.claude.json, the
// project's .mcp.json) and of Gemini CLI; a server that is not behind the
// wrapper — a command or a URL — is not protected while no Portcullis
// hook decides its calls, and nothing is started to find that out. The
// ${VAR} and ${VAR:-default} that Claude Code expands are expanded.
func TestCheckHookedMCP(t *testing.T) {
	e := newEnv(t)
	t.Setenv("PORTCULLIS_TEST_ROOT", "/srv/work")
	project := filepath.Join(e.Home, "project")
	other := filepath.Join(e.Home, "other")
	writeFile(t, filepath.Join(e.Home, ".claude.json"), `{
  "mcpServers": {"github": {"type": "http", "url": "https://api.example.com/mcp"}},
  "projects": {
    "`+project+`": {"mcpServers": {"db": {"command": "uvx", "args": ["mcp-server-sqlite"]}}},
    "`+other+`": {"mcpServers": {"elsewhere": {"command": "npx", "args": ["x"]}}}
  }
}`, 0o600)
	writeFile(t, filepath.Join(project, ".mcp.json"), `{"mcpServers": {"fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "${PORTCULLIS_TEST_UNSET:-.}", "${PORTCULLIS_TEST_ROOT}"]}}}`, 0o644)
	writeFile(t, filepath.Join(e.Home, ".gemini", "settings.json"), `{"mcpServers": {"remote": {"httpUrl": "https://mcp.example.com/"}}}`, 0o644)
	noProbe := hostconfig.Probes{MCP: func(_ context.Context, s hostconfig.MCPEntry, _ string) ([]string, string, error) {
		t.Errorf("probed %s, which is not behind the wrapper", s.Name)
		return nil, "", nil
	}}

	got := map[string]hostconfig.Finding{}
	for _, f := range e.CheckWith(context.Background(), project, []hostconfig.Client{hostconfig.ClaudeCode, hostconfig.Gemini}, noProbe) {
		if f.Server != "" {
			got[string(f.Client)+" "+f.Server] = f
		}
	}
	for key, want := range map[string]string{
		"claude-code github (user scope)":                 "bypassing Portcullis",
		"claude-code db (local scope of " + project + ")": "bypassing the wrapper",
		"claude-code fs": "portcullis init mcp --name fs -- npx -y @modelcontextprotocol/server-filesystem . /srv/work",
		"gemini remote":  "https://mcp.example.com/",
	} {
		f, ok := got[key]
		if !ok || f.Status != hostconfig.NotProtected || !strings.Contains(strings.Join(f.Why, "\n")+f.Fix, want) {
			t.Errorf("%s: %+v (found %v); want not protected, saying %q", key, f, ok, want)
		}
	}
	if len(got) != 4 {
		t.Errorf("found %d servers; want 4 (another project's server is not this project's): %v", len(got), got)
	}
}
