package hook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"sort"
	"strings"

	"github.com/portcullis/portcullis"
)

// Host is one AI coding host's hook format: how its event is read, how
// its tools map onto Portcullis's kinds of action, and how an answer is
// written. The hosts are ClaudeCode, Codex, Gemini, Cursor, Copilot and
// OpenCode.
type Host interface {
	// Name is the host's name on the command line and the default agent
	// identity: claude-code, codex, gemini, cursor, copilot or opencode.
	Name() string

	parse(data []byte) (*Event, error)
	actions(ev *Event) ([]action, error)
	// confirm answers a decision that needs a person when the call is not
	// held: ask in the host's prompt where the host can, otherwise deny.
	confirm(ev *Event, d *portcullis.Decision, tool string) Verdict
	// answer is the host's JSON for a verdict; ev is nil when the input
	// could not be read.
	answer(ev *Event, v Verdict) any
	transcript() TranscriptFormat
	// configFiles are the host's settings files that hold its hooks.
	configFiles(home, project string) []string
}

// ConfigFiles returns the settings files in which host keeps its hooks,
// for the user (under home) and for the project. An agent that could edit
// them could remove Portcullis's hook: the hook's gate protects them like
// Portcullis's own files.
func ConfigFiles(host Host, home, project string) []string {
	return host.configFiles(home, project)
}

func joinEach(dirs []string, rel ...string) []string {
	var out []string
	for _, d := range dirs {
		if d == "" {
			continue
		}
		for _, r := range rel {
			out = append(out, filepath.Join(d, r))
		}
	}
	return out
}

// Hosts lists the supported hosts.
var Hosts = []Host{ClaudeCode{}, Codex{}, Gemini{}, Cursor{}, Copilot{}, OpenCode{}}

// HostNamed returns the host of that name.
func HostNamed(name string) (Host, bool) {
	for _, h := range Hosts {
		if h.Name() == name {
			return h, true
		}
	}
	return nil, false
}

// HostNames lists the hosts' names, for messages.
func HostNames() string {
	names := make([]string, len(Hosts))
	for i, h := range Hosts {
		names[i] = h.Name()
	}
	return strings.Join(names, ", ")
}

// Event is a host's tool-use event, in the hosts' common vocabulary.
type Event struct {
	// Name is hook_event_name as the host sent it.
	Name string
	// Permission is true for a PermissionRequest (the host is about to
	// show its own permission prompt), false for a PreToolUse or
	// BeforeTool (every tool call).
	Permission     bool
	SessionID      string
	TranscriptPath string
	Cwd            string
	PermissionMode string
	ToolName       string
	ToolUseID      string
	ToolInput      map[string]any
	// MCPServer and MCPTool name an MCP tool when the host says so apart
	// from the tool name (Gemini's mcp_context).
	MCPServer, MCPTool string
	// UserPresent says whether a person is at the host's prompt.
	UserPresent bool
}

// baseEvent is the JSON every host sends, in snake case.
type baseEvent struct {
	SessionID      *string         `json:"session_id"`
	TranscriptPath *string         `json:"transcript_path"`
	Cwd            *string         `json:"cwd"`
	PermissionMode *string         `json:"permission_mode"`
	HookEventName  *string         `json:"hook_event_name"`
	ToolName       *string         `json:"tool_name"`
	ToolInput      json.RawMessage `json:"tool_input"`
	ToolUseID      *string         `json:"tool_use_id"`
	MCPContext     *struct {
		ServerName string `json:"server_name"`
		ToolName   string `json:"tool_name"`
	} `json:"mcp_context"`
}

// parseBase reads the fields the hosts share. Hosts add fields over time,
// so unknown ones are ignored; the ones used are checked strictly. The
// returned event carries what could be read even on error, so that the
// answer has the right shape.
func parseBase(data []byte, events map[string]bool) (*Event, error) {
	var b baseEvent
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&b); err != nil {
		return nil, describe(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("unexpected data after the event object")
	}
	ev := &Event{}
	if b.HookEventName == nil {
		return nil, errors.New(`missing "hook_event_name"`)
	}
	ev.Name = *b.HookEventName
	if !events[ev.Name] {
		return ev, fmt.Errorf("unsupported hook event %q (want %s)", ev.Name, strings.Join(sortedKeys(events), " or "))
	}
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	ev.SessionID, ev.TranscriptPath, ev.Cwd = str(b.SessionID), str(b.TranscriptPath), str(b.Cwd)
	ev.PermissionMode, ev.ToolName, ev.ToolUseID = str(b.PermissionMode), str(b.ToolName), str(b.ToolUseID)
	if ev.ToolName == "" {
		return ev, errors.New(`missing "tool_name"`)
	}
	if len(ev.ToolName) > 500 {
		return ev, fmt.Errorf("tool name is %d characters, more than the limit of 500", len(ev.ToolName))
	}
	if len(b.ToolInput) == 0 || string(b.ToolInput) == "null" {
		return ev, errors.New(`missing "tool_input"`)
	}
	in := json.NewDecoder(bytes.NewReader(b.ToolInput))
	in.UseNumber()
	if err := in.Decode(&ev.ToolInput); err != nil {
		return ev, errors.New(`"tool_input" is not an object`)
	}
	if ev.Cwd != "" && !filepath.IsAbs(ev.Cwd) {
		return ev, fmt.Errorf(`"cwd" %q is not an absolute path`, ev.Cwd)
	}
	if b.MCPContext != nil {
		ev.MCPServer, ev.MCPTool = b.MCPContext.ServerName, b.MCPContext.ToolName
	}
	return ev, nil
}

