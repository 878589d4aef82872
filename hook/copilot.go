package hook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/portcullis/portcullis"
)

// Copilot is GitHub Copilot CLI's preToolUse hook (the Copilot CLI hooks
// reference at docs.github.com; hook files are .github/hooks/*.json of a
// repository and $COPILOT_HOME/hooks/*.json of the user, version 1, each
// hook {"type": "command", "bash": "...", "timeoutSec": N}). Copilot CLI
// 1.0 sends, for every tool call,
//
//	{"sessionId": "...", "timestamp": 1795895078779, "cwd": "/abs",
//	 "toolName": "bash", "toolArgs": {"command": "...", "description": "..."}}
//
// (toolArgs is an object; older versions sent the JSON text of one, and
// apply_patch's is the patch itself), and reads on exit 0
//
//	{"permissionDecision": "allow|deny|ask", "permissionDecisionReason": "..."}
//
// The reason of a deny reaches the model as the tool's result ("Denied by
// preToolUse hook: ..."). A decision that needs a person is "ask":
// Copilot's own prompt, or, with nobody to answer it (copilot -p), a deny.
// Exit status 2 blocks the call; a failure here is a deny on stdout with
// exit status 2.
//
// Built-in tools: bash and powershell (command) run a shell command;
// create, edit, str_replace and write (path) write; apply_patch writes
// each file of its patch; view (path), glob, grep and rg read. MCP tools
// and everything else are decided under their own names.
type Copilot struct{}

// Name implements Host.
func (Copilot) Name() string { return "copilot" }

// copilotEvent is the JSON Copilot CLI sends.
type copilotEvent struct {
	SessionID *string         `json:"sessionId"`
	Cwd       *string         `json:"cwd"`
	ToolName  *string         `json:"toolName"`
	ToolArgs  json.RawMessage `json:"toolArgs"`
}

// CopilotEvent is the hook event Portcullis answers; the other Copilot
// CLI events cannot block a tool call.
const CopilotEvent = "preToolUse"

func (Copilot) parse(data []byte) (*Event, error) {
	var c copilotEvent
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&c); err != nil {
		return nil, describe(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("unexpected data after the event object")
	}
	// Copilot's preToolUse names no event: the toolName tells it apart
	// from the others (a postToolUse also has toolResult, which is not
	// read, and is answered like a preToolUse: its answer is ignored).
	ev := &Event{Name: CopilotEvent}
	if c.ToolName == nil || *c.ToolName == "" {
		return nil, errors.New(`missing "toolName" (is this a preToolUse event?)`)
	}
	ev.ToolName = *c.ToolName
	if len(ev.ToolName) > 500 {
		return ev, fmt.Errorf("tool name is %d characters, more than the limit of 500", len(ev.ToolName))
	}
	if c.SessionID != nil {
		ev.SessionID = *c.SessionID
	}
	if c.Cwd != nil {
		ev.Cwd = *c.Cwd
	}
	if ev.Cwd != "" && !filepath.IsAbs(ev.Cwd) {
		return ev, fmt.Errorf(`"cwd" %q is not an absolute path`, ev.Cwd)
	}
	if len(c.ToolArgs) == 0 || string(c.ToolArgs) == "null" {
		// A tool without arguments.
		ev.ToolInput = map[string]any{}
		return ev, nil
	}
	in, err := objectOrJSONText(c.ToolArgs)
	if err != nil {
		var text string
		if json.Unmarshal(c.ToolArgs, &text) != nil || ev.ToolName != "apply_patch" {
			return ev, errors.New(`"toolArgs" is not an object`)
		}
		// apply_patch is a freeform tool: its argument is the patch.
		in = map[string]any{"patch": text}
	}
	ev.ToolInput = in
	return ev, nil
}

func (Copilot) actions(ev *Event) ([]action, error) {
	switch ev.ToolName {
	case "bash", "powershell":
		a, err := shellAction(ev, "command")
		return []action{a}, err
	case "create", "edit", "str_replace", "write", "str_replace_editor":
		return []action{fileAction(kindWrite, ev, firstKey(ev.ToolInput, "path", "file_path"))}, nil
	case "view", "read":
		return []action{fileAction(kindRead, ev, firstKey(ev.ToolInput, "path", "file_path"))}, nil
	case "glob", "grep", "rg", "search":
		return []action{fileAction(kindRead, ev, firstKey(ev.ToolInput, "path", "paths"))}, nil
	case "apply_patch":
		patch, ok := ev.ToolInput["patch"].(string)
		if !ok {
			patch, ok = ev.ToolInput["input"].(string)
		}
		if !ok {
			return nil, errors.New("apply_patch: toolArgs holds no patch")
		}
		files := PatchFiles(patch)
		if len(files) == 0 {
			return []action{otherAction(ev)}, nil
		}
		acts := make([]action, len(files))
		for i, f := range files {
			p := absPath(ev.Cwd, f)
			acts[i] = action{kind: kindWrite, hostTool: ev.ToolName, pathKey: "path", path: p,
				args: map[string]any{"path": p, "patch": patch}}
		}
		return acts, nil
	}
	if a, ok := mcpAction(ev); ok {
		return []action{a}, nil
	}
	return []action{otherAction(ev)}, nil
}

func (Copilot) confirm(_ *Event, d *portcullis.Decision, _ string) Verdict {
	return Verdict{Behavior: Ask, Reason: askReason(d)}
}

// copilotOutput is Copilot CLI's preToolUse answer.
type copilotOutput struct {
	PermissionDecision       string `json:"permissionDecision"`
	PermissionDecisionReason string `json:"permissionDecisionReason,omitempty"`
}

func (Copilot) answer(_ *Event, v Verdict) any {
	out := copilotOutput{PermissionDecision: v.Behavior.String()}
	if v.Behavior != Allow {
		out.PermissionDecisionReason = v.Reason
	}
	return out
}

func (Copilot) transcript() TranscriptFormat { return TranscriptJSONLines }

func (Copilot) configFiles(home, project string) []string {
	out := joinEach([]string{home}, ".copilot/hooks", ".copilot/config.json", ".copilot/settings.json")
	return append(out, joinEach([]string{project}, ".github/hooks")...)
}
