package hostconfig_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/portcullis/portcullis/hostconfig"
)

// TestInstallHookCursor: the blocking hooks go into Cursor's hooks.json,
// fail-closed, beside the hooks already there; installing again changes
// nothing; a hooks file of another version is refused.
func TestInstallHookCursor(t *testing.T) {
	e := newEnv(t)
	project := filepath.Join(e.Home, "work")
	path := filepath.Join(project, ".cursor", "hooks.json")
	writeFile(t, path, `{"version": 1, "hooks": {"afterFileEdit": [{"command": "./hooks/format.sh"}], "beforeShellExecution": [{"command": "./hooks/audit.sh"}]}}`, 0o644)
	cmd := hostconfig.HookCommand(e.bin, hostconfig.Cursor, e.policy, "", false)
	h := hostconfig.Hook{Client: hostconfig.Cursor, Scope: hostconfig.ProjectScope, Project: project, Command: cmd}
	res, err := e.InstallHook(h)
	if err != nil || !res.Changed || res.Files[0] != path {
		t.Fatalf("InstallHook = %+v, %v", res, err)
	}
	var got struct {
		Version int `json:"version"`
		Hooks   map[string][]struct {
			Command    string `json:"command"`
			Timeout    int    `json:"timeout"`
			FailClosed bool   `json:"failClosed"`
			Matcher    string `json:"matcher"`
		} `json:"hooks"`
	}
	if err := json.Unmarshal([]byte(readFile(t, path)), &got); err != nil {
		t.Fatal(err)
	}
	if got.Version != 1 || got.Hooks["afterFileEdit"][0].Command != "./hooks/format.sh" {
		t.Errorf("the other hooks were not kept: %s", readFile(t, path))
	}
	if sh := got.Hooks["beforeShellExecution"]; len(sh) != 2 || sh[0].Command != "./hooks/audit.sh" {
		t.Errorf("beforeShellExecution = %+v; want the audit hook kept, then Portcullis's", sh)
	}
	for _, ev := range hostconfig.CursorHookEvents {
		list := got.Hooks[ev]
		ours := list[len(list)-1]
		if !strings.Contains(ours.Command, e.bin+" hook cursor --policy") || !ours.FailClosed || ours.Timeout != hostconfig.HookTimeout {
			t.Errorf("%s: %+v; want the Portcullis hook, fail-closed, timeout %d", ev, ours, hostconfig.HookTimeout)
		}
		if want := map[bool]string{true: hostconfig.CursorWriteMatcher}[ev == "preToolUse"]; ours.Matcher != want {
			t.Errorf("%s: matcher %q; want %q", ev, ours.Matcher, want)
		}
	}
	if readFile(t, path+".bak") == "" {
		t.Error("no backup")
	}
	if res, err := e.InstallHook(h); err != nil || res.Changed {
		t.Errorf("second install: %+v, %v; want nothing changed", res, err)
	}
	writeFile(t, path, `{"version": 2, "hooks": {}}`, 0o644)
	if _, err := e.InstallHook(h); err == nil || !strings.Contains(err.Error(), `"version" is 2`) {
		t.Errorf("a version 2 file: %v; want refused", err)
	}
}

