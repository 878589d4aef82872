package hostconfig_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	"github.com/portcullis/portcullis/hostconfig"
)

// testEnv is an Env around a new temporary home, with a binary that lasts
// (bin/portcullis under the home; the home is not a temporary directory
// of this Env).
type testEnv struct {
	hostconfig.Env
	bin, policy string
}

func newEnv(t *testing.T) testEnv {
	t.Helper()
	root := t.TempDir()
	home := filepath.Join(root, "home")
	e := hostconfig.Env{
		Home:      home,
		ConfigDir: filepath.Join(home, ".config"),
		CodexHome: filepath.Join(home, ".codex"),
		GoCache:   filepath.Join(root, "cache", "go-build"),
		TempDirs:  []string{filepath.Join(root, "tmp")},
	}
	bin := filepath.Join(home, "bin", "portcullis")
	writeFile(t, bin, "#!/bin/sh\nexit 0\n", 0o755)
	pol := filepath.Join(e.PolicyDir(), "policy.yaml")
	writeFile(t, pol, "version: 1\n", 0o600)
	return testEnv{Env: e, bin: bin, policy: pol}
}

func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestInstallHookClaudeCode: the hook is merged into the project's
// settings, every other setting and hook keeps its place and order, the
// original is kept as .bak with its mode; again, nothing changes; with
// --hold the same entry is replaced in place; a file that is not a JSON
// object is left alone.
func TestInstallHookClaudeCode(t *testing.T) {
	e := newEnv(t)
	project := filepath.Join(e.Home, "my project")
	settings := filepath.Join(project, ".claude", "settings.json")
	original := `{
  "model": "opus",
  "permissions": {"allow": ["Bash(npm test)"], "deny": []},
  "hooks": {
    "PostToolUse": [{"matcher": "Write", "hooks": [{"type": "command", "command": "gofmt -l ."}]}],
    "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./scripts/lint-bash.sh && echo ok"}]}]
  },
  "env": {"FOO": "1"}
}
`
	writeFile(t, settings, original, 0o600)
	install := func(hold bool) hostconfig.Installed {
		t.Helper()
		got, err := e.InstallHook(hostconfig.Hook{Client: hostconfig.ClaudeCode, Scope: hostconfig.ProjectScope, Project: project,
			Command: hostconfig.HookCommand(e.bin, hostconfig.ClaudeCode, e.policy, "", hold), Hold: hold})
		if err != nil {
			t.Fatalf("InstallHook: %v", err)
		}
		return got
	}
	got := install(false)
	if !got.Changed || got.Files[0] != settings {
		t.Errorf("InstallHook = %+v; want %s changed", got, settings)
	}
	first := readFile(t, settings)
	var s struct {
		Model string         `json:"model"`
		Env   map[string]any `json:"env"`
		Hooks map[string][]struct {
			Matcher string `json:"matcher"`
			Hooks   []struct {
				Type, Command string
				Timeout       int
			} `json:"hooks"`
		} `json:"hooks"`
	}
	if err := json.Unmarshal([]byte(first), &s); err != nil {
		t.Fatalf("settings are not JSON: %v\n%s", err, first)
	}
	pre := s.Hooks["PreToolUse"]
	if s.Model != "opus" || s.Env["FOO"] != "1" || len(s.Hooks["PostToolUse"]) != 1 || len(pre) != 2 {
		t.Fatalf("settings after install:\n%s", first)
	}
	if pre[0].Hooks[0].Command != "./scripts/lint-bash.sh && echo ok" || pre[1].Matcher != "*" {
		t.Errorf("PreToolUse = %+v; want the user's group, then Portcullis's for every tool", pre)
	}
	ours := pre[1].Hooks[0]
	if ours.Type != "command" || ours.Command != e.bin+" hook claude-code --policy "+e.policy || ours.Timeout != hostconfig.HookTimeout {
		t.Errorf("the installed hook = %+v", ours)
	}
	if strings.Contains(first, `\u0026`) {
		t.Errorf("the user's command was escaped:\n%s", first)
	}
	idx := func(k string) int { return strings.Index(first, `"`+k+`"`) }
	if !(idx("model") < idx("permissions") && idx("permissions") < idx("hooks") && idx("hooks") < idx("env")) {
		t.Errorf("the settings' keys changed order:\n%s", first)
	}
	if bak := readFile(t, settings+".bak"); bak != original {
		t.Errorf("backup = %q; want the original", bak)
	}
	if st, err := os.Stat(settings); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("settings mode = %v, %v; want 0600 kept", st.Mode().Perm(), err)
	}

	if again := install(false); again.Changed || readFile(t, settings) != first {
		t.Errorf("a second install changed the file")
	}
	install(true)
	held := readFile(t, settings)
	if strings.Count(held, "hook claude-code") != 1 || !strings.Contains(held, "--hold") || !strings.Contains(held, `"timeout": 120`) {
		t.Errorf("install --hold:\n%s\nwant one Portcullis hook, holding, with the longer timeout", held)
	}

	// The user's settings, created.
	if _, err := e.InstallHook(hostconfig.Hook{Client: hostconfig.ClaudeCode, Command: hostconfig.HookCommand(e.bin, hostconfig.ClaudeCode, e.policy, "", false)}); err != nil {
		t.Fatal(err)
	}
	if b := readFile(t, filepath.Join(e.Home, ".claude", "settings.json")); !strings.Contains(b, "hook claude-code") {
		t.Errorf("user settings = %s", b)
	}

	// Settings that are not a JSON object are left alone.
	broken := filepath.Join(e.Home, "other", ".claude", "settings.json")
	writeFile(t, broken, `["not", "settings"]`, 0o644)
	if _, err := e.InstallHook(hostconfig.Hook{Client: hostconfig.ClaudeCode, Scope: hostconfig.ProjectScope, Project: filepath.Dir(filepath.Dir(broken)),
		Command: hostconfig.HookCommand(e.bin, hostconfig.ClaudeCode, e.policy, "", false)}); err == nil {
		t.Error("install into a settings file that is a list: no error")
	}
	if b := readFile(t, broken); b != `["not", "settings"]` {
		t.Errorf("a settings file that could not be merged was changed: %s", b)
	}
}

