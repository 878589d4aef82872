package hostconfig

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/BurntSushi/toml"
)

// codexEvents are the Codex hook events Portcullis answers, with the label
// Codex uses for each in its trust keys.
var codexEvents = []struct{ name, label string }{
	{"PreToolUse", "pre_tool_use"},
	{"PermissionRequest", "permission_request"},
}

// installCodex merges the PreToolUse and PermissionRequest hooks into
// $CODEX_HOME/hooks.json and records in $CODEX_HOME/config.toml that the
// user trusts exactly these hooks. Codex runs a user's hook only once its
// trust entry ([hooks.state."<hooks.json>:<event>:<group>:<handler>"],
// trusted_hash = the hook's fingerprint) matches the hook; an untrusted
// hook is skipped without a word. Installing again changes nothing; the
// previous files are kept as .bak. A config.toml that cannot be extended
// safely is refused, with the lines to add, and nothing is written.
func (e Env) installCodex(command, exe string, timeout int) (Installed, error) {
	hooksPath := filepath.Join(e.CodexHome, "hooks.json")
	configPath := filepath.Join(e.CodexHome, "config.toml")
	oldHooks, hooksMode, err := readForUpdate(hooksPath)
	if err != nil {
		return Installed{}, err
	}
	oldConfig, configMode, err := readForUpdate(configPath)
	if err != nil {
		return Installed{}, err
	}
	hooks := oldHooks
	for _, ev := range codexEvents {
		if hooks, err = mergeHook(hooks, ev.name, "codex", command, exe, timeout, ""); err != nil {
			return Installed{}, fmt.Errorf("%s: %w", hooksPath, err)
		}
	}
	config := oldConfig
	trust, err := codexTrust(hooksPath, hooks, command, timeout)
	if err != nil {
		return Installed{}, err
	}
	for _, t := range trust {
		if config, err = setCodexTrust(config, t.key, t.hash); err != nil {
			return Installed{}, err
		}
	}
	if err := checkCodexTrust(config, trust); err != nil {
		var b strings.Builder
		for _, t := range trust {
			fmt.Fprintf(&b, "\n  [hooks.state.%s]\n  trusted_hash = %q", tomlQuote(t.key), t.hash)
		}
		return Installed{}, fmt.Errorf("%s: cannot record the hooks' trust (%v); nothing was changed. Fix the file, or add to it by hand:%s\nthen run this command again", configPath, err, b.String())
	}
	hooksChanged, err := writeWithBackup(hooksPath, oldHooks, hooks, hooksMode)
	if err != nil {
		return Installed{}, err
	}
	configChanged, err := writeWithBackup(configPath, oldConfig, config, configMode)
	if err != nil {
		return Installed{}, err
	}
	return Installed{Files: []string{hooksPath, configPath}, Changed: hooksChanged || configChanged, Command: command}, nil
}

// codexTrustEntry is the trust Codex needs for one installed hook.
type codexTrustEntry struct{ key, hash string }

// codexTrust is the trust entries for command's hooks in hooksJSON (the
// file at hooksPath).
func codexTrust(hooksPath string, hooksJSON []byte, command string, timeout int) ([]codexTrustEntry, error) {
	var out []codexTrustEntry
	for _, ev := range codexEvents {
		group, handler, matcher, err := findCodexHook(hooksJSON, ev.name, command)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", hooksPath, err)
		}
		hash, err := codexHookHash(ev.label, matcher, command, timeout)
		if err != nil {
			return nil, err
		}
		out = append(out, codexTrustEntry{fmt.Sprintf("%s:%s:%d:%d", hooksPath, ev.label, group, handler), hash})
	}
	return out, nil
}

// findCodexHook finds command among the event's hooks: its group's and
// its own index, and its group's matcher (nil when the group has none).
func findCodexHook(hooksJSON []byte, event, command string) (group, handler int, matcher *string, err error) {
	var file struct {
		Hooks map[string][]struct {
			Matcher *string `json:"matcher"`
			Hooks   []struct {
				Command string `json:"command"`
			} `json:"hooks"`
		} `json:"hooks"`
	}
	if err := json.Unmarshal(hooksJSON, &file); err != nil {
		return 0, 0, nil, err
	}
	for g, grp := range file.Hooks[event] {
		for h, hk := range grp.Hooks {
			if hk.Command == command {
				return g, h, grp.Matcher, nil
			}
		}
	}
	return 0, 0, nil, fmt.Errorf("the %s hook is not in place", event)
}

// codexHookHash is the fingerprint Codex trusts a command hook by
// (codex-rs/hooks/src/engine/discovery.rs, command_hook_hash, and
// codex-rs/config/src/fingerprint.rs, version_for_toml): SHA-256 of the
// JSON of {event_name, matcher, hooks: [the handler]}, keys sorted, no
// spaces, absent values left out, the handler normalized to type,
// command, timeout and async.
func codexHookHash(eventLabel string, matcher *string, command string, timeout int) (string, error) {
	identity := map[string]any{
		"event_name": eventLabel,
		"hooks": []any{map[string]any{
			"async":   false,
			"command": command,
			"timeout": timeout,
			"type":    "command",
		}},
	}
	if matcher != nil {
		identity["matcher"] = *matcher
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b) // maps encode with their keys sorted
	enc.SetEscapeHTML(false)
	if err := enc.Encode(identity); err != nil {
		return "", err
	}
	sum := sha256.Sum256(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// tomlQuote quotes s as a TOML basic string.
func tomlQuote(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(s) != nil {
		return `""`
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// setCodexTrust returns config.toml with the table [hooks.state."<key>"]
// holding trusted_hash = hash: a table this command wrote before is
// replaced, everything else is kept as written.
func setCodexTrust(config []byte, key, hash string) ([]byte, error) {
	header := "[hooks.state." + tomlQuote(key) + "]"
	lines := strings.SplitAfter(string(config), "\n")
	var out strings.Builder
	skipping := false
	for _, line := range lines {
		t := strings.TrimSpace(line)
		if t == header {
			skipping = true
			continue
		}
		if skipping && strings.HasPrefix(t, "[") {
			skipping = false
		}
		if !skipping {
			out.WriteString(line)
		}
	}
	s := out.String()
	if s != "" && !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	if s != "" && !strings.HasSuffix(s, "\n\n") {
		s += "\n"
	}
	s += header + "\ntrusted_hash = " + tomlQuote(hash) + "\n"
	return []byte(s), nil
}

// checkCodexTrust reads config.toml as Codex will and confirms that each
// key's trusted_hash is the one wanted.
func checkCodexTrust(config []byte, want []codexTrustEntry) error {
	var c struct {
		Hooks struct {
			State map[string]struct {
				TrustedHash string `toml:"trusted_hash"`
				Enabled     *bool  `toml:"enabled"`
			} `toml:"state"`
		} `toml:"hooks"`
	}
	if _, err := toml.Decode(string(config), &c); err != nil {
		return err
	}
	for _, w := range want {
		key, hash := w.key, w.hash
		st, ok := c.Hooks.State[key]
		if !ok || st.TrustedHash != hash {
			return fmt.Errorf("hooks.state %q does not read back with trusted_hash %s", key, hash)
		}
		if st.Enabled != nil && !*st.Enabled {
			return fmt.Errorf("hooks.state %q has enabled = false: Codex would not run the hook", key)
		}
	}
	return nil
}
