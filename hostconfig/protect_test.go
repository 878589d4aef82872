package hostconfig_test

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/portcullis/portcullis/hostconfig"
)

// TestProtect: init's whole step for a hooked client in a project — the
// starter policy written, the hook installed, each said — and again: both
// found up to date; a policy a person edited is kept, with the difference
// shown.
func TestProtect(t *testing.T) {
	e := newEnv(t)
	project := filepath.Join(e.Home, "project")
	s := hostconfig.Setup{Client: hostconfig.ClaudeCode, Binary: e.bin, Project: project}
	pol := filepath.Join(project, ".portcullis", "policy.yaml")
	settings := filepath.Join(project, ".claude", "settings.json")
	var out strings.Builder
	if err := e.Protect(&out, s); err != nil {
		t.Fatal(err)
	}
	want := "policy: wrote " + pol + " (the built-in default policy, commented: edit it to taste)\n" +
		"claude-code: hook installed in " + settings + " (previous files kept as .bak)\n  " + e.bin + " hook claude-code --policy " + pol + "\n"
	if out.String() != want {
		t.Errorf("Protect wrote\n%s\nwant\n%s", out.String(), want)
	}
	if got := readFile(t, pol); !strings.HasPrefix(got, "# Written by portcullis init.") || !hostconfig.Unedited([]byte(got)) {
		t.Errorf("the starter policy is not init's, unedited:\n%s", got)
	}

	out.Reset()
	if err := e.Protect(&out, s); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "policy: "+pol+" is up to date\n") || !strings.Contains(out.String(), "hook already installed") {
		t.Errorf("Protect again wrote\n%s\nwant everything up to date", out.String())
	}

	writeFile(t, pol, readFile(t, pol)+"# mine\n", 0o600)
	out.Reset()
	if err := e.Protect(&out, s); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "policy: kept "+pol+": it was edited since init wrote it.") || !strings.Contains(out.String(), "-# mine") {
		t.Errorf("Protect over an edited policy wrote\n%s\nwant it kept, with the difference", out.String())
	}
	if !strings.HasSuffix(readFile(t, pol), "# mine\n") {
		t.Error("Protect replaced a policy a person edited")
	}
}

// TestProtectWrapped: a client whose MCP servers are wrapped, under a
// policy a person names: no starter policy, and the way to classify a
// server's tools is said.
func TestProtectWrapped(t *testing.T) {
	e := newEnv(t)
	cfg := filepath.Join(e.ConfigDir, "Claude", "claude_desktop_config.json")
	writeFile(t, cfg, `{"mcpServers":{"fs":{"command":"npx","args":["server-filesystem"]}}}`, 0o600)
	var out strings.Builder
	if err := e.Protect(&out, hostconfig.Setup{Client: hostconfig.ClaudeDesktop, Binary: e.bin, Policy: e.policy}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"policy: " + e.policy + "\n",
		"claude-desktop: MCP wrapper installed in " + cfg,
		"  to classify a server's tools instead of asking for each unknown one: portcullis init mcp --client claude-desktop -- SERVER...\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("Protect(claude-desktop) wrote\n%s\nwant %q in it", out.String(), want)
		}
	}
	if strings.Contains(out.String(), "wrote") {
		t.Errorf("Protect with a policy named wrote a starter policy:\n%s", out.String())
	}
}

func TestWriteStarterRefusesAPolicyThatDoesNotLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.yaml")
	err := hostconfig.WriteStarter(io.Discard, path, []byte("version: 1\ntools: {x: {endpoint: NOPE}}\n"), false)
	if err == nil || !strings.HasPrefix(err.Error(), "the starter policy does not load: ") {
		t.Fatalf("WriteStarter(bad policy) = %v; want it refused", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Error("WriteStarter wrote a policy that does not load")
	}
}

