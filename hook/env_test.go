package hook_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/portcullis/portcullis/hook"
)

// TestEnvHostFiles: each project's settings, and the places of a host's
// files that its own variables name.
func TestEnvHostFiles(t *testing.T) {
	e := hook.Env{
		Home: "/home/u", Projects: []string{"/p1", "", "/p2"},
		CopilotHome: "/ch", GeminiTrustedFolders: "/gt.json",
		XDGConfigHome: "/xdg", OpenCodeConfigDir: "relative",
	}
	for _, tc := range []struct {
		host        hook.Host
		want, never []string
	}{
		{hook.ClaudeCode{}, []string{"/home/u/.claude/settings.json", "/p1/.claude/settings.local.json", "/p2/.claude/settings.json"}, []string{"/ch", "/gt.json"}},
		{hook.Copilot{}, []string{"/ch", "/p2/.github/hooks"}, []string{"/gt.json"}},
		{hook.Gemini{}, []string{"/gt.json", "/p1/.gemini/settings.json"}, []string{"/ch"}},
		// A relative $OPENCODE_CONFIG_DIR is not a place to protect.
		{hook.OpenCode{}, []string{"/xdg/opencode", "/p1/.opencode"}, []string{"relative", "/ch"}},
	} {
		got := e.HostFiles(tc.host)
		for _, w := range tc.want {
			if !slices.Contains(got, w) {
				t.Errorf("HostFiles(%s) = %q; want it to hold %s", tc.host.Name(), got, w)
			}
		}
		for _, n := range tc.never {
			if slices.Contains(got, n) {
				t.Errorf("HostFiles(%s) = %q; want no %s", tc.host.Name(), got, n)
			}
		}
	}
}

// TestEnvClaudeMCP: the servers are read from .claude.json in the
// configuration directory and each project's .mcp.json (a project named
// twice read once), and those are the files returned.
func TestEnvClaudeMCP(t *testing.T) {
	conf, project := t.TempDir(), t.TempDir()
	write := func(path, s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(conf, ".claude.json"), `{"mcpServers": {"fs": {"command": "/bin/portcullis", "args": ["mcp", "--", "fs"]}}}`)
	write(filepath.Join(project, ".mcp.json"), `{"mcpServers": {"fs": {"command": "npx", "args": ["fs"]}}}`)
	e := hook.Env{Home: t.TempDir(), ClaudeConfigDir: conf, Projects: []string{project, project, ""}}
	read, files := e.ClaudeMCP()
	want := []string{filepath.Join(conf, ".claude.json"), filepath.Join(project, ".mcp.json")}
	if !slices.Equal(files, want) {
		t.Errorf("ClaudeMCP() files = %q; want %q", files, want)
	}
	defs, err := read("fs")
	if err != nil || len(defs) != 2 || !defs[0].Wrapped() || defs[1].Wrapped() {
		t.Fatalf("read(fs) = %+v, %v; want the user's wrapped definition and the project's unwrapped one", defs, err)
	}
	if defs, err := read("other"); err != nil || len(defs) != 0 {
		t.Errorf("read(other) = %+v, %v; want none", defs, err)
	}
	// Without $CLAUDE_CONFIG_DIR, .claude.json is the home directory's.
	if _, files := (hook.Env{Home: "/home/u"}).ClaudeMCP(); len(files) != 0 {
		t.Errorf("ClaudeMCP() with no project = %q; want no files", files)
	}
	if _, files := (hook.Env{Home: "/home/u", Projects: []string{"/p"}}).ClaudeMCP(); !slices.Equal(files, []string{"/home/u/.claude.json", "/p/.mcp.json"}) {
		t.Errorf("ClaudeMCP() files = %q; want the home's .claude.json and the project's .mcp.json", files)
	}
}

func TestEnvClientFiles(t *testing.T) {
	got := hook.Env{Home: "/home/u", Projects: []string{"/p"}, ClaudeConfigDir: "/cc", UserConfigDir: "/conf"}.ClientFiles()
	for _, w := range []string{"/home/u/.claude/settings.json", "/p/.mcp.json", "/cc/.claude.json", "/conf/Claude/claude_desktop_config.json", "/p/.cursor/hooks.json"} {
		if !slices.Contains(got, w) {
			t.Errorf("ClientFiles() = %q; want it to hold %s", got, w)
		}
	}
}
