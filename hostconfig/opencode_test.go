package hostconfig_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/portcullis/portcullis/hostconfig"
)

// TestInstallHookOpenCode: the plugin is written to the project's
// .opencode/plugin (or the user's ~/.config/opencode/plugin), carrying
// the hook command; again, nothing changes; with --hold it is rewritten
// with the longer timeout and the old one kept as .bak; a file of that
// name that is not Portcullis's is left alone.
func TestInstallHookOpenCode(t *testing.T) {
	e := newEnv(t)
	project := filepath.Join(e.Home, "my project")
	words := []string{e.bin, "hook", "opencode", "--policy", e.policy}
	res, err := e.InstallHook(hostconfig.Hook{Client: hostconfig.OpenCode, Scope: hostconfig.ProjectScope, Project: project, Command: words})
	if err != nil {
		t.Fatal(err)
	}
	plugin := filepath.Join(project, ".opencode", "plugin", "portcullis.js")
	if !res.Changed || len(res.Files) != 1 || res.Files[0] != plugin {
		t.Fatalf("install: %+v; want %s written", res, plugin)
	}
	got, timeout, err := hostconfig.ParseOpenCodePlugin([]byte(readFile(t, plugin)))
	if err != nil || strings.Join(got, " ") != strings.Join(words, " ") || timeout != hostconfig.HookTimeout {
		t.Fatalf("the plugin reads back as %q, %d s, %v; want %q, %d s", got, timeout, err, words, hostconfig.HookTimeout)
	}
	if !strings.Contains(readFile(t, plugin), `"tool.execute.before"`) {
		t.Errorf("the plugin has no tool.execute.before hook:\n%s", readFile(t, plugin))
	}
	if res, err := e.InstallHook(hostconfig.Hook{Client: hostconfig.OpenCode, Scope: hostconfig.ProjectScope, Project: project, Command: words}); err != nil || res.Changed {
		t.Errorf("install again: %+v, %v; want nothing changed", res, err)
	}
	first := readFile(t, plugin)
	if _, err := e.InstallHook(hostconfig.Hook{Client: hostconfig.OpenCode, Scope: hostconfig.ProjectScope, Project: project, Command: append(words, "--hold"), Hold: true}); err != nil {
		t.Fatal(err)
	}
	if _, timeout, err := hostconfig.ParseOpenCodePlugin([]byte(readFile(t, plugin))); err != nil || timeout != hostconfig.HookHoldTimeout {
		t.Errorf("with --hold: timeout %d, %v; want %d", timeout, err, hostconfig.HookHoldTimeout)
	}
	if readFile(t, plugin+".bak") != first {
		t.Error("the previous plugin was not kept as .bak")
	}

	// The user's plugin directory.
	res, err = e.InstallHook(hostconfig.Hook{Client: hostconfig.OpenCode, Command: words})
	if want := filepath.Join(e.Home, ".config", "opencode", "plugin", "portcullis.js"); err != nil || res.Files[0] != want {
		t.Errorf("user install: %+v, %v; want %s", res, err, want)
	}

	// Someone else's portcullis.js stays.
	other := filepath.Join(e.Home, "other")
	foreign := filepath.Join(other, ".opencode", "plugin", "portcullis.js")
	writeFile(t, foreign, "export const Mine = async () => ({})\n", 0o644)
	if _, err := e.InstallHook(hostconfig.Hook{Client: hostconfig.OpenCode, Scope: hostconfig.ProjectScope, Project: other, Command: words}); err == nil || !strings.Contains(err.Error(), "not Portcullis's plugin") {
		t.Errorf("install over a foreign plugin: %v; want refused", err)
	}
	if readFile(t, foreign) != "export const Mine = async () => ({})\n" {
		t.Error("the foreign plugin was changed")
	}
}