// TestInstallHookGemini: Gemini CLI's BeforeTool hook, with a regular
// expression for every tool and the timeout in milliseconds.
func TestInstallHookGemini(t *testing.T) {
	e := newEnv(t)
	settings := filepath.Join(e.Home, ".gemini", "settings.json")
	writeFile(t, settings, `{"theme": "dark", "hooks": {"BeforeTool": [{"matcher": "write_file", "hooks": [{"type": "command", "command": "./check.sh"}]}]}}`, 0o644)
	got, err := e.InstallHook(hostconfig.Hook{Client: hostconfig.Gemini, Command: hostconfig.HookCommand(e.bin, hostconfig.Gemini, e.policy, "", false)})
	if err != nil || !got.Changed {
		t.Fatalf("InstallHook = %+v, %v", got, err)
	}
	var s struct {
		Theme string `json:"theme"`
		Hooks struct {
			BeforeTool []struct {
				Matcher string `json:"matcher"`
				Hooks   []struct {
					Command string
					Timeout int
				} `json:"hooks"`
			} `json:"BeforeTool"`
		} `json:"hooks"`
	}
	if err := json.Unmarshal([]byte(readFile(t, settings)), &s); err != nil {
		t.Fatal(err)
	}
	bt := s.Hooks.BeforeTool
	if s.Theme != "dark" || len(bt) != 2 || bt[1].Matcher != ".*" || bt[1].Hooks[0].Timeout != 60000 || !strings.HasSuffix(bt[1].Hooks[0].Command, " hook gemini --policy "+e.policy) {
		t.Errorf("Gemini settings = %+v", s)
	}
}

