package hostconfig

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// Status is whether a client is protected.
type Status string

// The statuses Check reports.
const (
	// Protected: the client runs Portcullis in front of its tools, and
	// Portcullis answered a probe.
	Protected Status = "protected"
	// Refusing: Portcullis is in front, but it refuses every call (its
	// policy is gone, it cannot start): safe, and the agent cannot work.
	Refusing Status = "refusing every call"
	// NotProtected: calls can run without Portcullis deciding them, now
	// or soon (an untrusted Codex hook, a binary that will vanish, a
	// server entry that bypasses the wrapper, no hook at all).
	NotProtected Status = "not protected"
)

// Finding is what Check found for one client configuration file.
// Its JSON form is what `portcullis doctor --json` prints.
type Finding struct {
	Client  Client   `json:"client"`
	File    string   `json:"file"`             // the configuration file it is about
	Server  string   `json:"server,omitempty"` // the MCP server of File it is about ("" for the file or the client as a whole)
	Status  Status   `json:"status"`
	Why     []string `json:"why"`               // what was found, in order
	Fix     string   `json:"fix,omitempty"`     // the command that fixes it, when not protected
	Command string   `json:"command,omitempty"` // the configured command, when there is one
	// DefaultPolicy: the command names no policy file, so it runs under
	// the built-in default policy (unless the client's environment sets
	// PORTCULLIS_POLICY).
	DefaultPolicy bool `json:"defaultPolicy"`
}

// Probe is how Check runs a configured hook command: with the client's
// probe event on stdin, in dir.
type Probe func(ctx context.Context, command, dir string, stdin []byte) (stdout, stderr []byte, exit int, err error)

// ShellProbe runs the command as the clients do: `sh -c COMMAND`, with
// this process's environment, for at most 30 seconds.
func ShellProbe(ctx context.Context, command, dir string, stdin []byte) ([]byte, []byte, int, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.Bytes(), errb.Bytes(), 0, nil
	case errors.As(err, &ee) && ctx.Err() == nil:
		return out.Bytes(), errb.Bytes(), ee.ExitCode(), nil
	}
	return out.Bytes(), errb.Bytes(), -1, err
}

// ProbeSession is the session id of Check's probe events, as the audit
// log shows it.
const ProbeSession = "portcullis-doctor-probe"

// probeEvent is a harmless event for client: the shell command `true`,
// which the hook decides (and audits) and nothing runs.
func probeEvent(client Client, dir string) []byte {
	ev := map[string]any{
		"session_id":      ProbeSession,
		"transcript_path": "",
		"cwd":             dir,
		"tool_input":      map[string]any{"command": "true"},
	}
	switch client {
	case OpenCode:
		ev = map[string]any{"hook_event_name": "tool.execute.before", "session_id": ProbeSession,
			"tool_use_id": "portcullis-doctor", "tool_name": "bash", "cwd": dir,
			"tool_input": map[string]any{"command": "true", "description": "Portcullis doctor's probe"}}
	case Gemini:
		ev["hook_event_name"], ev["tool_name"] = "BeforeTool", "run_shell_command"
		ev["timestamp"] = "2026-01-01T00:00:00Z"
	case Cursor:
		ev = map[string]any{"hook_event_name": "beforeShellExecution", "conversation_id": ProbeSession,
			"generation_id": "portcullis-doctor", "workspace_roots": []string{dir}, "command": "true", "cwd": dir}
	case Copilot:
		ev = map[string]any{"sessionId": ProbeSession, "timestamp": 0, "cwd": dir,
			"toolName": "bash", "toolArgs": map[string]any{"command": "true"}}
	default:
		ev["hook_event_name"], ev["tool_name"] = "PreToolUse", "Bash"
		ev["permission_mode"], ev["tool_use_id"] = "default", "portcullis-doctor"
		if client == Codex {
			ev["model"], ev["turn_id"] = "probe", "probe"
		}
	}
	b, err := json.Marshal(ev)
	if err != nil {
		panic(err) // a map of strings always encodes
	}
	return b
}

// Check finds each client in only (every client when empty) that is
// installed for the user or in project (when not empty) and reports
// whether it is protected. A hook is probed through the exact command its
// settings hold, with probe (ShellProbe when nil); an MCP server behind
// the wrapper is probed with ProbeMCPServer.
func (e Env) Check(ctx context.Context, project string, only []Client, probe Probe) []Finding {
	return e.CheckWith(ctx, project, only, Probes{Hook: probe})
}

