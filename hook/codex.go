package hook

import (
	"errors"
	"strings"

	"github.com/portcullis/portcullis"
)

// Codex is Codex CLI's hook format (developers.openai.com/codex/hooks, and
// the JSON schemas in codex-rs/hooks/schema of the openai/codex repository):
// PreToolUse and PermissionRequest, with Claude Code's wire format. The
// input adds model and turn_id; tool_name is Bash (tool_input.command, a
// string), apply_patch (tool_input.command is the patch) or an MCP tool
// (mcp__<server>__<tool>).
//
// Codex checks a hook's answer strictly (codex-rs/hooks/src/engine/
// output_parser.rs) and a malformed one is a failed hook run that does not
// block: the call runs. So only the forms Codex accepts are written:
//
//	PreToolUse allow:  {} (no decision: Codex's own approval policy applies;
//	                   "permissionDecision":"allow" is accepted only with
//	                   updatedInput, and "ask" never)
//	PreToolUse deny:   {"hookSpecificOutput": {"hookEventName": "PreToolUse",
//	                     "permissionDecision": "deny", "permissionDecisionReason": "..."}}
//	PermissionRequest: {"hookSpecificOutput": {"hookEventName": "PermissionRequest",
//	                     "decision": {"behavior": "allow|deny", "message": "..."}}},
//	                   or {"systemMessage": "..."} for no decision (Codex's prompt)
//
// Neither event accepts "continue": false, "stopReason" or "interrupt":
// a stop (danger zone, retry loop) is a deny whose reason says why.
//
// A decision that needs a person cannot be an ask on PreToolUse: it is a
// deny whose reason names the pending approval (the person answers in the
// console or with `portcullis approve`), or, with --hold, the call waits
// for that answer. On PermissionRequest, which Codex sends just before it
// would show its own approval prompt, it is no decision, so Codex asks the
// person, when its permission mode has one (default, acceptEdits, plan);
// otherwise it is the same pending deny. A patch is decided once per file it adds, updates, deletes or
// moves to, the strictest answer winning.
type Codex struct{}

// Name implements Host.
func (Codex) Name() string { return "codex" }

func (Codex) parse(data []byte) (*Event, error) {
	ev, err := parseBase(data, claudeEvents)
	if ev != nil {
		ev.Permission = ev.Name == "PermissionRequest"
		ev.UserPresent = interactiveMode(ev.PermissionMode)
	}
	return ev, err
}

func (Codex) actions(ev *Event) ([]action, error) {
	switch ev.ToolName {
	case "Bash":
		a, err := shellAction(ev, "command")
		return []action{a}, err
	case "apply_patch":
		patch, ok := ev.ToolInput["command"].(string)
		if !ok {
			return nil, errors.New("apply_patch: tool_input.command is not a string")
		}
		files := PatchFiles(patch)
		if len(files) == 0 {
			// A patch whose files cannot be told is decided under its own
			// name: unclassified unless the policy names apply_patch.
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

func (Codex) confirm(ev *Event, d *portcullis.Decision, tool string) Verdict {
	// Codex's own prompt only where a person answers it: in dontAsk or
	// bypassPermissions mode nobody would, and the call waits for an
	// approval in Portcullis instead.
	if ev.Permission && ev.UserPresent {
		return Verdict{Behavior: Ask, Reason: askReason(d)}
	}
	return Verdict{Behavior: Deny, Reason: pendingReason(d, tool)}
}

func (Codex) answer(ev *Event, v Verdict) any {
	if ev != nil && ev.Permission {
		switch v.Behavior {
		case Allow:
			return claudeOutput{HookSpecificOutput: permissionRequestOutput{HookEventName: ev.Name,
				Decision: &permissionRequestBehaviour{Behavior: "allow"}}}
		case Ask:
			return claudeOutput{SystemMessage: v.Reason}
		}
		return claudeOutput{HookSpecificOutput: permissionRequestOutput{HookEventName: ev.Name,
			Decision: &permissionRequestBehaviour{Behavior: "deny", Message: v.Reason}}}
	}
	if v.Behavior == Allow {
		return struct{}{}
	}
	// Codex does not honour a PreToolUse ask: it would be a failed hook
	// run, and the call would run.
	return claudeOutput{HookSpecificOutput: preToolUseOutput{
		HookEventName:            "PreToolUse",
		PermissionDecision:       Deny.String(),
		PermissionDecisionReason: v.Reason,
	}}
}

func (Codex) transcript() TranscriptFormat { return TranscriptJSONLines }

// PatchFiles lists the files an apply_patch patch touches, in order, each
// once: those it adds, updates or deletes, and the targets of its moves.
func PatchFiles(patch string) []string {
	var out []string
	seen := map[string]bool{}
	for _, line := range strings.Split(patch, "\n") {
		line = strings.TrimRight(line, "\r")
		for _, prefix := range []string{"*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: "} {
			if f, ok := strings.CutPrefix(line, prefix); ok {
				if f = strings.TrimSpace(f); f != "" && !seen[f] {
					seen[f] = true
					out = append(out, f)
				}
			}
		}
	}
	return out
}

func (Codex) configFiles(home, project string) []string {
	return joinEach([]string{home, project}, ".codex/hooks.json", ".codex/config.toml")
}
