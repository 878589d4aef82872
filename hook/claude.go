package hook

import "github.com/portcullis/portcullis"

// ClaudeCode is Claude Code's hook format (the hooks reference at
// code.claude.com/docs/en/hooks): PreToolUse, which runs before every tool
// call, and PermissionRequest, which runs when Claude Code is about to show
// its permission dialog.
//
// Input: session_id, transcript_path, cwd, permission_mode,
// hook_event_name, tool_name, tool_input, tool_use_id. Output on exit 0:
//
//	PreToolUse:        {"hookSpecificOutput": {"hookEventName": "PreToolUse",
//	                     "permissionDecision": "allow|deny|ask", "permissionDecisionReason": "..."}}
//	PermissionRequest: {"hookSpecificOutput": {"hookEventName": "PermissionRequest",
//	                     "decision": {"behavior": "allow|deny", "message": "...", "interrupt": true}}}
//
// A decision that needs a person is "ask" (PreToolUse) or no decision at
// all (PermissionRequest: the dialog is shown), unless the call is held. A
// stop (danger zone, retry loop) also sets "continue": false, which ends
// Claude's turn: the agent must wait for the user.
type ClaudeCode struct{}

// Name implements Host.
func (ClaudeCode) Name() string { return "claude-code" }

var claudeEvents = map[string]bool{"PreToolUse": true, "PermissionRequest": true}

func (ClaudeCode) parse(data []byte) (*Event, error) {
	ev, err := parseBase(data, claudeEvents)
	if ev != nil {
		ev.Permission = ev.Name == "PermissionRequest"
		ev.UserPresent = interactiveMode(ev.PermissionMode)
	}
	return ev, err
}

// interactiveMode reports whether a Claude Code or Codex permission mode
// has a person answering prompts. bypassPermissions and dontAsk run
// without one; an unknown mode is taken as nobody there.
func interactiveMode(mode string) bool {
	switch mode {
	case "default", "acceptEdits", "plan":
		return true
	}
	return false
}

func (ClaudeCode) actions(ev *Event) ([]action, error) {
	switch ev.ToolName {
	case "Bash":
		a, err := shellAction(ev, "command")
		return []action{a}, err
	case "Write", "Edit", "MultiEdit":
		return []action{fileAction(kindWrite, ev, "file_path")}, nil
	case "NotebookEdit":
		return []action{fileAction(kindWrite, ev, "notebook_path")}, nil
	case "Read":
		return []action{fileAction(kindRead, ev, "file_path")}, nil
	case "NotebookRead":
		return []action{fileAction(kindRead, ev, "notebook_path")}, nil
	case "Glob", "Grep", "LS":
		return []action{fileAction(kindRead, ev, "path")}, nil
	}
	if a, ok := mcpAction(ev); ok {
		return []action{a}, nil
	}
	return []action{otherAction(ev)}, nil
}

func (ClaudeCode) confirm(_ *Event, d *portcullis.Decision, _ string) Verdict {
	return Verdict{Behavior: Ask, Reason: askReason(d)}
}

func (ClaudeCode) answer(ev *Event, v Verdict) any {
	return claudeAnswer(ev, v)
}

func (ClaudeCode) transcript() TranscriptFormat { return TranscriptJSONLines }

// claudeOutput is Claude Code's (and Codex's) hook output.
type claudeOutput struct {
	Continue           *bool  `json:"continue,omitempty"`
	StopReason         string `json:"stopReason,omitempty"`
	SystemMessage      string `json:"systemMessage,omitempty"`
	HookSpecificOutput any    `json:"hookSpecificOutput,omitempty"`
}

type preToolUseOutput struct {
	HookEventName            string `json:"hookEventName"`
	PermissionDecision       string `json:"permissionDecision"`
	PermissionDecisionReason string `json:"permissionDecisionReason"`
}

type permissionRequestOutput struct {
	HookEventName string                      `json:"hookEventName"`
	Decision      *permissionRequestBehaviour `json:"decision,omitempty"`
}

type permissionRequestBehaviour struct {
	Behavior  string `json:"behavior"`
	Message   string `json:"message,omitempty"`
	Interrupt bool   `json:"interrupt,omitempty"`
}

// claudeAnswer writes the answer in the format Claude Code and Codex
// share. A PermissionRequest has no "ask": its ask is no decision, so the
// host's own prompt is shown, with the reason as a message to the person.
func claudeAnswer(ev *Event, v Verdict) claudeOutput {
	var out claudeOutput
	if v.Stop {
		f := false
		out.Continue, out.StopReason = &f, v.Reason
	}
	if ev != nil && ev.Permission {
		switch v.Behavior {
		case Allow:
			out.HookSpecificOutput = permissionRequestOutput{HookEventName: ev.Name, Decision: &permissionRequestBehaviour{Behavior: "allow"}}
		case Ask:
			out.SystemMessage = v.Reason
		default:
			out.HookSpecificOutput = permissionRequestOutput{HookEventName: ev.Name, Decision: &permissionRequestBehaviour{Behavior: "deny", Message: v.Reason, Interrupt: v.Stop}}
		}
		return out
	}
	out.HookSpecificOutput = preToolUseOutput{
		HookEventName:            "PreToolUse",
		PermissionDecision:       v.Behavior.String(),
		PermissionDecisionReason: v.Reason,
	}
	return out
}

func (ClaudeCode) configFiles(home, project string) []string {
	return append(joinEach([]string{home}, ".claude/settings.json"),
		joinEach([]string{project}, ".claude/settings.json", ".claude/settings.local.json")...)
}