// Probes are how Check runs what it finds; a nil field is the real one.
type Probes struct {
	Hook Probe    // a hook command (ShellProbe)
	MCP  MCPProbe // an MCP server entry (ProbeMCPServer)
	// Project lets probes run the hook commands and start the MCP servers
	// a project's own files name (.claude/settings.json, .mcp.json,
	// .cursor/hooks.json, .gemini/settings.json, .github/hooks/*.json,
	// .opencode/plugin). Those files come with the project — a cloned
	// repository can name any command in them — and the clients ask
	// before running them; without Project such an entry is only read.
	Project bool
}

// hookProbes runs the hook commands Check finds: those a project's own
// files name only when the person trusts the project (Probes.Project).
type hookProbes struct {
	run     Probe
	project string
	trust   bool
}

// forFile is the probe for a hook command that file names: nil (read it,
// do not run it) when the file is the project's own and the project is
// not trusted.
func (h hookProbes) forFile(e Env, c Client, file string) Probe {
	if h.trust || h.project == "" || !within(file, h.project) {
		return h.run
	}
	if user, err := e.HookFile(c, UserScope, ""); err == nil {
		dir := filepath.Dir(user)
		if c == OpenCode {
			dir = e.openCodeDir() // its plugin/ and plugins/
		}
		if within(file, dir) {
			return h.run // the user's own file, in a project that holds it
		}
	}
	return nil
}

// CheckWith is Check with the probes given.
func (e Env) CheckWith(ctx context.Context, project string, only []Client, p Probes) []Finding {
	probe := hookProbes{run: p.Hook, project: project, trust: p.Project}
	if probe.run == nil {
		probe.run = ShellProbe
	}
	if p.MCP == nil {
		p.MCP = ProbeMCPServer
	}
	if len(only) == 0 {
		only = Clients
	}
	dir := project
	if dir == "" {
		dir = e.Home
	}
	var out []Finding
	for _, c := range only {
		switch c {
		case ClaudeCode:
			files := []string{filepath.Join(e.Home, ".claude", "settings.json")}
			if project != "" {
				files = append(files, filepath.Join(project, ".claude", "settings.json"), filepath.Join(project, ".claude", "settings.local.json"))
			}
			hooks := e.checkHooks(ctx, c, files, []string{"PreToolUse", "PermissionRequest"}, filepath.Join(e.Home, ".claude"), dir, probe)
			out = append(out, hooks...)
			out = append(out, e.checkHookedMCP(ctx, c, project, dir, hooks, p)...)
		case Gemini:
			files := []string{filepath.Join(e.Home, ".gemini", "settings.json")}
			if project != "" {
				files = append(files, filepath.Join(project, ".gemini", "settings.json"))
			}
			hooks := e.checkHooks(ctx, c, files, []string{"BeforeTool"}, filepath.Join(e.Home, ".gemini"), dir, probe)
			if project != "" && len(files) == 2 && realPath(files[1]) != realPath(files[0]) {
				for i := range hooks {
					if hooks[i].File != files[1] || hooks[i].Status == NotProtected || hooks[i].Command == "" {
						continue
					}
					if trusted, why := e.geminiTrusts(project); !trusted {
						hooks[i].worsen(NotProtected, why, "trust the folder in Gemini CLI (it asks when it starts there, or /permissions), or: portcullis hook install gemini --user (a hook Gemini CLI runs in every folder)")
					} else {
						hooks[i].Why = append(hooks[i].Why, why)
					}
				}
			}
			out = append(out, hooks...)
			out = append(out, e.checkHookedMCP(ctx, c, project, dir, hooks, p)...)
		case Codex:
			out = append(out, e.checkHooks(ctx, c, []string{filepath.Join(e.CodexHome, "hooks.json")}, []string{"PreToolUse"}, e.CodexHome, dir, probe)...)
		case OpenCode:
			out = append(out, e.checkOpenCode(ctx, project, dir, probe)...)
		case ClaudeDesktop:
			if e.ConfigDir == "" {
				continue
			}
			out = append(out, e.checkMCP(ctx, c, []string{filepath.Join(e.ConfigDir, "Claude", "claude_desktop_config.json")}, "", dir, false, p)...)
		case Cursor:
			files := []string{filepath.Join(e.Home, ".cursor", "mcp.json")}
			if project != "" {
				files = append(files, filepath.Join(project, ".cursor", "mcp.json"))
			}
			hooks := []string{filepath.Join(e.Home, ".cursor", "hooks.json")}
			if project != "" {
				hooks = append(hooks, filepath.Join(project, ".cursor", "hooks.json"))
			}
			hf := e.checkCursorHooks(ctx, hooks, dir, probe)
			home := filepath.Join(e.Home, ".cursor")
			if len(hf) > 0 {
				home = "" // Cursor is configured: its hooks were checked
			} else if exists(home) {
				hf = append(hf, Finding{Client: c, File: hooks[0], Status: NotProtected,
					Why: []string{"no Cursor hooks file: Cursor's own tools (its terminal, file reads and edits) run without Portcullis; a wrapper decides only the calls of the MCP server behind it"},
					Fix: e.fixInit(c, "")})
			}
			// Cursor's beforeMCPExecution hook decides the calls of every
			// MCP server, wrapped or not.
			hooked := slices.ContainsFunc(hf, func(f Finding) bool { return f.Status == Protected && f.Command != "" })
			out = append(out, e.checkMCP(ctx, c, files, home, dir, hooked, p)...)
			out = append(out, hf...)
		case Copilot:
			out = append(out, e.checkCopilotHooks(ctx, project, dir, probe)...)
		}
	}
	return out
}

