package hostconfig_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/portcullis/portcullis/hostconfig"
)

func TestHookInstallCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  hostconfig.HookInstall
		want string // "" accepted
	}{
		{"claude-code", hostconfig.HookInstall{Client: hostconfig.ClaudeCode, DeferMCP: []string{"github"}}, ""},
		{"cursor", hostconfig.HookInstall{Client: hostconfig.Cursor, Project: true}, ""},
		{"claude-desktop", hostconfig.HookInstall{Client: hostconfig.ClaudeDesktop}, "Claude Desktop runs MCP servers: portcullis init claude-desktop"},
		{"unknown", hostconfig.HookInstall{Client: "vim"}, "hook install supports claude-code, codex, gemini, cursor, copilot and opencode"},
		{"both scopes", hostconfig.HookInstall{Client: hostconfig.Gemini, Project: true, User: true}, "--project and --user: choose one"},
		{"defer elsewhere", hostconfig.HookInstall{Client: hostconfig.Codex, DeferMCP: []string{"github"}}, "it is for claude-code"},
		{"codex project", hostconfig.HookInstall{Client: hostconfig.Codex, Dir: "."}, "--project and --dir do not apply"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.req.Check()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Check() = %v; want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Check() = %v; want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestHookInstallHook: the scope each client defaults to, the paths made
// absolute, and the command's flags in order.
func TestHookInstallHook(t *testing.T) {
	e := newEnv(t)
	project := t.TempDir()
	t.Chdir(project)
	for _, tc := range []struct {
		name        string
		req         hostconfig.HookInstall
		scope       hostconfig.Scope
		project     string
		commandTail string
	}{
		{"project by default", hostconfig.HookInstall{Client: hostconfig.ClaudeCode, Hold: true, DeferMCP: []string{"a", "b"}},
			hostconfig.ProjectScope, project, " --defer-mcp a --defer-mcp b --hold"},
		{"user", hostconfig.HookInstall{Client: hostconfig.Gemini, User: true, State: "st"},
			hostconfig.UserScope, "", " --state " + filepath.Join(project, "st")},
		{"copilot for the user by default", hostconfig.HookInstall{Client: hostconfig.Copilot}, hostconfig.UserScope, "", ""},
		{"copilot in a project", hostconfig.HookInstall{Client: hostconfig.Copilot, Dir: "sub"}, hostconfig.ProjectScope, filepath.Join(project, "sub"), ""},
		{"codex for the user", hostconfig.HookInstall{Client: hostconfig.Codex}, hostconfig.UserScope, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.Binary, tc.req.Policy = e.bin, e.policy
			h, err := tc.req.Hook()
			if err != nil {
				t.Fatal(err)
			}
			want := strings.Join([]string{e.bin, "hook", string(tc.req.Client), "--policy", e.policy}, " ") + tc.commandTail
			if got := strings.Join(h.Command, " "); got != want || h.Scope != tc.scope || h.Project != tc.project || h.Hold != tc.req.Hold {
				t.Errorf("Hook() = %q, scope %v, project %q, hold %v; want %q, %v, %q, %v", got, h.Scope, h.Project, h.Hold, want, tc.scope, tc.project, tc.req.Hold)
			}
		})
	}
	_, err := hostconfig.HookInstall{Client: hostconfig.ClaudeCode, Binary: e.bin, Policy: filepath.Join(project, "none.yaml")}.Hook()
	if err == nil || !strings.HasPrefix(err.Error(), "--policy: ") {
		t.Errorf("Hook() with a missing policy = %v; want a --policy error", err)
	}
}

func TestEnvBinary(t *testing.T) {
	e := newEnv(t)
	link := filepath.Join(t.TempDir(), "portcullis")
	if err := os.Symlink(e.bin, link); err != nil {
		t.Fatal(err)
	}
	// A link is followed to the binary it names, which is checked.
	if got, err := e.Binary(link); err != nil || got != e.bin {
		t.Errorf("Binary(%s) = %q, %v; want %q", link, got, err, e.bin)
	}
	cached := filepath.Join(e.GoCache, "ab", "portcullis")
	writeFile(t, cached, "#!/bin/sh\n", 0o755)
	if _, err := e.Binary(cached); err == nil || !strings.Contains(err.Error(), hostconfig.InstallAdvice) {
		t.Errorf("Binary(a binary in the Go build cache) = %v; want the advice to install one", err)
	}
}

// TestInstallHookForAndWriteHookInstalled: the install of `portcullis
// hook install`, and what it says, then again when nothing changed.
func TestInstallHookForAndWriteHookInstalled(t *testing.T) {
	e := newEnv(t)
	project := t.TempDir()
	for _, tc := range []struct {
		client        hostconfig.Client
		first, second string
	}{
		{hostconfig.ClaudeCode, ".claude/settings.json: PreToolUse hook installed for every tool:\n  ", ".claude/settings.json: the Portcullis hook is already installed\n"},
		{hostconfig.Gemini, ".gemini/settings.json: BeforeTool hook installed for every tool:\n  ", "the Portcullis hook is already installed\n"},
		{hostconfig.Cursor, ".cursor/hooks.json: beforeShellExecution, beforeMCPExecution, beforeReadFile and preToolUse (" + hostconfig.CursorWriteMatcher + ") hooks installed, fail-closed:\n  ", "the Portcullis hook is already installed\n"},
		{hostconfig.OpenCode, "plugin installed: every tool call runs, and is blocked unless it allows it:\n  ", "the Portcullis plugin is already installed\n"},
		{hostconfig.Codex, "hooks.json: PreToolUse and PermissionRequest hooks installed for every tool:\n  ", "the Portcullis hooks are already installed and trusted\n"},
	} {
		t.Run(string(tc.client), func(t *testing.T) {
			req := hostconfig.HookInstall{Client: tc.client, Binary: e.bin, Policy: e.policy}
			if tc.client != hostconfig.Codex {
				req.Dir = project
			}
			for i, want := range []string{tc.first, tc.second} {
				res, err := e.InstallHookFor(req)
				if err != nil {
					t.Fatal(err)
				}
				var b bytes.Buffer
				hostconfig.WriteHookInstalled(&b, tc.client, res)
				if !strings.Contains(b.String(), want) || !strings.HasPrefix(b.String(), res.Files[0]+": ") {
					t.Errorf("install %d said %q; want it to start with %s and contain %q", i+1, b.String(), res.Files[0], want)
				}
			}
		})
	}
	if _, err := e.InstallHookFor(hostconfig.HookInstall{Client: hostconfig.ClaudeCode, Dir: project, Policy: e.policy, Binary: filepath.Join(e.GoCache, "x")}); err == nil {
		t.Error("InstallHookFor with a binary that does not exist succeeded")
	}
}