// TestInstallHookCodex: both hooks in $CODEX_HOME/hooks.json, their trust
// in config.toml, the user's hooks and settings kept; again, nothing
// changes; a config.toml that does not parse is refused with the lines to
// add, and nothing is written; a project install does not exist.
func TestInstallHookCodex(t *testing.T) {
	e := newEnv(t)
	hooksPath := filepath.Join(e.CodexHome, "hooks.json")
	configPath := filepath.Join(e.CodexHome, "config.toml")
	userConfig := "# mine\nmodel = \"o3\"\n\n[hooks.state.\"/x/hooks.json:pre_tool_use:0:0\"]\nenabled = false\n"
	writeFile(t, hooksPath, `{"hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"command","command":"./lint.sh"}]}]}}`, 0o600)
	writeFile(t, configPath, userConfig, 0o600)
	hook := hostconfig.Hook{Client: hostconfig.Codex, Command: hostconfig.HookCommand(e.bin, hostconfig.Codex, e.policy, "", false)}
	if _, err := e.InstallHook(hook); err != nil {
		t.Fatal(err)
	}
	hooks, config := readFile(t, hooksPath), readFile(t, configPath)
	if !strings.HasPrefix(config, userConfig) {
		t.Errorf("config.toml lost the user's settings:\n%s", config)
	}
	var c struct {
		Model string `toml:"model"`
		Hooks struct {
			State map[string]struct {
				TrustedHash string `toml:"trusted_hash"`
			} `toml:"state"`
		} `toml:"hooks"`
	}
	if _, err := toml.Decode(config, &c); err != nil || c.Model != "o3" {
		t.Fatalf("config.toml: %v, model %q", err, c.Model)
	}
	for _, key := range []string{hooksPath + ":pre_tool_use:1:0", hooksPath + ":permission_request:0:0"} {
		if st, ok := c.Hooks.State[key]; !ok || !strings.HasPrefix(st.TrustedHash, "sha256:") {
			t.Errorf("no trust entry %s in:\n%s", key, config)
		}
	}
	if !strings.Contains(hooks, `"command": "./lint.sh"`) || strings.Count(hooks, " hook codex --policy ") != 2 {
		t.Errorf("hooks.json:\n%s", hooks)
	}
	if again, err := e.InstallHook(hook); err != nil || again.Changed || readFile(t, configPath) != config {
		t.Errorf("second install: %+v, %v; want nothing changed", again, err)
	}

	writeFile(t, configPath, "model = \n", 0o600)
	if err := os.Remove(hooksPath); err != nil {
		t.Fatal(err)
	}
	_, err := e.InstallHook(hook)
	if err == nil || !strings.Contains(err.Error(), "trusted_hash = ") || !strings.Contains(err.Error(), "nothing was changed") {
		t.Errorf("unparsable config.toml: %v; want a refusal naming the lines to add", err)
	}
	if readFile(t, configPath) != "model = \n" {
		t.Error("a refused install changed config.toml")
	}
	if _, err := os.Stat(hooksPath); err == nil {
		t.Error("a refused install wrote hooks.json")
	}
	if _, err := e.InstallHook(hostconfig.Hook{Client: hostconfig.Codex, Scope: hostconfig.ProjectScope, Project: e.Home, Command: hook.Command}); err == nil || !strings.Contains(err.Error(), "CODEX_HOME") {
		t.Errorf("project install for Codex: %v; want a refusal naming CODEX_HOME", err)
	}
}

