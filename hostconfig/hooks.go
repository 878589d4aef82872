package hostconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// Scope is whose configuration an install changes.
type Scope int

// The scopes: the user's files (under the home directory) or a project's.
const (
	UserScope Scope = iota
	ProjectScope
)

func (s Scope) String() string {
	if s == ProjectScope {
		return "project"
	}
	return "user"
}

// The hook timeouts written into the clients' settings, in seconds: above
// the hook's own deadline (two decisions of 20 s), and with --hold above
// that plus the longest hold (60 s), so that the hook always answers — a
// deny, on its own deadline — before the client gives up on it (a hook
// that times out is a failed run, and Codex and Gemini then run the call).
const (
	HookTimeout     = 60
	HookHoldTimeout = 120
)

// Hook is a Portcullis hook to install in one client's configuration.
type Hook struct {
	Client  Client
	Scope   Scope
	Project string // the project directory, for ProjectScope
	// Command is the hook command's words: the binary, "hook", the
	// client's name and its flags (HookCommand builds them).
	Command []string
	Hold    bool // the hook holds calls for a person: the longer timeout
}

// HookCommand is the words of the hook command for client: exe, "hook",
// the client, then --policy (unless empty: the built-in default policy),
// --state (unless empty) and --hold.
func HookCommand(exe string, client Client, policy, state string, hold bool) []string {
	words := []string{exe, "hook", string(client)}
	if policy != "" {
		words = append(words, "--policy", policy)
	}
	if state != "" {
		words = append(words, "--state", state)
	}
	if hold {
		words = append(words, "--hold")
	}
	return words
}

// Installed is what an install did.
type Installed struct {
	Files   []string // the files written or found up to date
	Changed bool     // whether any file changed
	Command string   // the command the client runs, as written
	Notes   []string // what a person should know (a server left unwrapped, ...)
}

// SettingsFile is the settings file in which client keeps its hooks or
// MCP servers, for the scope; project is the project directory.
func (e Env) SettingsFile(client Client, scope Scope, project string) (string, error) {
	if scope == ProjectScope && project == "" {
		return "", errors.New("a project install needs the project directory")
	}
	switch {
	case client == ClaudeCode && scope == UserScope:
		return filepath.Join(e.Home, ".claude", "settings.json"), nil
	case client == ClaudeCode:
		return filepath.Join(project, ".claude", "settings.json"), nil
	case client == Gemini && scope == UserScope:
		return filepath.Join(e.Home, ".gemini", "settings.json"), nil
	case client == Gemini:
		return filepath.Join(project, ".gemini", "settings.json"), nil
	case client == Codex && scope == UserScope:
		return filepath.Join(e.CodexHome, "hooks.json"), nil
	case client == Codex:
		return "", errors.New("hooks for Codex are installed for the user (in $CODEX_HOME, default ~/.codex), where Codex records which hooks the user trusts: a project install does not apply")
	case client == OpenCode && scope == UserScope:
		return filepath.Join(e.openCodeDir(), "plugin", OpenCodePluginName), nil
	case client == OpenCode:
		return filepath.Join(project, ".opencode", "plugin", OpenCodePluginName), nil
	case client == ClaudeDesktop && scope == UserScope:
		return filepath.Join(e.ConfigDir, "Claude", "claude_desktop_config.json"), nil
	case client == ClaudeDesktop:
		return "", errors.New("there is no project configuration for Claude Desktop: install for the user")
	case client == Cursor && scope == UserScope:
		return filepath.Join(e.Home, ".cursor", "mcp.json"), nil
	case client == Cursor:
		return filepath.Join(project, ".cursor", "mcp.json"), nil
	case client == Copilot && scope == UserScope:
		return filepath.Join(e.copilotHome(), "hooks", CopilotHookFile), nil
	case client == Copilot:
		return filepath.Join(project, ".github", "hooks", CopilotHookFile), nil
	}
	return "", fmt.Errorf("unknown client %q", client)
}

