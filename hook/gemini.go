package hook

import "github.com/portcullis/portcullis"

// Gemini is Gemini CLI's BeforeTool hook (docs/hooks/reference.md of the
// google-gemini/gemini-cli repository). Input: session_id,
// transcript_path, cwd, hook_event_name, timestamp, tool_name, tool_input
// and, for MCP tools, mcp_context (server_name, tool_name). Output on exit
// 0:
//
//	{"decision": "allow"}   or   {"decision": "deny", "reason": "..."}
//
// The reason of a deny is sent to the agent as the tool's error. Gemini's
// documented decisions are allow and deny, so a decision that needs a
// person is a deny naming the pending approval, unless the call is held. A
// stop also sets "continue": false, which ends the agent loop.
//
// Built-in tools: run_shell_command (command) is a shell command;
// write_file and replace (file_path) write; read_file, read_many_files,
// list_directory, glob, search_file_content and grep_search read.
type Gemini struct{}

// Name implements Host.
func (Gemini) Name() string { return "gemini" }

var geminiEvents = map[string]bool{"BeforeTool": true}

func (Gemini) parse(data []byte) (*Event, error) {
	// Gemini does not say whether a person is at the prompt: nobody is
	// assumed, the stricter reading for the validator.
	return parseBase(data, geminiEvents)
}

func (Gemini) actions(ev *Event) ([]action, error) {
	switch ev.ToolName {
	case "run_shell_command":
		a, err := shellAction(ev, "command")
		return []action{a}, err
	case "write_file", "replace":
		return []action{fileAction(kindWrite, ev, "file_path")}, nil
	case "read_file":
		return []action{fileAction(kindRead, ev, firstKey(ev.ToolInput, "file_path", "absolute_path", "path"))}, nil
	case "list_directory", "glob", "search_file_content", "grep_search":
		return []action{fileAction(kindRead, ev, firstKey(ev.ToolInput, "dir_path", "path"))}, nil
	case "read_many_files":
		return []action{{kind: kindRead, hostTool: ev.ToolName, args: ev.ToolInput}}, nil
	}
	if ev.MCPServer != "" && ev.MCPTool != "" {
		return []action{{kind: kindMCP, hostTool: ev.ToolName, args: ev.ToolInput, server: ev.MCPServer, tool: ev.MCPTool}}, nil
	}
	if a, ok := mcpAction(ev); ok {
		return []action{a}, nil
	}
	return []action{otherAction(ev)}, nil
}

// firstKey returns the first of keys that args has, or the first key.
func firstKey(args map[string]any, keys ...string) string {
	for _, k := range keys {
		if _, ok := args[k]; ok {
			return k
		}
	}
	return keys[0]
}

func (Gemini) confirm(_ *Event, d *portcullis.Decision, tool string) Verdict {
	return Verdict{Behavior: Deny, Reason: pendingReason(d, tool)}
}

type geminiOutput struct {
	Decision   string `json:"decision"`
	Reason     string `json:"reason,omitempty"`
	Continue   *bool  `json:"continue,omitempty"`
	StopReason string `json:"stopReason,omitempty"`
}

func (Gemini) answer(_ *Event, v Verdict) any {
	if v.Behavior == Allow {
		return geminiOutput{Decision: "allow"}
	}
	out := geminiOutput{Decision: "deny", Reason: v.Reason}
	if v.Stop {
		f := false
		out.Continue, out.StopReason = &f, v.Reason
	}
	return out
}

func (Gemini) transcript() TranscriptFormat { return TranscriptGeminiJSON }

// configFiles: the settings, and the folders the user trusts, since
// Gemini CLI runs a project's hooks only in a trusted folder.
func (Gemini) configFiles(home, project string) []string {
	return append(joinEach([]string{home, project}, ".gemini/settings.json"), joinEach([]string{home}, ".gemini/trustedFolders.json")...)
}