// TestWrapMCP: Cursor's stdio servers go behind the wrapper with their
// env kept, a remote server is reported and left alone, a new server is
// added wrapped, and installing again changes nothing.
func TestWrapMCP(t *testing.T) {
	e := newEnv(t)
	path := filepath.Join(e.Home, ".cursor", "mcp.json")
	writeFile(t, path, `{"mcpServers": {
  "filesystem": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/w"], "env": {"A": "1"}},
  "remote": {"url": "https://mcp.example/mcp"}
}}`, 0o644)
	w := hostconfig.Wrap{Client: hostconfig.Cursor, Prefix: hostconfig.WrapperPrefix(e.bin, e.policy, "cursor")}
	got, err := e.WrapMCP(w)
	if err != nil || !got.Changed {
		t.Fatalf("WrapMCP = %+v, %v", got, err)
	}
	wrappedAll := readFile(t, path)
	other := filepath.Join(e.Home, "everything.yaml")
	add := hostconfig.Wrap{Client: hostconfig.Cursor, Prefix: hostconfig.WrapperPrefix(e.bin, other, "cursor"),
		Add: &hostconfig.Server{Name: "everything", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-everything"}}}
	if _, err := e.WrapMCP(add); err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		MCPServers map[string]struct {
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env"`
			URL     string            `json:"url"`
		} `json:"mcpServers"`
	}
	first := readFile(t, path)
	if err := json.Unmarshal([]byte(first), &cfg); err != nil {
		t.Fatal(err)
	}
	fsrv := cfg.MCPServers["filesystem"]
	want := []string{"mcp", "--policy", e.policy, "--agent", "cursor", "--name", "filesystem", "--", "npx", "-y", "@modelcontextprotocol/server-filesystem", "/w"}
	if fsrv.Command != e.bin || strings.Join(fsrv.Args, " ") != strings.Join(want, " ") || fsrv.Env["A"] != "1" {
		t.Errorf("filesystem = %+v; want %s %v with its env", fsrv, e.bin, want)
	}
	if ev := cfg.MCPServers["everything"]; ev.Command != e.bin || ev.Args[2] != other || ev.Args[len(ev.Args)-1] != "@modelcontextprotocol/server-everything" {
		t.Errorf("everything = %+v", ev)
	}
	if r := cfg.MCPServers["remote"]; r.URL == "" || r.Command != "" || len(got.Notes) != 1 || !strings.Contains(got.Notes[0], "portcullis serve") {
		t.Errorf("remote = %+v, notes %q", r, got.Notes)
	}
	if again, err := e.WrapMCP(add); err != nil || again.Changed || readFile(t, path) != first {
		t.Errorf("a second add changed the file: %v", err)
	}
	if !strings.Contains(wrappedAll, `"remote"`) || strings.Contains(wrappedAll, "everything") {
		t.Errorf("wrapping the listed servers added one:\n%s", wrappedAll)
	}
}

// TestCheckBinary: a binary that lasts is accepted; one in the build
// cache, in a `go run` directory or in a temporary directory is refused
// with the way to install it, and so is one that does not exist.
func TestCheckBinary(t *testing.T) {
	e := newEnv(t)
	cached := filepath.Join(e.GoCache, "ab", "portcullis")
	goRun := filepath.Join(e.Home, "x", "go-build123456", "b001", "exe", "portcullis")
	temp := filepath.Join(e.TempDirs[0], "portcullis")
	for _, p := range []string{cached, goRun, temp} {
		writeFile(t, p, "#!/bin/sh\n", 0o755)
	}
	if err := e.CheckBinary(e.bin); err != nil {
		t.Errorf("CheckBinary(%s) = %v; want nil", e.bin, err)
	}
	for _, p := range []string{cached, goRun, temp} {
		err := e.CheckBinary(p)
		if !errors.Is(err, hostconfig.ErrTransient) || !strings.Contains(err.Error(), "go install ./cmd/portcullis") {
			t.Errorf("CheckBinary(%s) = %v; want ErrTransient and how to install", p, err)
		}
	}
	if err := e.CheckBinary(filepath.Join(e.Home, "nope")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("CheckBinary(missing) = %v; want not exist", err)
	}
}

// TestWritePolicy: created; the same again is unchanged; a new content
// replaces init's own unedited file; an edited file is kept, with the
// difference, unless forced.
func TestWritePolicy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p", "policy.yaml")
	v1, v2 := []byte("version: 1\nmode: enforce\n"), []byte("version: 1\nmode: shadow\n")
	step := func(content []byte, force bool, want hostconfig.PolicyOutcome) hostconfig.PolicyWrite {
		t.Helper()
		got, err := hostconfig.WritePolicy(path, content, force)
		if err != nil || got.Outcome != want {
			t.Fatalf("WritePolicy(%q, force=%v) = %+v, %v; want outcome %d", content, force, got, err, want)
		}
		return got
	}
	step(v1, false, hostconfig.PolicyCreated)
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("policy mode %v; want 0600", st.Mode().Perm())
	}
	if !hostconfig.Unedited([]byte(readFile(t, path))) {
		t.Errorf("a fresh file reads as edited:\n%s", readFile(t, path))
	}
	step(v1, false, hostconfig.PolicyUnchanged)
	step(v2, false, hostconfig.PolicyReplaced)
	edited := strings.Replace(readFile(t, path), "shadow", "off", 1)
	writeFile(t, path, edited, 0o600)
	kept := step(v1, false, hostconfig.PolicyKept)
	if readFile(t, path) != edited || !strings.Contains(kept.Diff, "-mode: off") || !strings.Contains(kept.Diff, "+mode: enforce") {
		t.Errorf("kept file = %q, diff:\n%s", readFile(t, path), kept.Diff)
	}
	step(v1, true, hostconfig.PolicyReplaced)
	if readFile(t, path+".bak") != edited {
		t.Error("--force did not keep the edited file as .bak")
	}
}

// probeScript writes a hook command that answers as script says.
func probeScript(t *testing.T, e testEnv, script string) string {
	t.Helper()
	p := filepath.Join(e.Home, "bin", "portcullis-probe")
	writeFile(t, p, "#!/bin/sh\ncat >/dev/null\n"+script+"\n", 0o755)
	return p
}

