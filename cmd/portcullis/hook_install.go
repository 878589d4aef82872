package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"mvdan.cc/sh/v3/syntax"

	"github.com/portcullis/portcullis/hook"
)

// hookTimeout is the hook timeout written into Claude Code's settings, in
// seconds: above the hook's own deadline (two decisions of 20 s), and with
// --hold above that plus the longest hold (60 s), so that the hook always
// answers — a deny, on its own deadline — before Claude Code gives up on
// it.
const (
	hookTimeout     = 60
	hookHoldTimeout = 120
)

// runHookInstall is `portcullis hook install claude-code`: it merges a
// PreToolUse hook that runs this binary into Claude Code's settings, the
// project's (.claude/settings.json) or the user's (~/.claude/settings.json);
// `hook install codex` is installCodexHook.
// Other settings and other hooks are kept as they are, in their order; an
// existing Portcullis hook is replaced, so running it again changes nothing;
// the previous file is kept beside it as settings.json.bak.
func runHookInstall(o *hookInstallOptions, pos []string, stdout io.Writer) error {
	var err error
	var deferMCP []string
	for _, v := range o.deferMCP {
		for _, s := range strings.Split(v, ",") {
			if err := hook.CheckMCPServerName(s); err != nil {
				return usageError("--defer-mcp: %v", err)
			}
			deferMCP = append(deferMCP, s)
		}
	}
	if len(pos) != 1 || (pos[0] != "claude-code" && pos[0] != "codex") {
		return usageError("hook install supports claude-code and codex (Gemini CLI's hook is configured by hand: see docs/INTEGRATIONS.md)")
	}
	host := pos[0]
	if o.project && o.user {
		return usageError("--project and --user: choose one")
	}
	if host == "codex" && len(deferMCP) > 0 {
		return usageError("--defer-mcp reads Claude Code's MCP configuration: it is for claude-code")
	}
	if host == "codex" && (o.project || o.dir != "") {
		return usageError("hook install codex installs for the user (in $CODEX_HOME, default ~/.codex), where Codex records which hooks the user trusts: --project and --dir do not apply")
	}
	path, err := policyPath(o.policy)
	if err != nil {
		return err
	}
	if path, err = filepath.Abs(path); err != nil {
		return err
	}
	if _, err := os.Stat(path); err != nil {
		return usageError("--policy: %v", err)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this binary: %w", err)
	}
	if resolved, err := filepath.EvalSymlinks(exe); err == nil {
		exe = resolved
	}
	var settings string
	switch {
	case host == "codex":
		// Codex's home is found by installCodexHook.
	case o.user:
		home, err := os.UserHomeDir()
		if err != nil {
			return fmt.Errorf("find the home directory: %w", err)
		}
		settings = filepath.Join(home, ".claude", "settings.json")
	default:
		base := o.dir
		if base == "" {
			base = "."
		}
		if base, err = filepath.Abs(base); err != nil {
			return err
		}
		settings = filepath.Join(base, ".claude", "settings.json")
	}

	words := []string{exe, "hook", host, "--policy", path}
	if o.state != "" {
		abs, err := filepath.Abs(o.state)
		if err != nil {
			return err
		}
		words = append(words, "--state", abs)
	}
	for _, s := range deferMCP {
		words = append(words, "--defer-mcp", s)
	}
	timeout := hookTimeout
	if o.hold {
		words = append(words, "--hold")
		timeout = hookHoldTimeout
	}
	command, err := shellJoin(words)
	if err != nil {
		return err
	}
	quotedExe, err := shellJoin(words[:1])
	if err != nil {
		return err
	}
	if host == "codex" {
		return installCodexHook(stdout, command, quotedExe, timeout)
	}
	changed, err := installClaudeHook(settings, command, quotedExe, timeout)
	if err != nil {
		return err
	}
	if !changed {
		fmt.Fprintf(stdout, "%s: the Portcullis hook is already installed\n", settings)
		return nil
	}
	fmt.Fprintf(stdout, "%s: PreToolUse hook installed for every tool:\n  %s\n", settings, command)
	return nil
}

// shellJoin quotes words for the shell Claude Code runs hook commands in.
func shellJoin(words []string) (string, error) {
	out := make([]string, len(words))
	for i, w := range words {
		q, err := syntax.Quote(w, syntax.LangPOSIX)
		if err != nil {
			return "", fmt.Errorf("quote %q: %w", w, err)
		}
		out[i] = q
	}
	return strings.Join(out, " "), nil
}

// isPortcullisHook reports whether a hook command is one this command
// installed: it runs this binary (exe, as quoted in commands), or any
// portcullis binary, as `hook claude-code`.
func isPortcullisHook(command, exe, host string) bool {
	if !strings.Contains(command, " hook "+host) {
		return false
	}
	return strings.Contains(command, "portcullis") || strings.HasPrefix(command, exe+" ")
}