// HookFile is the file in which client keeps its hooks, for the scope:
// SettingsFile, except for Cursor, whose hooks are in hooks.json beside
// its mcp.json.
func (e Env) HookFile(client Client, scope Scope, project string) (string, error) {
	if client != Cursor {
		return e.SettingsFile(client, scope, project)
	}
	mcp, err := e.SettingsFile(client, scope, project)
	if err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(mcp), "hooks.json"), nil
}

// InstallHook merges the hook into the client's settings: Claude Code's
// PreToolUse hook for every tool, Gemini CLI's BeforeTool hook, Codex's
// PreToolUse and PermissionRequest hooks with their trust entries,
// Cursor's blocking hooks (installCursor), Copilot CLI's preToolUse
// hook (installCopilot) or opencode's plugin (installOpenCode: a file of
// its own, replaced whole). Other settings and hooks keep their place; an
// existing Portcullis hook is replaced in place, so installing again
// changes nothing; the previous file is kept as <file>.bak. A file that is
// not a JSON object is left alone and the install fails.
func (e Env) InstallHook(h Hook) (Installed, error) {
	if !h.Client.HookInstallable() {
		return Installed{}, fmt.Errorf("%s runs MCP servers, not hooks: wrap its servers instead", h.Client)
	}
	if len(h.Command) < 3 {
		return Installed{}, errors.New("the hook command needs the binary, hook and the client")
	}
	command, err := ShellJoin(h.Command)
	if err != nil {
		return Installed{}, err
	}
	exe, err := ShellJoin(h.Command[:1])
	if err != nil {
		return Installed{}, err
	}
	path, err := e.HookFile(h.Client, h.Scope, h.Project)
	if err != nil {
		return Installed{}, err
	}
	timeout := HookTimeout
	if h.Hold {
		timeout = HookHoldTimeout
	}
	switch h.Client {
	case Codex:
		return e.installCodex(command, exe, timeout)
	case Cursor:
		return installCursor(path, command, exe, timeout)
	case Copilot:
		return installCopilot(path, command, exe, timeout)
	case OpenCode:
		return e.installOpenCode(path, h, command, timeout)
	}
	old, mode, err := readForUpdate(path)
	if err != nil {
		return Installed{}, err
	}
	event, matcher, wrote := "PreToolUse", `"*"`, timeout
	if h.Client == Gemini {
		// Gemini's matcher is a regular expression, its timeout in ms.
		event, matcher, wrote = "BeforeTool", `".*"`, timeout*1000
	}
	updated, err := mergeHook(old, event, string(h.Client), command, exe, wrote, matcher)
	if err != nil {
		return Installed{}, fmt.Errorf("%s: %w", path, err)
	}
	changed, err := writeWithBackup(path, old, updated, mode)
	if err != nil {
		return Installed{}, err
	}
	res := Installed{Files: []string{path}, Changed: changed, Command: command}
	if h.Client == Gemini && h.Scope == ProjectScope {
		if trusted, _ := e.geminiTrusts(h.Project); !trusted {
			res.Notes = append(res.Notes, "Gemini CLI runs a project's hooks only in a folder you trust (it asks when it starts there); until then, and in gemini -p, it skips them and every call runs unchecked. portcullis hook install gemini --user installs a hook Gemini CLI runs in every folder.")
		}
	}
	return res, nil
}

// isPortcullisHook reports whether a hook command is one Portcullis
// installed: it runs this binary (exe, as quoted in commands), or any
// portcullis binary, as `hook <host>`.
func isPortcullisHook(command, exe, host string) bool {
	if !strings.Contains(command, " hook "+host) {
		return false
	}
	return strings.Contains(command, "portcullis") || strings.HasPrefix(command, exe+" ")
}

// hookEntry is one hook of a settings file, as the clients write it.
type hookEntry struct {
	Type    string `json:"type"`
	Command string `json:"command"`
	Timeout int    `json:"timeout"`
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
	ours, err := marshal(hookEntry{"command", command, timeout})
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
			b, err := marshal(kept)
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
	b, err := marshal(groups)
	if err != nil {
		return nil, err
	}
	hooks.set(event, b)
	root.set("hooks", hooks.marshal())
	return indent(root.marshal())
}