// TestCheck: doctor's findings for a protected Claude Code, a Codex hook
// that is not trusted, a hook command in the build cache, a policy that
// no longer exists, a hook that exits 1, and an MCP server that bypasses
// the wrapper; each not-protected finding names its fix.
func TestCheck(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	answer := probeScript(t, e, `echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow"}}'`)
	install := func(c hostconfig.Client, words ...string) {
		t.Helper()
		if _, err := e.InstallHook(hostconfig.Hook{Client: c, Command: words}); err != nil {
			t.Fatal(err)
		}
	}
	find := func(c hostconfig.Client) hostconfig.Finding {
		t.Helper()
		fs := e.Check(ctx, "", []hostconfig.Client{c}, nil)
		if len(fs) != 1 {
			t.Fatalf("Check(%s) = %+v; want one finding", c, fs)
		}
		return fs[0]
	}

	install(hostconfig.ClaudeCode, answer, "hook", "claude-code", "--policy", e.policy)
	if f := find(hostconfig.ClaudeCode); f.Status != hostconfig.Protected || f.DefaultPolicy || !strings.Contains(strings.Join(f.Why, "\n"), "answered: allow") {
		t.Errorf("protected Claude Code: %+v", f)
	}

	// Codex: installed, then its trust removed.
	codexAnswer := probeScript(t, e, `echo '{}'`)
	install(hostconfig.Codex, codexAnswer, "hook", "codex", "--policy", e.policy)
	if f := find(hostconfig.Codex); f.Status != hostconfig.Protected {
		t.Errorf("trusted Codex: %+v", f)
	}
	writeFile(t, filepath.Join(e.CodexHome, "config.toml"), "model = \"o3\"\n", 0o600)
	if f := find(hostconfig.Codex); f.Status != hostconfig.NotProtected || !strings.Contains(strings.Join(f.Why, "\n"), "does not trust") || !strings.Contains(f.Fix, "portcullis init codex") {
		t.Errorf("untrusted Codex: %+v", f)
	}

	// The build cache.
	cached := filepath.Join(e.GoCache, "ab", "portcullis")
	writeFile(t, cached, readFile(t, answer), 0o755)
	install(hostconfig.ClaudeCode, cached, "hook", "claude-code", "--policy", e.policy)
	if f := find(hostconfig.ClaudeCode); f.Status != hostconfig.NotProtected || !strings.Contains(f.Fix, "go install ./cmd/portcullis") {
		t.Errorf("hook in the build cache: %+v", f)
	}

	// A policy that is gone: the hook refuses every call.
	gone := filepath.Join(e.Home, "gone.yaml")
	refusing := probeScript(t, e, `echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny"}}'; echo 'policy: no such file' >&2; exit 2`)
	install(hostconfig.ClaudeCode, refusing, "hook", "claude-code", "--policy", gone)
	if f := find(hostconfig.ClaudeCode); f.Status != hostconfig.Refusing || !strings.Contains(strings.Join(f.Why, "\n"), "no longer exists") {
		t.Errorf("missing policy: %+v", f)
	}

	// Exit status 1 is a non-blocking error: the call runs.
	failing := probeScript(t, e, `echo boom >&2; exit 1`)
	install(hostconfig.ClaudeCode, failing, "hook", "claude-code")
	if f := find(hostconfig.ClaudeCode); f.Status != hostconfig.NotProtected || !f.DefaultPolicy {
		t.Errorf("hook exiting 1: %+v", f)
	}

	// A missing binary.
	install(hostconfig.ClaudeCode, filepath.Join(e.Home, "bin", "gone"), "hook", "claude-code")
	if f := find(hostconfig.ClaudeCode); f.Status != hostconfig.NotProtected || !strings.Contains(strings.Join(f.Why, "\n"), "does not exist") {
		t.Errorf("missing binary: %+v", f)
	}

	// Gemini installed, no hook.
	if err := os.MkdirAll(filepath.Join(e.Home, ".gemini"), 0o755); err != nil {
		t.Fatal(err)
	}
	if f := find(hostconfig.Gemini); f.Status != hostconfig.NotProtected || f.Fix != "portcullis init gemini" {
		t.Errorf("Gemini with no hook: %+v", f)
	}

	// Claude Desktop: a server that bypasses the wrapper, then the same
	// server wrapped by a binary that does not speak MCP: the probe finds
	// no server answering (a real wrapper answers: TestCheckMCPServers).
	desktop := filepath.Join(e.ConfigDir, "Claude", "claude_desktop_config.json")
	writeFile(t, desktop, `{"mcpServers": {"fs": {"command": "npx", "args": ["server-filesystem"]}}}`, 0o644)
	if f := find(hostconfig.ClaudeDesktop); f.Status != hostconfig.NotProtected || f.Server != "fs" || !strings.Contains(strings.Join(f.Why, "\n"), "bypassing the wrapper") || f.Fix != "portcullis init mcp --name fs --client claude-desktop -- npx server-filesystem" {
		t.Errorf("bypassing server: %+v", f)
	}
	if _, err := e.WrapMCP(hostconfig.Wrap{Client: hostconfig.ClaudeDesktop, Prefix: hostconfig.WrapperPrefix(e.bin, e.policy, "claude-desktop")}); err != nil {
		t.Fatal(err)
	}
	if f := find(hostconfig.ClaudeDesktop); f.Status != hostconfig.NotProtected || !strings.Contains(strings.Join(f.Why, "\n"), "did not answer") {
		t.Errorf("wrapped server that does not answer: %+v", f)
	}
	// Nothing installed: nothing found.
	if fs := (hostconfig.Env{Home: t.TempDir(), CodexHome: filepath.Join(t.TempDir(), "none")}).Check(ctx, "", nil, nil); len(fs) != 0 {
		t.Errorf("an empty home: %+v; want no findings", fs)
	}
}