// installClaudeHook merges the hook into the settings file and reports
// whether the file changed. The file is replaced atomically; the previous
// version is kept as <file>.bak.
func installClaudeHook(path, command, exe string, timeout int) (bool, error) {
	old, err := os.ReadFile(path)
	mode := fs.FileMode(0o644)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		old = nil
	case err != nil:
		return false, err
	default:
		if st, err := os.Stat(path); err == nil {
			mode = st.Mode().Perm()
		}
	}
	updated, err := mergeHook(old, "PreToolUse", "claude-code", command, exe, timeout, `"*"`)
	if err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	return writeWithBackup(path, old, updated, mode)
}

// writeWithBackup replaces path with updated atomically, keeping old (if
// any) as <path>.bak, and reports whether the file changed.
func writeWithBackup(path string, old, updated []byte, mode fs.FileMode) (bool, error) {
	if old != nil && bytes.Equal(updated, old) {
		return false, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return false, err
	}
	if old != nil {
		if err := os.WriteFile(path+".bak", old, mode); err != nil {
			return false, fmt.Errorf("back up %s: %w", path, err)
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(updated); err != nil {
		tmp.Close()
		return false, err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return false, err
	}
	if err := tmp.Close(); err != nil {
		return false, err
	}
	return true, os.Rename(tmp.Name(), path)
}

// mergeHook returns the settings with the Portcullis hook for event in
// place: in the matcher group that already holds a Portcullis hook of host
// (replaced there), or in a new group (with matcher, a JSON value, unless
// empty). Everything else keeps its place and value.
func mergeHook(settings []byte, event, host, command, exe string, timeout int, matcher string) ([]byte, error) {
	if len(bytes.TrimSpace(settings)) == 0 {
		settings = []byte("{}")
	}
	root, err := parseObject(settings)
	if err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	hooks := &object{}
	if raw, ok := root.get("hooks"); ok {
		if hooks, err = parseObject(raw); err != nil {
			return nil, fmt.Errorf(`"hooks" is not an object: %w`, err)
		}
	}
	var groups []json.RawMessage
	if raw, ok := hooks.get(event); ok {
		if err := json.Unmarshal(raw, &groups); err != nil {
			return nil, fmt.Errorf(`"hooks.%s" is not a list: %w`, event, err)
		}
	}
	ours, err := json.Marshal(struct {
		Type    string `json:"type"`
		Command string `json:"command"`
		Timeout int    `json:"timeout"`
	}{"command", command, timeout})
	if err != nil {
		return nil, err
	}
	placed := false
	for i, g := range groups {
		group, err := parseObject(g)
		if err != nil {
			continue // not ours to judge: kept as it is
		}
		raw, ok := group.get("hooks")
		if !ok {
			continue
		}
		var list []json.RawMessage
		if json.Unmarshal(raw, &list) != nil {
			continue
		}
		changed := false
		kept := list[:0:0]
		for _, hk := range list {
			var h struct {
				Command string `json:"command"`
			}
			if json.Unmarshal(hk, &h) == nil && isPortcullisHook(h.Command, exe, host) {
				if !placed {
					kept = append(kept, ours)
					placed = true
				}
				changed = true
				continue
			}
			kept = append(kept, hk)
		}
		if changed {
			b, err := json.Marshal(kept)
			if err != nil {
				return nil, err
			}
			group.set("hooks", b)
			groups[i] = group.marshal()
		}
	}
	if !placed {
		g := &object{}
		if matcher != "" {
			g.set("matcher", json.RawMessage(matcher))
		}
		g.set("hooks", append(append([]byte("["), ours...), ']'))
		groups = append(groups, g.marshal())
	}
	b, err := json.Marshal(groups)
	if err != nil {
		return nil, err
	}
	hooks.set(event, b)
	root.set("hooks", hooks.marshal())
	var out bytes.Buffer
	if err := json.Indent(&out, root.marshal(), "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// object is a JSON object that keeps its keys in order.
type object struct {
	keys []string
	vals map[string]json.RawMessage
}

func parseObject(data []byte) (*object, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("want an object")
	}
	o := &object{vals: map[string]json.RawMessage{}}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		o.set(key, v)
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("unexpected data after the object")
	}
	return o, nil
}

func (o *object) get(key string) (json.RawMessage, bool) {
	v, ok := o.vals[key]
	return v, ok
}

func (o *object) set(key string, v json.RawMessage) {
	if o.vals == nil {
		o.vals = map[string]json.RawMessage{}
	}
	if _, ok := o.vals[key]; !ok {
		o.keys = append(o.keys, key)
	}
	o.vals[key] = v
}

func (o *object) marshal() json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		// A key read from JSON is valid UTF-8: encoding it cannot fail.
		if enc.Encode(k) != nil {
			b.WriteString(`""`)
		}
		b.Truncate(b.Len() - 1) // the encoder's newline
		b.WriteByte(':')
		b.Write(o.vals[k])
	}
	b.WriteByte('}')
	return b.Bytes()
}