// TestReport: doctor's text and JSON for nothing installed, for a
// protected hook, and for one that is not.
func TestReport(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	project := filepath.Join(e.Home, "project")
	var out strings.Builder
	bad, total, err := e.Report(ctx, &out, project, []hostconfig.Client{hostconfig.ClaudeCode, hostconfig.Cursor}, false, hostconfig.Probes{})
	if err != nil || bad != 0 || total != 0 {
		t.Fatalf("Report(nothing installed) = %d, %d, %v", bad, total, err)
	}
	if want := "doctor:\n  no agent client found (looked for claude-code, cursor in " + e.Home + " and " + project + ")\n"; out.String() != want {
		t.Errorf("Report(nothing installed) wrote %q; want %q", out.String(), want)
	}
	out.Reset()
	if _, _, err := e.Report(ctx, &out, project, nil, true, hostconfig.Probes{}); err != nil || out.String() != "[]\n" {
		t.Errorf("Report(nothing installed, json) = %q, %v; want []", out.String(), err)
	}

	if err := os.MkdirAll(project, 0o755); err != nil {
		t.Fatal(err)
	}
	answer := probeScript(t, e, `echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow"}}'`)
	if _, err := e.InstallHook(hostconfig.Hook{Client: hostconfig.ClaudeCode, Command: []string{answer, "hook", "claude-code", "--policy", e.policy}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.InstallHook(hostconfig.Hook{Client: hostconfig.Gemini, Command: []string{filepath.Join(e.Home, "gone"), "hook", "gemini"}}); err != nil {
		t.Fatal(err)
	}
	only := []hostconfig.Client{hostconfig.ClaudeCode, hostconfig.Gemini}
	out.Reset()
	bad, total, err = e.Report(ctx, &out, project, only, false, hostconfig.Probes{})
	if err != nil || bad != 1 || total != 2 {
		t.Fatalf("Report = %d of %d not protected, %v; want 1 of 2\n%s", bad, total, err, out.String())
	}
	text := out.String()
	for _, want := range []string{
		"  claude-code (" + filepath.Join(e.Home, ".claude", "settings.json") + "): protected\n    runs: " + answer,
		"  gemini (" + filepath.Join(e.Home, ".gemini", "settings.json") + "): ",
		"    policy: the built-in default policy (no --policy in the command; portcullis policy show-default prints it)\n",
		"    fix: ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("Report wrote\n%s\nwant %q in it", text, want)
		}
	}
	out.Reset()
	if _, _, err := e.Report(ctx, &out, project, only, true, hostconfig.Probes{}); err != nil {
		t.Fatal(err)
	}
	var findings []map[string]any
	if err := json.Unmarshal([]byte(out.String()), &findings); err != nil || len(findings) != 2 {
		t.Fatalf("Report(json) = %q, %v; want two findings", out.String(), err)
	}
	if f := findings[0]; f["client"] != "claude-code" || f["status"] != "protected" || f["defaultPolicy"] != false || f["fix"] != nil {
		t.Errorf("Report(json)[0] = %v; want claude-code protected, no fix", f)
	}
	if f := findings[1]; f["client"] != "gemini" || f["status"] == "protected" || f["defaultPolicy"] != true || f["fix"] == "" {
		t.Errorf("Report(json)[1] = %v; want gemini not protected, with its fix", f)
	}
}

func TestClientNamesAndProtection(t *testing.T) {
	names := hostconfig.ClientNames()
	if len(names) != len(hostconfig.Clients) {
		t.Fatalf("ClientNames() = %q; want one per client", names)
	}
	for i, c := range hostconfig.Clients {
		if names[i] != string(c) {
			t.Errorf("ClientNames()[%d] = %q; want %q", i, names[i], c)
		}
		if got, ok := hostconfig.ClientNamed(names[i]); !ok || got != c {
			t.Errorf("ClientNamed(%q) = %q, %v", names[i], got, ok)
		}
		if p := c.Protection(); p == "" {
			t.Errorf("%s.Protection() is empty", c)
		}
		if got, ok := hostconfig.WrappedClientNamed(names[i]); ok != !c.Hooked() || (ok && got != c) {
			t.Errorf("WrappedClientNamed(%q) = %q, %v; want it only for a client that is not hooked", names[i], got, ok)
		}
	}
	if _, ok := hostconfig.WrappedClientNamed("vscode"); ok {
		t.Error("WrappedClientNamed(vscode) named a client")
	}
}

// TestPrepare: the policy and the state made absolute; a project install
// where the client has none, or a policy that does not load, refused
// before anything is written.
func TestPrepare(t *testing.T) {
	e := newEnv(t)
	t.Chdir(filepath.Dir(e.policy))
	s, err := e.Prepare(hostconfig.Setup{Client: hostconfig.ClaudeCode, Policy: filepath.Base(e.policy), State: "state"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Policy != e.policy || s.State != filepath.Join(filepath.Dir(e.policy), "state") {
		t.Errorf("Prepare = policy %q, state %q; want both absolute", s.Policy, s.State)
	}
	if _, err := e.Prepare(hostconfig.Setup{Client: hostconfig.Codex, Project: filepath.Join(e.Home, "project")}); err == nil || !strings.Contains(err.Error(), "a project install does not apply") {
		t.Errorf("Prepare(codex in a project) = %v; want refused", err)
	}
	bad := filepath.Join(e.Home, "bad.yaml")
	writeFile(t, bad, "version: 1\ntools: {x: {endpoint: NOPE}}\n", 0o600)
	if _, err := e.Prepare(hostconfig.Setup{Client: hostconfig.ClaudeCode, Policy: bad}); err == nil || !strings.HasPrefix(err.Error(), "--policy: ") {
		t.Errorf("Prepare(a policy that does not load) = %v; want refused", err)
	}
}