// settingsHooks are the hook groups of one event of a settings file.
type settingsHooks struct {
	Hooks map[string][]struct {
		Matcher *string `json:"matcher"`
		Hooks   []struct {
			Type    string `json:"type"`
			Command string `json:"command"`
			Timeout int    `json:"timeout"`
		} `json:"hooks"`
	} `json:"hooks"`
}

// checkHooks reports on a hook client: each file of files that exists,
// and the client as a whole when none holds a Portcullis hook although
// the client is installed (home exists).
func (e Env) checkHooks(ctx context.Context, c Client, files, events []string, home, dir string, probe hookProbes) []Finding {
	var out []Finding
	found := false
	var present []string
	for _, file := range unique(files) {
		data, err := os.ReadFile(file)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		present = append(present, file)
		if err != nil {
			out = append(out, Finding{Client: c, File: file, Status: NotProtected, Why: []string{err.Error()}, Fix: "make the file readable, then: portcullis doctor"})
			found = true
			continue
		}
		var s settingsHooks
		if err := json.Unmarshal(data, &s); err != nil {
			out = append(out, Finding{Client: c, File: file, Status: NotProtected, Why: []string{fmt.Sprintf("not valid settings: %v; the client may ignore the file", err)}, Fix: "fix the file by hand (a backup may be beside it, .bak)"})
			found = true
			continue
		}
		for _, ev := range events {
			for g, grp := range s.Hooks[ev] {
				for h, hk := range grp.Hooks {
					if !strings.Contains(hk.Command, " hook "+string(c)) {
						continue
					}
					found = true
					f := e.checkHookCommand(ctx, c, file, hk.Command, dir, probe.forFile(e, c, file))
					if grp.Matcher != nil && !slices.Contains([]string{"", "*", ".*"}, *grp.Matcher) {
						f.worsen(NotProtected, fmt.Sprintf("%s runs the hook only for tools matching %q: every other tool runs unchecked", ev, *grp.Matcher), e.fixInit(c, file))
					}
					if c == Codex {
						e.checkCodexTrust(&f, data, ev, g, h, grp.Matcher, hk.Command, hk.Timeout)
					}
					out = append(out, f)
				}
			}
		}
	}
	if !found && (len(present) > 0 || exists(home)) {
		where := home
		if len(present) > 0 {
			where = strings.Join(present, ", ")
		}
		out = append(out, Finding{Client: c, File: where, Status: NotProtected,
			Why: []string{fmt.Sprintf("%s is installed, and no Portcullis hook is in its settings: its tools run unchecked", c)},
			Fix: e.fixInit(c, "")})
	}
	return out
}

// fixInit is the command that installs Portcullis for client, in the
// scope of file.
func (e Env) fixInit(c Client, file string) string {
	user, err := e.SettingsFile(c, UserScope, "")
	if file == "" || err != nil || file == user || c == Codex || c == ClaudeDesktop {
		return "portcullis init " + string(c)
	}
	project := projectOf(file)
	switch c {
	case Copilot:
		project = filepath.Dir(project) // <project>/.github/hooks/<file>
	case OpenCode:
		if within(file, e.openCodeDir()) {
			return "portcullis init " + string(c)
		}
		project = filepath.Dir(project) // <project>/.opencode/plugin/portcullis.js
	}
	return fmt.Sprintf("portcullis init %s --project --dir %s", c, project)
}