// TestCheckOpenCode: doctor's findings for opencode: a plugin that runs a
// hook answering the probe is protected; an edited plugin, a plugin in the
// build cache and opencode without the plugin are not; a hook that fails
// is refusing every call (the plugin blocks on any failure).
func TestCheckOpenCode(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	find := func() hostconfig.Finding {
		t.Helper()
		fs := e.Check(ctx, "", []hostconfig.Client{hostconfig.OpenCode}, nil)
		if len(fs) != 1 {
			t.Fatalf("Check(opencode) = %+v; want one finding", fs)
		}
		return fs[0]
	}
	install := func(words ...string) string {
		t.Helper()
		res, err := e.InstallHook(hostconfig.Hook{Client: hostconfig.OpenCode, Command: words})
		if err != nil {
			t.Fatal(err)
		}
		return res.Files[0]
	}

	// Installed (its configuration directory exists), no plugin.
	if err := os.MkdirAll(filepath.Join(e.Home, ".config", "opencode"), 0o755); err != nil {
		t.Fatal(err)
	}
	if f := find(); f.Status != hostconfig.NotProtected || f.Fix != "portcullis init opencode" {
		t.Errorf("opencode with no plugin: %+v", f)
	}

	// The probe is the event the plugin sends.
	seen := filepath.Join(e.Home, "probe.json")
	answer := probeScript(t, e, "")
	writeFile(t, answer, "#!/bin/sh\ncat >"+seen+"\necho '{\"decision\":\"allow\"}'\n", 0o755)
	plugin := install(answer, "hook", "opencode", "--policy", e.policy)
	if f := find(); f.Status != hostconfig.Protected || f.File != plugin || !strings.Contains(strings.Join(f.Why, "\n"), "answered: allow") {
		t.Errorf("protected opencode: %+v", f)
	}
	var ev struct {
		Event     string         `json:"hook_event_name"`
		Tool      string         `json:"tool_name"`
		ToolInput map[string]any `json:"tool_input"`
	}
	if err := json.Unmarshal([]byte(readFile(t, seen)), &ev); err != nil || ev.Event != "tool.execute.before" || ev.Tool != "bash" || ev.ToolInput["command"] != "true" {
		t.Errorf("probe event %s (%v); want opencode's bash running true", readFile(t, seen), err)
	}

	// An edited plugin.
	edited := strings.Replace(readFile(t, plugin), `answer.decision !== "allow"`, `false`, 1)
	writeFile(t, plugin, edited, 0o644)
	if f := find(); f.Status != hostconfig.NotProtected || !strings.Contains(strings.Join(f.Why, "\n"), "changed since Portcullis wrote it") {
		t.Errorf("edited plugin: %+v", f)
	}

	// A hook that exits 1: the plugin blocks every call.
	failing := probeScript(t, e, `echo boom >&2; exit 1`)
	install(failing, "hook", "opencode")
	if f := find(); f.Status != hostconfig.Refusing || !f.DefaultPolicy {
		t.Errorf("hook exiting 1: %+v", f)
	}

	// The build cache.
	cached := filepath.Join(e.GoCache, "ab", "portcullis")
	writeFile(t, cached, "#!/bin/sh\necho '{\"decision\":\"allow\"}'\n", 0o755)
	install(cached, "hook", "opencode")
	if f := find(); f.Status != hostconfig.NotProtected || !strings.Contains(f.Fix, "go install ./cmd/portcullis") {
		t.Errorf("plugin running a binary in the build cache: %+v", f)
	}

	// A plugin that runs something else.
	install(answer, "hook", "gemini")
	if f := find(); f.Status != hostconfig.NotProtected || !strings.Contains(strings.Join(f.Why, "\n"), "not portcullis hook opencode") {
		t.Errorf("plugin running another hook: %+v", f)
	}
}

// TestOpenCodePluginFailsClosed runs the plugin's tool.execute.before hook
// under Node with opencode's real arguments ({tool, sessionID, callID},
// {args}) against hooks that allow, deny, exit 1, answer garbage, do not
// exist, or answer allow with a failing exit: only the first lets the call
// run; every other throws, with the hook's reason where it gave one.
func TestOpenCodePluginFailsClosed(t *testing.T) {
	if os.Getenv("PORTCULLIS_TEST_E2E") != "1" {
		t.Skip("PORTCULLIS_TEST_E2E=1 runs the opencode plugin under Node")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("PORTCULLIS_TEST_E2E=1 but node is missing: %v", err)
	}
	e := newEnv(t)
	for _, tc := range []struct {
		name, script string
		want         string // "" allows
	}{
		{"allow", `echo '{"decision":"allow"}'`, ""},
		{"deny", `echo '{"decision":"deny","reason":"Portcullis: no"}'`, "Portcullis: no"},
		{"refusal", `echo '{"decision":"deny","reason":"Portcullis denied this call: policy gone"}'; exit 2`, "policy gone"},
		{"exit 1", `echo '{"decision":"allow"}'; echo boom >&2; exit 1`, "exit status 1): boom"},
		{"garbage", `echo 'allow'`, "exit status 0"},
		{"no decision", `echo '{}'`, "exit status 0"},
		{"killed", `kill -9 $$`, "exit status null"},
		{"missing", "", "did not run"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exe := filepath.Join(e.Home, "bin", "gone")
			if tc.script != "" {
				exe = probeScript(t, e, tc.script)
			}
			plugin, err := hostconfig.OpenCodePlugin([]string{exe, "hook", "opencode"}, 10)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "portcullis.mjs"), string(plugin), 0o644)
			writeFile(t, filepath.Join(dir, "run.mjs"), `import { Portcullis } from "./portcullis.mjs"
const hooks = await Portcullis({ directory: process.cwd(), worktree: "/" })
try {
  await hooks["tool.execute.before"]({ tool: "bash", sessionID: "ses_1", callID: "call_1" }, { args: { command: "ls" } })
  console.log("RAN")
} catch (err) {
  console.log("BLOCKED " + err.message)
}
`, 0o644)
			cmd := exec.Command(node, "run.mjs")
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("node: %v\n%s", err, out)
			}
			got := strings.TrimSpace(string(out))
			switch {
			case tc.want == "" && got != "RAN":
				t.Errorf("allowed call: %q; want it run", got)
			case tc.want != "" && (!strings.HasPrefix(got, "BLOCKED ") || !strings.Contains(got, tc.want)):
				t.Errorf("%s: %q; want blocked with %q", tc.name, got, tc.want)
			}
		})
	}
}
