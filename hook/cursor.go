package hook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/portcullis/portcullis"
)

// Cursor is Cursor's agent hooks (.cursor/hooks.json, version 1; the
// hooks reference at cursor.com/docs/hooks). Four of its hooks can block a
// call before it runs, and Portcullis answers each:
//
//	beforeShellExecution  command, cwd: a shell command
//	beforeMCPExecution    tool_name, tool_input (an object, or the JSON
//	                      text of one), and url or command naming the server
//	beforeReadFile        file_path, content, attachments: a file read
//	preToolUse            tool_name, tool_input, tool_use_id: any tool
//	                      (Shell, Read, Write, Edit, StrReplace, Delete,
//	                      Grep, Glob, MCP:<server>:<tool>, ...)
//
// Every event carries conversation_id, generation_id, hook_event_name and
// workspace_roots. The answer on exit 0 is
//
//	{"permission": "allow|deny|ask", "user_message": "...", "agent_message": "..."}
//
// and beforeReadFile takes only "permission" (allow or deny). Exit status
// 2 blocks the call whatever the output says; any other failure lets the
// call run unless the hook is marked "failClosed": true, which hook
// install writes. So a failure here is a deny on stdout with exit status
// 2, like every other host's.
//
// A decision that needs a person is "ask" (Cursor shows its own prompt,
// with the reason), except on beforeReadFile, which cannot ask: there it
// is a deny naming the pending approval, unless the call is held. A stop
// (danger zone, retry loop) is a deny that also says "continue": false.
// The content of a file read is never passed on to the gate or its audit
// log.
type Cursor struct{}

// Name implements Host.
func (Cursor) Name() string { return "cursor" }

// CursorEvents are the Cursor hooks that can block a call, which the
// adapter answers.
var CursorEvents = []string{"beforeShellExecution", "beforeMCPExecution", "beforeReadFile", "preToolUse"}

// cursorEvent is the JSON Cursor sends.
type cursorEvent struct {
	HookEventName  *string         `json:"hook_event_name"`
	ConversationID string          `json:"conversation_id"`
	GenerationID   string          `json:"generation_id"`
	WorkspaceRoots []string        `json:"workspace_roots"`
	Cwd            string          `json:"cwd"`
	Command        *string         `json:"command"`
	ToolName       string          `json:"tool_name"`
	ToolInput      json.RawMessage `json:"tool_input"`
	ToolUseID      string          `json:"tool_use_id"`
	FilePath       *string         `json:"file_path"`
	URL            string          `json:"url"`
}

func (Cursor) parse(data []byte) (*Event, error) {
	var c cursorEvent
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&c); err != nil {
		return nil, describe(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("unexpected data after the event object")
	}
	if c.HookEventName == nil {
		return nil, errors.New(`missing "hook_event_name"`)
	}
	ev := &Event{Name: *c.HookEventName, SessionID: c.ConversationID, ToolUseID: c.ToolUseID}
	known := false
	for _, e := range CursorEvents {
		known = known || e == ev.Name
	}
	if !known {
		return ev, fmt.Errorf("unsupported hook event %q (want %s)", ev.Name, strings.Join(CursorEvents, ", "))
	}
	// The shell's working directory, else the workspace's (Cursor sends an
	// empty cwd at times).
	ev.Cwd = c.Cwd
	if ev.Cwd == "" && len(c.WorkspaceRoots) > 0 {
		ev.Cwd = c.WorkspaceRoots[0]
	}
	if ev.Cwd != "" && !filepath.IsAbs(ev.Cwd) {
		return ev, fmt.Errorf(`"cwd" %q is not an absolute path`, ev.Cwd)
	}
	switch ev.Name {
	case "beforeShellExecution":
		if c.Command == nil {
			return ev, errors.New(`missing "command"`)
		}
		ev.ToolName = cursorShell
		ev.ToolInput = map[string]any{"command": *c.Command}
	case "beforeReadFile":
		if c.FilePath == nil || *c.FilePath == "" {
			return ev, errors.New(`missing "file_path"`)
		}
		ev.ToolName = "Read"
		ev.ToolInput = map[string]any{"file_path": *c.FilePath}
	default: // beforeMCPExecution, preToolUse
		if c.ToolName == "" {
			return ev, errors.New(`missing "tool_name"`)
		}
		if len(c.ToolName) > 500 {
			return ev, fmt.Errorf("tool name is %d characters, more than the limit of 500", len(c.ToolName))
		}
		ev.ToolName = c.ToolName
		in, err := objectOrJSONText(c.ToolInput)
		if err != nil {
			return ev, err
		}
		ev.ToolInput = in
		if ev.Name == "beforeMCPExecution" {
			ev.MCPServer, ev.MCPTool = cursorMCPName(c.ToolName)
			if ev.MCPTool == "" {
				ev.MCPTool = c.ToolName
			}
		}
	}
	return ev, nil
}