// projectOf is the project directory of a project settings file
// (<project>/.claude/settings.json).
func projectOf(file string) string { return filepath.Dir(filepath.Dir(file)) }

// worsen lowers a finding to s (if it is worse than what it has), adding
// why and, when there is none yet, the fix.
func (f *Finding) worsen(s Status, why, fix string) {
	rank := map[Status]int{Protected: 0, Refusing: 1, NotProtected: 2}
	if rank[s] > rank[f.Status] || f.Fix == "" {
		f.Fix = fix
	}
	if rank[s] > rank[f.Status] {
		f.Status = s
	}
	f.Why = append(f.Why, why)
}

// checkHookCommand checks a hook command: the binary it runs, the policy
// it names, and what it answers to a probe (when probe is not nil).
func (e Env) checkHookCommand(ctx context.Context, c Client, file, command, dir string, probe Probe) Finding {
	f := Finding{Client: c, File: file, Status: Protected, Command: command}
	fix := e.fixInit(c, file)
	words, err := splitCommand(command)
	if err == nil && len(words) > 0 {
		f.DefaultPolicy = !slices.Contains(words, "--policy")
		e.checkBinaryAndPolicy(&f, words[0], words, fix)
	}
	if f.Status == NotProtected && f.binaryMissing() {
		return f // nothing to probe
	}
	if probe == nil {
		f.Why = append(f.Why, "not run: the project's own file names the command (doctor --trust-project runs it as "+string(c)+" would)")
		return f
	}
	stdout, stderr, exit, err := probe(ctx, command, dir, probeEvent(c, dir))
	msg := strings.TrimSpace(string(stderr))
	if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
		msg = msg[i+1:]
	}
	switch {
	case err != nil:
		f.worsen(NotProtected, fmt.Sprintf("the probe could not run the command: %v", err), fix)
	case exit == 2 || (exit > 0 && c == OpenCode):
		// Portcullis's opencode plugin blocks the call on any failure.
		f.worsen(Refusing, fmt.Sprintf("the hook refused the probe (exit status %d): %s", exit, msg), fix)
	case exit != 0:
		f.worsen(NotProtected, fmt.Sprintf("the hook failed with exit status %d, which %s takes as a non-blocking error and runs the call: %s", exit, c, msg), fix)
	default:
		answer, err := probeAnswer(c, stdout)
		if err != nil {
			f.worsen(NotProtected, fmt.Sprintf("the hook's answer to the probe is not one %s accepts (%v): %q", c, err, strings.TrimSpace(string(stdout))), fix)
		} else {
			f.Why = append(f.Why, "a probe (the shell command `true`) was answered: "+answer)
		}
	}
	return f
}

func (f *Finding) binaryMissing() bool {
	for _, w := range f.Why {
		if strings.HasPrefix(w, "the binary ") && strings.Contains(w, "does not exist") {
			return true
		}
	}
	return false
}

// checkBinaryAndPolicy checks the binary a command runs and the policy
// file it names.
func (e Env) checkBinaryAndPolicy(f *Finding, exe string, words []string, fix string) {
	path := exe
	if !strings.ContainsRune(exe, '/') {
		found, err := exec.LookPath(exe)
		if err != nil {
			f.worsen(NotProtected, fmt.Sprintf("the binary %s does not exist in $PATH: the command fails and the client runs the call", exe), "install the binary (go install ./cmd/portcullis), then: "+fix)
			return
		}
		path = found
	}
	if err := e.CheckBinary(path); err != nil {
		switch {
		case errors.Is(err, ErrTransient):
			f.worsen(NotProtected, err.Error(), "go install ./cmd/portcullis, then: "+fix+" (with the installed portcullis)")
		case errors.Is(err, os.ErrNotExist):
			f.worsen(NotProtected, fmt.Sprintf("the binary %s does not exist: the command fails and the client runs the call", path), "go install ./cmd/portcullis, then: "+fix+" (with the installed portcullis)")
		default:
			f.worsen(NotProtected, err.Error(), fix)
		}
	}
	for i, w := range words {
		if w == "--policy" && i+1 < len(words) {
			p := words[i+1]
			if _, err := os.Stat(p); err != nil {
				f.worsen(Refusing, fmt.Sprintf("the policy file %s no longer exists: every call is refused", p), fix+" (writes a starter policy), or point --policy at your policy")
			}
		}
	}
}