// TestClassifyTools: the name's strictest verb wins; a read-only claim
// classifies only a tool the name says nothing of; a destructive claim
// makes it not elevatable; a tool nothing speaks for asks every time.
func TestClassifyTools(t *testing.T) {
	yes, no := true, false
	got := hostconfig.ClassifyTools([]hostconfig.Tool{
		{Name: "read_text_file", ReadOnly: true},
		{Name: "write_file", Destructive: &yes, PathArg: "path"},
		{Name: "directory_overview", ReadOnly: true},
		{Name: "getAndDeleteItem"},
		{Name: "sendEmail", Destructive: &no},
		{Name: "longRunningOperation"},
		{Name: "list_things", OpenWorld: &yes, ReadOnly: true},
	})
	want := []struct {
		endpoint, risk string
		notElevatable  bool
		why            string
	}{
		{"READ", "", false, `from its name ("read")`},
		{"UPDATE", "", true, "destructiveHint"},
		{"READ", "", false, "readOnlyHint"},
		{"DELETE", "", false, `("delete")`},
		{"CREATE", "external-write", false, "external-write"},
		{"UPDATE", "", false, "a person confirms every call"},
		{"READ", "", false, `("list")`},
	}
	for i, w := range want {
		c := got[i]
		if c.Endpoint != w.endpoint || c.Risk != w.risk || c.NotElevatable != w.notElevatable || !strings.Contains(c.Why, w.why) {
			t.Errorf("ClassifyTools(%s) = %s %q elevatable=%v (%s); want %s %q notElevatable=%v (%s)", c.Name, c.Endpoint, c.Risk, !c.NotElevatable, c.Why, w.endpoint, w.risk, w.notElevatable, w.why)
		}
	}
	block := hostconfig.ToolsBlock("filesystem", got, map[string]bool{"list_things": true})
	for _, want := range []string{"  write_file: {endpoint: UPDATE, pathArg: path, canBeElevated: false}\n", "  # list_things: already classified", "REVIEW"} {
		if !bytes.Contains(block, []byte(want)) {
			t.Errorf("ToolsBlock lacks %q:\n%s", want, block)
		}
	}
}

// TestInsertTools: the block lands at the end of the tools map, before
// the next key, comments kept; a policy without tools gets a tools map.
func TestInsertTools(t *testing.T) {
	base := "# head\nversion: 1\ntools:\n  Read: {endpoint: READ}\n\n# shell rules\nshell:\n  rules: []\n"
	block := []byte("  # mine\n  x: {endpoint: READ}\n")
	got, err := hostconfig.InsertTools([]byte(base), block)
	want := "# head\nversion: 1\ntools:\n  Read: {endpoint: READ}\n\n  # mine\n  x: {endpoint: READ}\n\n# shell rules\nshell:\n  rules: []\n"
	if err != nil || string(got) != want {
		t.Errorf("InsertTools = %q, %v; want %q", got, err, want)
	}
	names, err := hostconfig.ToolNames(got)
	if err != nil || !names["x"] || !names["Read"] {
		t.Errorf("ToolNames = %v, %v", names, err)
	}
	got, err = hostconfig.InsertTools([]byte("version: 1\n"), block)
	if err != nil || string(got) != "version: 1\n\ntools:\n"+string(block) {
		t.Errorf("InsertTools without tools = %q, %v", got, err)
	}
}
