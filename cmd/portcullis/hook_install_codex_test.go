package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

// TestCodexHookHash pins the fingerprint to the one Codex 0.169 itself
// reports for the same hooks (the app server's hooks/list currentHash):
// a trust entry with any other value leaves the hook untrusted, and
// Codex then skips it without a word.
func TestCodexHookHash(t *testing.T) {
	star := "*"
	for _, tc := range []struct {
		event   string
		matcher *string
		command string
		timeout int
		want    string
	}{
		{"pre_tool_use", nil, "/usr/local/bin/portcullis hook codex --policy /p/policy.yaml", 60,
			"sha256:4a9ad0bd44f45fcbf782d3b6067d3a18277a9e62839a357e50e3c56d347e2845"},
		{"permission_request", nil, "/usr/local/bin/portcullis hook codex --policy /p/policy.yaml", 60,
			"sha256:407c5f0627f5063fb55afe6c6406c95922bc99637c160f3b2019492672eee92a"},
		{"pre_tool_use", &star, "'/opt/port cullis/portcullis' hook codex --policy /etc/portcullis/policy.yaml --hold", 120,
			"sha256:858fe4c2960da7d06fdef8462922fb2d19e7ec9c532fcc39d3e014e7b62490ed"},
	} {
		got, err := codexHookHash(tc.event, tc.matcher, tc.command, tc.timeout)
		if err != nil || got != tc.want {
			t.Errorf("%s %q: %s, %v; want %s", tc.event, tc.command, got, err, tc.want)
		}
	}
}

// TestHookInstallCodex: install writes both hooks into $CODEX_HOME/hooks.json
// and their trust into config.toml, keeping the user's own hooks and
// settings; a second run changes nothing; a config.toml it cannot extend
// safely is refused with the lines to add, and nothing is written.
func TestHookInstallCodex(t *testing.T) {
	home := t.TempDir()
	t.Setenv("CODEX_HOME", home)
	hooksPath := filepath.Join(home, "hooks.json")
	configPath := filepath.Join(home, "config.toml")
	userHooks := `{"hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"command","command":"./lint.sh"}]}]}}`
	userConfig := "# mine\nmodel = \"o3\"\n\n[hooks.state.\"/x/hooks.json:pre_tool_use:0:0\"]\nenabled = false\n"
	if err := os.WriteFile(hooksPath, []byte(userHooks), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(configPath, []byte(userConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, "", "hook", "install", "codex", "--policy", claudePolicy)
	if code != 0 {
		t.Fatalf("install: exit %d: %s%s", code, stdout, stderr)
	}
	hooks, err := os.ReadFile(hooksPath)
	if err != nil {
		t.Fatal(err)
	}
	config, err := os.ReadFile(configPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(config), userConfig) {
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
	if _, err := toml.Decode(string(config), &c); err != nil || c.Model != "o3" {
		t.Fatalf("config.toml: %v, model %q", err, c.Model)
	}
	// The user's hook keeps its place (its own trust key), Portcullis's
	// follows it; PermissionRequest has Portcullis's alone.
	for _, want := range []struct{ event, key string }{
		{"PreToolUse", hooksPath + ":pre_tool_use:1:0"},
		{"PermissionRequest", hooksPath + ":permission_request:0:0"},
	} {
		st, ok := c.Hooks.State[want.key]
		if !ok || !strings.HasPrefix(st.TrustedHash, "sha256:") {
			t.Errorf("no trust entry %s in:\n%s", want.key, config)
		}
	}
	if !strings.Contains(string(hooks), `"command": "./lint.sh"`) || strings.Count(string(hooks), " hook codex --policy ") != 2 {
		t.Errorf("hooks.json:\n%s", hooks)
	}
	code, stdout, _ = runCLI(t, "", "hook", "install", "codex", "--policy", claudePolicy)
	if code != 0 || !strings.Contains(stdout, "already installed and trusted") {
		t.Errorf("second install: exit %d: %s", code, stdout)
	}
	if again, _ := os.ReadFile(configPath); string(again) != string(config) {
		t.Errorf("second install changed config.toml:\n%s", again)
	}

	// A config.toml that does not parse is not rewritten.
	inline := "model = \n"
	if err := os.WriteFile(configPath, []byte(inline), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(hooksPath); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = runCLI(t, "", "hook", "install", "codex", "--policy", claudePolicy)
	if code == 0 || !strings.Contains(stderr, "trusted_hash = ") || !strings.Contains(stderr, "nothing was changed") {
		t.Errorf("unparsable config.toml: exit %d: %s%s; want a refusal naming the lines to add", code, stdout, stderr)
	}
	if got, _ := os.ReadFile(configPath); string(got) != inline {
		t.Errorf("refused install changed config.toml: %s", got)
	}
	if _, err := os.Stat(hooksPath); err == nil {
		t.Error("refused install wrote hooks.json")
	}

	// A project install does not exist for Codex: trust is the user's.
	if code, _, stderr := runCLI(t, "", "hook", "install", "codex", "--project", "--policy", claudePolicy); code != 2 || !strings.Contains(stderr, "CODEX_HOME") {
		t.Errorf("--project: exit %d: %s", code, stderr)
	}
}
