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
// Codex honours a PreToolUse "deny" but treats "allow" and "ask" as no
// decision (its own approval policy then applies). So a decision that
// needs a person is a deny whose reason names the pending approval, unless
// the call is held; on PermissionRequest it is no decision, and Codex shows
// its approval prompt. A patch is decided once per file it adds, updates,
// deletes or moves to, the strictest answer winning.
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
	if ev.Permission {
		return Verdict{Behavior: Ask, Reason: askReason(d)}
	}
	return Verdict{Behavior: Deny, Reason: pendingReason(d, tool)}
}

func (Codex) answer(ev *Event, v Verdict) any {
	if v.Behavior == Ask && (ev == nil || !ev.Permission) {
		// Codex does not honour a PreToolUse ask: it would run the call.
		v.Behavior = Deny
	}
	return claudeAnswer(ev, v)
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