// TestCheckCursorHooks: doctor on Cursor's hooks.json: protected when
// every blocking hook runs Portcullis and the probe is answered; not
// protected for a misspelled hook name (which Cursor ignores without a
// word), a blocking hook that runs something else, a hook that is not
// fail-closed, and a command in the Go build cache or a temporary
// directory.
func TestCheckCursorHooks(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	answer := probeScript(t, e, `echo '{"permission":"allow"}'`)
	install := func(exe string) string {
		t.Helper()
		res, err := e.InstallHook(hostconfig.Hook{Client: hostconfig.Cursor, Command: []string{exe, "hook", "cursor", "--policy", e.policy}})
		if err != nil {
			t.Fatal(err)
		}
		return res.Files[0]
	}
	find := func() hostconfig.Finding {
		t.Helper()
		fs := e.Check(ctx, "", []hostconfig.Client{hostconfig.Cursor}, nil)
		if len(fs) != 1 {
			t.Fatalf("Check(cursor) = %+v; want one finding", fs)
		}
		return fs[0]
	}
	path := install(answer)
	if path != filepath.Join(e.Home, ".cursor", "hooks.json") {
		t.Fatalf("user install wrote %s", path)
	}
	if f := find(); f.Status != hostconfig.Protected || !strings.Contains(strings.Join(f.Why, "\n"), "answered: allow") {
		t.Errorf("protected Cursor: %+v", f)
	}
	good := readFile(t, path)

	for _, tc := range []struct {
		name, from, to, why, fix string
	}{
		{"misspelled", `"beforeReadFile"`, `"beforeReadFiles"`, `did you mean "beforeReadFile"`, "rename it to beforeReadFile"},
		{"misspelled prefix", `"beforeShellExecution"`, `"beforeShellExec"`, `did you mean "beforeShellExecution"`, "rename it"},
		{"not fail-closed", `"failClosed": true`, `"failClosed": false`, `not "failClosed": true`, "hook install cursor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			writeFile(t, path, strings.Replace(good, tc.from, tc.to, 1), 0o644)
			f := find()
			if f.Status != hostconfig.NotProtected || !strings.Contains(strings.Join(f.Why, "\n"), tc.why) || !strings.Contains(f.Fix, tc.fix) {
				t.Errorf("%+v; want not protected, %q, fix %q", f, tc.why, tc.fix)
			}
		})
	}
	t.Run("another command", func(t *testing.T) {
		writeFile(t, path, `{"version": 1, "hooks": {"beforeShellExecution": [{"command": "./hooks/audit.sh"}]}}`, 0o644)
		f := find()
		if f.Status != hostconfig.NotProtected || !strings.Contains(strings.Join(f.Why, "\n"), `runs "./hooks/audit.sh", not Portcullis`) {
			t.Errorf("%+v; want not protected, naming the other command", f)
		}
	})
	for name, dir := range map[string]string{"build cache": filepath.Join(e.GoCache, "ab"), "temporary directory": e.TempDirs[0]} {
		t.Run(name, func(t *testing.T) {
			writeFile(t, path, good, 0o644)
			exe := filepath.Join(dir, "portcullis")
			writeFile(t, exe, readFile(t, answer), 0o755)
			install(exe)
			f := find()
			if f.Status != hostconfig.NotProtected || !strings.Contains(f.Fix, "go install ./cmd/portcullis") || !strings.Contains(f.Fix, "hook install cursor") {
				t.Errorf("%+v; want not protected, with how to install the binary", f)
			}
		})
	}
}

