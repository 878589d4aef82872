package hostconfig

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// HookInstall is what `portcullis hook install` is asked for: one
// client's hook, for the user or a project, running one binary under one
// policy. Env.HookFor turns it into the Hook that InstallHook (the one
// install path, which `portcullis init` takes too) merges in.
type HookInstall struct {
	Client Client
	// Project and User choose the settings (neither: the client's
	// default, the project's except for Copilot CLI, whose hooks in a
	// project run only in a folder the user trusts, and Codex, which is
	// installed for the user only).
	Project, User bool
	// Dir is the project directory (default: the working directory).
	Dir string
	// Binary is the portcullis binary the hook runs (see Env.Binary).
	Binary string
	// Policy is the policy file the hook decides under; it must exist.
	Policy string
	// State is the hook's state directory (default: the hook's own).
	State string
	// Hold holds calls that need a person for an out-of-band approval.
	Hold bool
	// DeferMCP names Claude Code's MCP servers whose calls the hook
	// leaves to the `portcullis mcp` wrapper they run behind.
	DeferMCP []string
}

// Check says why the request cannot be installed as asked, before any
// file is read: a client without a hook, conflicting scopes, options
// that do not apply to the client.
func (i HookInstall) Check() error {
	if !i.Client.HookInstallable() {
		return fmt.Errorf("hook install supports claude-code, codex, gemini, cursor, copilot and opencode (Claude Desktop runs MCP servers: portcullis init %s)", i.Client)
	}
	if i.Project && i.User {
		return errors.New("--project and --user: choose one")
	}
	if i.Client != ClaudeCode && len(i.DeferMCP) > 0 {
		return errors.New("--defer-mcp reads Claude Code's MCP configuration: it is for claude-code")
	}
	if i.Client == Codex && (i.Project || i.Dir != "") {
		return errors.New("hook install codex installs for the user (in $CODEX_HOME, default ~/.codex), where Codex records which hooks the user trusts: --project and --dir do not apply")
	}
	return nil
}

// Hook is the hook to install for the request (which Check accepted):
// the policy, the project and the state directory made absolute, the
// command with --defer-mcp and --hold.
func (i HookInstall) Hook() (Hook, error) {
	path, err := filepath.Abs(i.Policy)
	if err != nil {
		return Hook{}, err
	}
	if _, err := os.Stat(path); err != nil {
		return Hook{}, fmt.Errorf("--policy: %w", err)
	}
	h := Hook{Client: i.Client, Hold: i.Hold}
	user := i.User
	if i.Client == Copilot && !i.Project && i.Dir == "" {
		// Copilot runs a repository's hooks only in a folder the user
		// trusts: the user's hooks run everywhere.
		user = true
	}
	if i.Client != Codex && !user {
		h.Scope = ProjectScope
		dir := i.Dir
		if dir == "" {
			dir = "."
		}
		if h.Project, err = filepath.Abs(dir); err != nil {
			return Hook{}, err
		}
	}
	state := i.State
	if state != "" {
		if state, err = filepath.Abs(state); err != nil {
			return Hook{}, err
		}
	}
	h.Command = HookCommand(i.Binary, i.Client, path, state, false)
	for _, s := range i.DeferMCP {
		h.Command = append(h.Command, "--defer-mcp", s)
	}
	if i.Hold {
		h.Command = append(h.Command, "--hold")
	}
	return h, nil
}

// Binary is the portcullis binary a client is told to run: exe (this
// process's own binary when empty) made absolute, free of symbolic
// links, and refused by CheckBinary when it will not last.
func (e Env) Binary(exe string) (string, error) {
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return "", fmt.Errorf("find this binary: %w", err)
		}
	}
	exe, err := filepath.Abs(exe)
	if err != nil {
		return "", err
	}
	if resolved, err := filepath.EvalSymlinks(exe); err == nil {
		exe = resolved
	}
	if err := e.CheckBinary(exe); err != nil {
		return "", err
	}
	return exe, nil
}

// WriteHookInstalled says what InstallHook did for client, as `portcullis
// hook install` says it: the file, the events hooked and the command, or
// that it was already installed, then the notes.
func WriteHookInstalled(w io.Writer, client Client, res Installed) {
	switch {
	case !res.Changed && client == OpenCode:
		fmt.Fprintf(w, "%s: the Portcullis plugin is already installed\n", res.Files[0])
	case client == OpenCode:
		fmt.Fprintf(w, "%s: plugin installed: every tool call runs, and is blocked unless it allows it:\n  %s\n", res.Files[0], res.Command)
	case !res.Changed && client == Codex:
		fmt.Fprintf(w, "%s: the Portcullis hooks are already installed and trusted\n", res.Files[0])
	case !res.Changed:
		fmt.Fprintf(w, "%s: the Portcullis hook is already installed\n", res.Files[0])
	case client == Codex:
		fmt.Fprintf(w, "%s: PreToolUse and PermissionRequest hooks installed for every tool:\n  %s\n", res.Files[0], res.Command)
		fmt.Fprintf(w, "%s: trusted (Codex runs them without a review; a changed hook needs this command again)\n", res.Files[1])
	case client == Cursor:
		fmt.Fprintf(w, "%s: beforeShellExecution, beforeMCPExecution, beforeReadFile and preToolUse (%s) hooks installed, fail-closed:\n  %s\n", res.Files[0], CursorWriteMatcher, res.Command)
	default:
		event := map[Client]string{ClaudeCode: "PreToolUse", Gemini: "BeforeTool", Copilot: "preToolUse"}[client]
		fmt.Fprintf(w, "%s: %s hook installed for every tool:\n  %s\n", res.Files[0], event, res.Command)
	}
	for _, n := range res.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
}

// InstallHookFor installs the hook i asks for (which Check accepted):
// the binary checked (Binary), the hook built (HookInstall.Hook), merged
// in by InstallHook.
func (e Env) InstallHookFor(i HookInstall) (Installed, error) {
	var err error
	if i.Binary, err = e.Binary(i.Binary); err != nil {
		return Installed{}, err
	}
	h, err := i.Hook()
	if err != nil {
		return Installed{}, err
	}
	return e.InstallHook(h)
}