func describe(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Errorf("malformed JSON at byte %d", syn.Offset)
	case errors.As(err, &typ):
		if typ.Field != "" {
			return fmt.Errorf("field %q has the wrong type (got JSON %s)", typ.Field, typ.Value)
		}
		return fmt.Errorf("got JSON %s, want an event object", typ.Value)
	case err == io.EOF:
		return errors.New("empty input (want the hook event as a JSON object)")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("truncated JSON")
	}
	return err
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// kind is what a host tool does, as far as the policy's tools go.
type kind int

const (
	kindOther kind = iota // decided under its own name
	kindShell             // runs a shell command
	kindWrite             // writes a file
	kindRead              // reads files
	kindMCP               // an MCP server's tool
)

// action is one call a host tool use makes.
type action struct {
	kind     kind
	hostTool string
	// args are the host's tool input, paths made absolute.
	args map[string]any
	// command is a shell action's command.
	command string
	// pathKey and path are a file action's path argument and its absolute
	// value ("" when the tool names no path).
	pathKey, path string
	// server and tool name an MCP action.
	server, tool string
}

// fileAction is a write or read of the path in args[key], made absolute
// against cwd.
func fileAction(k kind, ev *Event, key string) action {
	a := action{kind: k, hostTool: ev.ToolName, args: ev.ToolInput, pathKey: key}
	if p, ok := ev.ToolInput[key].(string); ok && p != "" {
		a.path = absPath(ev.Cwd, p)
		if a.path != p {
			a.args = withArg(ev.ToolInput, key, a.path)
		}
	}
	return a
}

func absPath(cwd, p string) string {
	if filepath.IsAbs(p) || cwd == "" {
		return p
	}
	return filepath.Join(cwd, p)
}

// withArg returns a copy of args with key set to v.
func withArg(args map[string]any, key string, v any) map[string]any {
	out := make(map[string]any, len(args)+1)
	maps.Copy(out, args)
	out[key] = v
	return out
}

// mcpAction is a call of an MCP tool named mcp__<server>__<tool>.
func mcpAction(ev *Event) (action, bool) {
	rest, ok := strings.CutPrefix(ev.ToolName, "mcp__")
	if !ok {
		return action{}, false
	}
	server, tool, ok := strings.Cut(rest, "__")
	if !ok || server == "" || tool == "" {
		return action{}, false
	}
	return action{kind: kindMCP, hostTool: ev.ToolName, args: ev.ToolInput, server: server, tool: tool}, true
}

// shellAction is a shell command in args[key]. A shell tool without a
// command string is malformed.
func shellAction(ev *Event, key string) (action, error) {
	cmd, ok := ev.ToolInput[key].(string)
	if !ok {
		return action{}, fmt.Errorf("%s: tool_input.%s is not a string", ev.ToolName, key)
	}
	return action{kind: kindShell, hostTool: ev.ToolName, args: ev.ToolInput, command: cmd}, nil
}

func otherAction(ev *Event) action {
	return action{kind: kindOther, hostTool: ev.ToolName, args: ev.ToolInput}
}

// ClientConfigFiles are the files that tell any supported client what to
// run: every host's hook settings, and the MCP server lists of Claude Code
// (~/.claude.json, in claudeConfigDir too when set, and the project's
// .mcp.json), Cursor and Claude Desktop (under userConfigDir), for the
// user (home) and for project. An empty directory is left out. The
// `portcullis mcp` wrapper protects them all: an agent that rewrote one
// through the wrapper's own server could start that server without the
// wrapper, or with another policy, or install another hook.
func ClientConfigFiles(home, project, claudeConfigDir, userConfigDir string) []string {
	var out []string
	for _, h := range Hosts {
		out = append(out, h.configFiles(home, project)...)
	}
	out = append(out, joinEach([]string{home, claudeConfigDir}, ".claude.json")...)
	out = append(out, joinEach([]string{project}, ".mcp.json")...)
	return append(out, joinEach([]string{userConfigDir}, "Claude/claude_desktop_config.json")...)
}