// TestCopilotHooks: Copilot CLI's hook goes into its own file in the
// user's hooks directory, protected; in a repository's .github/hooks it
// protects only once Copilot trusts the folder.
func TestCopilotHooks(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	answer := probeScript(t, e, `echo '{"permissionDecision":"allow"}'`)
	words := []string{answer, "hook", "copilot", "--policy", e.policy}
	res, err := e.InstallHook(hostconfig.Hook{Client: hostconfig.Copilot, Command: words})
	if want := filepath.Join(e.Home, ".copilot", "hooks", "portcullis.json"); err != nil || res.Files[0] != want || len(res.Notes) != 0 {
		t.Fatalf("user install = %+v, %v; want %s", res, err, want)
	}
	var file struct {
		Version int `json:"version"`
		Hooks   struct {
			PreToolUse []struct {
				Type       string `json:"type"`
				Bash       string `json:"bash"`
				TimeoutSec int    `json:"timeoutSec"`
			} `json:"preToolUse"`
		} `json:"hooks"`
	}
	if err := json.Unmarshal([]byte(readFile(t, res.Files[0])), &file); err != nil {
		t.Fatal(err)
	}
	if p := file.Hooks.PreToolUse; file.Version != 1 || len(p) != 1 || p[0].Type != "command" || !strings.Contains(p[0].Bash, " hook copilot --policy ") || p[0].TimeoutSec != hostconfig.HookTimeout {
		t.Errorf("hook file = %+v", file)
	}
	fs := e.Check(ctx, "", []hostconfig.Client{hostconfig.Copilot}, nil)
	if len(fs) != 1 || fs[0].Status != hostconfig.Protected || !strings.Contains(strings.Join(fs[0].Why, "\n"), "answered: allow") {
		t.Errorf("user hook: %+v; want protected", fs)
	}

	e2 := newEnv(t)
	answer = probeScript(t, e2, `echo '{"permissionDecision":"allow"}'`)
	project := filepath.Join(e2.Home, "repo")
	res, err = e2.InstallHook(hostconfig.Hook{Client: hostconfig.Copilot, Scope: hostconfig.ProjectScope, Project: project, Command: []string{answer, "hook", "copilot"}})
	if err != nil || res.Files[0] != filepath.Join(project, ".github", "hooks", "portcullis.json") || len(res.Notes) != 1 {
		t.Fatalf("project install = %+v, %v", res, err)
	}
	fs = e2.Check(ctx, project, []hostconfig.Client{hostconfig.Copilot}, nil)
	if len(fs) != 1 || fs[0].Status != hostconfig.NotProtected || !strings.Contains(strings.Join(fs[0].Why, "\n"), "does not trust") || !strings.Contains(fs[0].Fix, "hook install copilot --user") {
		t.Errorf("project hook in an untrusted folder: %+v; want not protected", fs)
	}
	writeFile(t, filepath.Join(e2.Home, ".copilot", "config.json"), "// This file is managed automatically.\n{\"trustedFolders\": [\""+e2.Home+"\"]}\n", 0o600)
	fs = e2.Check(ctx, project, []hostconfig.Client{hostconfig.Copilot}, nil)
	if len(fs) != 1 || fs[0].Status != hostconfig.Protected || !fs[0].DefaultPolicy {
		t.Errorf("project hook in a trusted folder: %+v; want protected, default policy", fs)
	}
}

// TestCheckCursorNeedsHooks: the MCP wrapper decides only the calls of the
// servers behind it, so a Cursor without Portcullis's hooks is not
// protected however its MCP servers run (its terminal and file edits run
// unchecked); with the hooks answering, beforeMCPExecution decides the
// calls of a server that is not wrapped.
func TestCheckCursorNeedsHooks(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	writeFile(t, filepath.Join(e.Home, ".cursor", "mcp.json"), `{"mcpServers": {"fs": {"command": "node", "args": ["server.js"]}}}`, 0o644)
	byFile := func() map[string]hostconfig.Finding {
		t.Helper()
		m := map[string]hostconfig.Finding{}
		for _, f := range e.Check(ctx, "", []hostconfig.Client{hostconfig.Cursor}, nil) {
			m[filepath.Base(f.File)] = f
		}
		if len(m) != 2 {
			t.Fatalf("findings by file: %+v; want mcp.json and hooks.json", m)
		}
		return m
	}
	fs := byFile()
	if f := fs["hooks.json"]; f.Status != hostconfig.NotProtected || !strings.Contains(strings.Join(f.Why, "\n"), "terminal, file reads and edits") || f.Fix != "portcullis init cursor" {
		t.Errorf("Cursor with no hooks file: %+v; want not protected, its own tools named, fix portcullis init cursor", f)
	}
	if f := fs["mcp.json"]; f.Status != hostconfig.NotProtected || !strings.Contains(strings.Join(f.Why, "\n"), "bypassing the wrapper") {
		t.Errorf("an unwrapped server with no hooks: %+v; want not protected", f)
	}

	answer := probeScript(t, e, `echo '{"permission":"allow"}'`)
	if _, err := e.InstallHook(hostconfig.Hook{Client: hostconfig.Cursor, Command: []string{answer, "hook", "cursor", "--policy", e.policy}}); err != nil {
		t.Fatal(err)
	}
	fs = byFile()
	if f := fs["hooks.json"]; f.Status != hostconfig.Protected {
		t.Errorf("Cursor's hooks: %+v; want protected", f)
	}
	if f := fs["mcp.json"]; f.Status != hostconfig.Protected || !strings.Contains(strings.Join(f.Why, "\n"), "the Portcullis hook of cursor decides") {
		t.Errorf("an unwrapped server behind Cursor's hooks: %+v; want protected by the hook", f)
	}
}
