package hook

import (
	"path/filepath"
	"strings"

	"github.com/portcullis/portcullis"
)

// OpenCode is opencode's tool hook, as Portcullis's opencode plugin sends
// it. opencode (github.com/anomalyco/opencode) blocks a tool call through
// a plugin: a module in a plugin directory whose "tool.execute.before"
// hook throws, the error's message going to the model as the tool's
// result. opencode calls that hook with {tool, sessionID, callID} and
// {args}; the plugin `portcullis hook install opencode` writes runs this
// hook with one event on stdin:
//
//	{"hook_event_name": "tool.execute.before", "session_id": "...",
//	 "tool_use_id": "...", "tool_name": "bash", "tool_input": {...}, "cwd": "..."}
//
// and answers, on exit 0,
//
//	{"decision": "allow"}   or   {"decision": "deny", "reason": "..."}
//
// The plugin lets the call run only on exit 0 with "decision": "allow";
// anything else — a deny, another exit status, an answer it cannot read,
// a binary that does not start, a hook that does not answer in time — it
// throws, with the reason when there is one.
//
// A plugin cannot ask in opencode's own prompt, so a decision that needs a
// person is a deny naming the pending approval, unless the call is held
// (--hold). A stop is a deny whose reason says why.
//
// Built-in tools: bash (command, workdir) is a shell command; write, edit
// and multiedit (filePath) write; apply_patch (patchText) writes each file
// of its patch; read (filePath) reads; glob, grep and list (path) read. An
// MCP tool (<server>_<tool>, which cannot be split reliably) and every
// other tool are decided under their own names.
type OpenCode struct{}

// Name implements Host.
func (OpenCode) Name() string { return "opencode" }

// OpenCodeEvent is the hook_event_name of the events the opencode plugin
// sends.
const OpenCodeEvent = "tool.execute.before"

var openCodeEvents = map[string]bool{OpenCodeEvent: true}

func (OpenCode) parse(data []byte) (*Event, error) {
	// opencode does not say whether a person is watching: nobody is
	// assumed, the stricter reading for the validator.
	return parseBase(data, openCodeEvents)
}

func (OpenCode) actions(ev *Event) ([]action, error) {
	switch ev.ToolName {
	case "bash":
		a, err := shellAction(ev, "command")
		if wd, ok := ev.ToolInput["workdir"].(string); ok && wd != "" && err == nil {
			// The command runs in its workdir, which the agent chose: it
			// is decided as a cd there first, so that its relative paths
			// are not read against the session's directory.
			a.command = "cd " + shellQuote(wd) + " && " + a.command
		}
		return []action{a}, err
	case "write", "edit", "multiedit":
		return []action{fileAction(kindWrite, ev, "filePath")}, nil
	case "apply_patch":
		patch, ok := ev.ToolInput["patchText"].(string)
		if !ok {
			return []action{otherAction(ev)}, nil
		}
		files := PatchFiles(patch)
		if len(files) == 0 {
			return []action{otherAction(ev)}, nil
		}
		acts := make([]action, len(files))
		for i, f := range files {
			p := filepath.Clean(absPath(ev.Cwd, f))
			acts[i] = action{kind: kindWrite, hostTool: ev.ToolName, pathKey: "path", path: p,
				args: map[string]any{"path": p, "patch": patch}}
		}
		return acts, nil
	case "read":
		return []action{fileAction(kindRead, ev, "filePath")}, nil
	case "glob", "grep", "list":
		return []action{fileAction(kindRead, ev, "path")}, nil
	}
	return []action{otherAction(ev)}, nil
}

func (OpenCode) confirm(_ *Event, d *portcullis.Decision, tool string) Verdict {
	return Verdict{Behavior: Deny, Reason: pendingReason(d, tool)}
}

// shellQuote quotes s as one word for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// openCodeOutput is the answer the plugin reads.
type openCodeOutput struct {
	Decision string `json:"decision"`
	Reason   string `json:"reason,omitempty"`
}

func (OpenCode) answer(_ *Event, v Verdict) any {
	if v.Behavior == Allow {
		return openCodeOutput{Decision: "allow"}
	}
	return openCodeOutput{Decision: "deny", Reason: v.Reason}
}

// opencode keeps its sessions in its own database, not in a transcript
// file: the event names none, and none is read.
func (OpenCode) transcript() TranscriptFormat { return TranscriptJSONLines }

// configFiles are opencode's plugin directories (a plugin there runs
// beside Portcullis's, and could change a call's arguments after it was
// decided) and its configuration files, for the user (under
// ~/.config/opencode) and the project.
func (OpenCode) configFiles(home, project string) []string {
	var user string
	if home != "" {
		user = filepath.Join(home, ".config", "opencode")
	}
	out := joinEach([]string{user}, "plugin", "plugins", "opencode.json", "opencode.jsonc")
	return append(out, joinEach([]string{project}, ".opencode", "opencode.json", "opencode.jsonc")...)
}