// probeAnswer reads a hook's answer to the probe as the client would, and
// says what it decided.
func probeAnswer(c Client, stdout []byte) (string, error) {
	var out struct {
		Decision           string  `json:"decision"`
		Permission         *string `json:"permission"`
		PermissionDecision *string `json:"permissionDecision"`
		HookSpecificOutput *struct {
			PermissionDecision string `json:"permissionDecision"`
		} `json:"hookSpecificOutput"`
	}
	dec := json.NewDecoder(bytes.NewReader(stdout))
	if err := dec.Decode(&out); err != nil {
		return "", fmt.Errorf("not a JSON object: %w", err)
	}
	switch c {
	case Cursor, Copilot:
		d := out.Permission
		if c == Copilot {
			d = out.PermissionDecision
		}
		if d == nil || !slices.Contains([]string{"allow", "deny", "ask"}, *d) {
			return "", errors.New("no permission decision")
		}
		return *d, nil
	case Gemini, OpenCode:
		if out.Decision != "allow" && out.Decision != "deny" {
			return "", fmt.Errorf("decision %q", out.Decision)
		}
		return out.Decision, nil
	case Codex:
		if out.HookSpecificOutput == nil {
			return "allow (no decision: Codex's own approval policy applies)", nil
		}
		if d := out.HookSpecificOutput.PermissionDecision; d != "deny" {
			return "", fmt.Errorf("permissionDecision %q", d)
		}
		return "deny", nil
	}
	if out.HookSpecificOutput == nil {
		return "", errors.New("no hookSpecificOutput")
	}
	d := out.HookSpecificOutput.PermissionDecision
	if !slices.Contains([]string{"allow", "deny", "ask"}, d) {
		return "", fmt.Errorf("permissionDecision %q", d)
	}
	return d, nil
}

// checkCodexTrust flags a Codex hook that config.toml does not trust:
// Codex skips such a hook without a word.
func (e Env) checkCodexTrust(f *Finding, hooksJSON []byte, event string, group, handler int, matcher *string, command string, timeout int) {
	label := ""
	for _, ev := range codexEvents {
		if ev.name == event {
			label = ev.label
		}
	}
	hooksPath := filepath.Join(e.CodexHome, "hooks.json")
	key := fmt.Sprintf("%s:%s:%d:%d", hooksPath, label, group, handler)
	if timeout == 0 {
		timeout = 600 // Codex's default
	}
	hash, err := codexHookHash(label, matcher, command, timeout)
	if err != nil {
		f.worsen(NotProtected, err.Error(), "portcullis init codex")
		return
	}
	configPath := filepath.Join(e.CodexHome, "config.toml")
	data, err := os.ReadFile(configPath)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		f.worsen(NotProtected, err.Error(), "portcullis init codex")
		return
	}
	var c struct {
		Hooks struct {
			State map[string]struct {
				TrustedHash string `toml:"trusted_hash"`
				Enabled     *bool  `toml:"enabled"`
			} `toml:"state"`
		} `toml:"hooks"`
	}
	if _, err := toml.Decode(string(data), &c); err != nil {
		f.worsen(NotProtected, fmt.Sprintf("%s does not parse (%v): Codex trusts no hook", configPath, err), "fix config.toml, then: portcullis init codex")
		return
	}
	st, ok := c.Hooks.State[key]
	switch {
	case !ok || st.TrustedHash == "":
		f.worsen(NotProtected, fmt.Sprintf("Codex does not trust the hook (no trusted_hash for %s in %s): codex skips it without a word and every call runs unchecked", key, configPath), "portcullis init codex (or portcullis hook install codex) trusts it")
	case st.TrustedHash != hash:
		f.worsen(NotProtected, fmt.Sprintf("the hook changed since it was trusted (%s has trusted_hash %s; the hook's is %s): Codex skips it", configPath, st.TrustedHash, hash), "portcullis init codex (or portcullis hook install codex) trusts it again")
	case st.Enabled != nil && !*st.Enabled:
		f.worsen(NotProtected, fmt.Sprintf("%s turns the hook off (enabled = false)", configPath), "remove enabled = false from its [hooks.state] table")
	default:
		f.Why = append(f.Why, "Codex trusts the hook ("+configPath+")")
	}
}

// unique returns the files without repeats (a project that is the home
// directory has the user's files as its own).
func unique(files []string) []string {
	var out []string
	for _, f := range files {
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}