// cursorShell is the tool name a beforeShellExecution event is decided
// under when the policy names it (preToolUse calls the shell Shell too).
const cursorShell = "Shell"

// objectOrJSONText reads a tool input that is a JSON object or a string
// holding one (Cursor's beforeMCPExecution sends either, by version).
func objectOrJSONText(raw json.RawMessage) (map[string]any, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, errors.New(`missing "tool_input"`)
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		raw = json.RawMessage(text)
	}
	var out map[string]any
	in := json.NewDecoder(bytes.NewReader(raw))
	in.UseNumber()
	if err := in.Decode(&out); err != nil || out == nil {
		return nil, errors.New(`"tool_input" is not an object`)
	}
	if _, err := in.Token(); err != io.EOF {
		return nil, errors.New(`"tool_input" is not an object`)
	}
	return out, nil
}

// cursorMCPName splits Cursor's name of an MCP tool, MCP:<server>:<tool>
// (or Claude Code's mcp__<server>__<tool>); server is "" for a bare tool
// name.
func cursorMCPName(name string) (server, tool string) {
	if rest, ok := strings.CutPrefix(name, "MCP:"); ok {
		if s, t, ok := strings.Cut(rest, ":"); ok && s != "" && t != "" {
			return s, t
		}
		return "", rest
	}
	if rest, ok := strings.CutPrefix(name, "mcp__"); ok {
		if s, t, ok := strings.Cut(rest, "__"); ok && s != "" && t != "" {
			return s, t
		}
	}
	return "", ""
}

func (Cursor) actions(ev *Event) ([]action, error) {
	switch ev.Name {
	case "beforeShellExecution":
		a, err := shellAction(ev, "command")
		return []action{a}, err
	case "beforeReadFile":
		return []action{fileAction(kindRead, ev, "file_path")}, nil
	case "beforeMCPExecution":
		return []action{cursorMCPAction(ev, ev.MCPServer, ev.MCPTool)}, nil
	}
	// preToolUse: Cursor's own tools.
	switch ev.ToolName {
	case cursorShell:
		a, err := shellAction(ev, "command")
		return []action{a}, err
	case "Write", "Edit", "StrReplace", "MultiEdit", "Delete", "EditNotebook":
		return []action{fileAction(kindWrite, ev, firstKey(ev.ToolInput, "file_path", "path", "target_file", "target_notebook"))}, nil
	case "Read":
		return []action{fileAction(kindRead, ev, firstKey(ev.ToolInput, "file_path", "path", "target_file"))}, nil
	case "Grep", "Glob", "LS", "SemanticSearch":
		return []action{fileAction(kindRead, ev, firstKey(ev.ToolInput, "path", "target_directory"))}, nil
	}
	if server, tool := cursorMCPName(ev.ToolName); server != "" {
		return []action{cursorMCPAction(ev, server, tool)}, nil
	}
	return []action{otherAction(ev)}, nil
}

// cursorMCPAction is a call of an MCP tool; one whose server Cursor did
// not name is decided under the tool's own name.
func cursorMCPAction(ev *Event, server, tool string) action {
	if server == "" {
		return action{kind: kindOther, hostTool: tool, args: ev.ToolInput}
	}
	return action{kind: kindMCP, hostTool: ev.ToolName, args: ev.ToolInput, server: server, tool: tool}
}

func (Cursor) confirm(ev *Event, d *portcullis.Decision, tool string) Verdict {
	if ev.Name == "beforeReadFile" {
		return Verdict{Behavior: Deny, Reason: pendingReason(d, tool)}
	}
	return Verdict{Behavior: Ask, Reason: askReason(d)}
}

// cursorOutput is Cursor's answer to a hook that can block.
type cursorOutput struct {
	Permission   string `json:"permission"`
	UserMessage  string `json:"user_message,omitempty"`
	AgentMessage string `json:"agent_message,omitempty"`
	Continue     *bool  `json:"continue,omitempty"`
}

func (Cursor) answer(ev *Event, v Verdict) any {
	if ev != nil && ev.Name == "beforeReadFile" {
		if v.Behavior == Allow {
			return cursorOutput{Permission: "allow"}
		}
		return cursorOutput{Permission: "deny"}
	}
	out := cursorOutput{Permission: v.Behavior.String()}
	if v.Behavior != Allow {
		out.UserMessage, out.AgentMessage = v.Reason, v.Reason
	}
	if v.Stop {
		f := false
		out.Continue = &f
	}
	return out
}

func (Cursor) transcript() TranscriptFormat { return TranscriptJSONLines }

func (Cursor) configFiles(home, project string) []string {
	return joinEach([]string{home, project}, ".cursor/hooks.json", ".cursor/mcp.json")
}
