package hook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// codexVerdict is what Codex makes of a hook's answer, by the rules of
// codex-rs/hooks/src/engine/output_parser.rs and events/pre_tool_use.rs,
// events/permission_request.rs: a failed run (err), which blocks nothing,
// or a block, an allow, or no decision.
type codexVerdict string

const (
	codexNone  codexVerdict = "none"
	codexBlock codexVerdict = "block"
	codexAllow codexVerdict = "allow"
)

// codexReads applies Codex's checks to one answer on exit 0. Unknown
// fields are refused, as the generated schemas (additionalProperties:
// false) and Codex's deserializer refuse them.
func codexReads(event string, out []byte) (codexVerdict, error) {
	out = bytes.TrimSpace(out)
	if len(out) == 0 {
		return codexNone, nil
	}
	var w struct {
		Continue       *bool            `json:"continue"`
		StopReason     *string          `json:"stopReason"`
		SuppressOutput bool             `json:"suppressOutput"`
		SystemMessage  *string          `json:"systemMessage"`
		Decision       *string          `json:"decision"`
		Reason         *string          `json:"reason"`
		Specific       *json.RawMessage `json:"hookSpecificOutput"`
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return "", fmt.Errorf("invalid %s JSON output: %v", event, err)
	}
	switch {
	case w.Continue != nil && !*w.Continue:
		return "", fmt.Errorf("%s hook returned unsupported continue:false", event)
	case w.StopReason != nil:
		return "", fmt.Errorf("%s hook returned unsupported stopReason", event)
	case w.SuppressOutput:
		return "", fmt.Errorf("%s hook returned unsupported suppressOutput", event)
	}
	if event == "PermissionRequest" {
		if w.Decision != nil || w.Reason != nil {
			return "", fmt.Errorf("PermissionRequest: unknown top-level decision/reason")
		}
		if w.Specific == nil {
			return codexNone, nil
		}
		var s struct {
			HookEventName string `json:"hookEventName"`
			Decision      *struct {
				Behavior           string          `json:"behavior"`
				Message            *string         `json:"message"`
				Interrupt          bool            `json:"interrupt"`
				UpdatedInput       json.RawMessage `json:"updatedInput"`
				UpdatedPermissions json.RawMessage `json:"updatedPermissions"`
			} `json:"decision"`
		}
		dec := json.NewDecoder(bytes.NewReader(*w.Specific))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&s); err != nil || s.HookEventName != event {
			return "", fmt.Errorf("invalid permission-request hookSpecificOutput: %v %q", err, s.HookEventName)
		}
		if s.Decision == nil {
			return codexNone, nil
		}
		switch d := s.Decision; {
		case d.UpdatedInput != nil, d.UpdatedPermissions != nil:
			return "", fmt.Errorf("PermissionRequest hook returned unsupported updatedInput/updatedPermissions")
		case d.Interrupt:
			return "", fmt.Errorf("PermissionRequest hook returned unsupported interrupt:true")
		case d.Behavior == "allow":
			return codexAllow, nil
		case d.Behavior == "deny":
			if d.Message == nil || strings.TrimSpace(*d.Message) == "" {
				return "", fmt.Errorf("a deny without a message reaches the model as Codex's generic text")
			}
			return codexBlock, nil
		}
		return "", fmt.Errorf("PermissionRequest: unknown behavior %q", s.Decision.Behavior)
	}
	if w.Specific == nil {
		switch {
		case w.Decision == nil && w.Reason != nil:
			return "", fmt.Errorf("PreToolUse hook returned reason without decision")
		case w.Decision == nil:
			return codexNone, nil
		case *w.Decision == "approve":
			return "", fmt.Errorf("PreToolUse hook returned unsupported decision:approve")
		case *w.Decision == "block" && w.Reason != nil && strings.TrimSpace(*w.Reason) != "":
			return codexBlock, nil
		}
		return "", fmt.Errorf("PreToolUse: bad legacy decision")
	}
	var s struct {
		HookEventName            string          `json:"hookEventName"`
		PermissionDecision       *string         `json:"permissionDecision"`
		PermissionDecisionReason *string         `json:"permissionDecisionReason"`
		UpdatedInput             json.RawMessage `json:"updatedInput"`
		AdditionalContext        *string         `json:"additionalContext"`
	}
	dec = json.NewDecoder(bytes.NewReader(*w.Specific))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil || s.HookEventName != event {
		return "", fmt.Errorf("invalid pre-tool-use hookSpecificOutput: %v %q", err, s.HookEventName)
	}
	switch {
	case s.PermissionDecision == nil && s.PermissionDecisionReason != nil:
		return "", fmt.Errorf("PreToolUse hook returned permissionDecisionReason without permissionDecision")
	case s.PermissionDecision == nil:
		return codexNone, nil
	case *s.PermissionDecision == "allow" && s.UpdatedInput == nil:
		return "", fmt.Errorf("PreToolUse hook returned unsupported permissionDecision:allow")
	case *s.PermissionDecision == "ask":
		return "", fmt.Errorf("PreToolUse hook returned unsupported permissionDecision:ask")
	case *s.PermissionDecision == "deny":
		if s.PermissionDecisionReason == nil || strings.TrimSpace(*s.PermissionDecisionReason) == "" {
			return "", fmt.Errorf("PreToolUse hook returned permissionDecision:deny without a non-empty permissionDecisionReason")
		}
		return codexBlock, nil
	}
	return "", fmt.Errorf("PreToolUse: unknown permissionDecision %q", *s.PermissionDecision)
}

// TestCodexAnswersAreAccepted: every verdict, on both events, is answered
// in a form Codex accepts, and means to Codex what it means to Portcullis:
// a deny (a stop too) blocks, an allow is not a failed hook run, and a
// question for a person is Codex's own prompt on PermissionRequest.
func TestCodexAnswersAreAccepted(t *testing.T) {
	const reason = "Portcullis: the reason"
	for _, event := range []string{"PreToolUse", "PermissionRequest"} {
		for _, v := range []Verdict{
			{Behavior: Allow, Reason: reason},
			{Behavior: Ask, Reason: reason},
			{Behavior: Deny, Reason: reason},
			{Behavior: Deny, Reason: reason, Stop: true},
		} {
			ev := &Event{Name: event, Permission: event == "PermissionRequest"}
			out := encode(Codex{}.answer(ev, v))
			got, err := codexReads(event, out)
			if err != nil {
				t.Errorf("%s %+v: Codex refuses %s: %v", event, v, out, err)
				continue
			}
			want := codexBlock
			switch {
			case v.Behavior == Allow && event == "PermissionRequest":
				want = codexAllow
			case v.Behavior == Allow, v.Behavior == Ask && event == "PermissionRequest":
				want = codexNone
			}
			if got != want {
				t.Errorf("%s %+v: answer %s is %s to Codex, want %s", event, v, out, got, want)
			}
			if want == codexBlock && !bytes.Contains(out, []byte(reason)) {
				t.Errorf("%s %+v: answer %s does not carry the reason", event, v, out)
			}
		}
	}
	// An answer written before any event could be parsed (a malformed
	// event, a policy that does not load) exits 2: Codex blocks on the
	// reason on stderr and reads nothing else.
	if got, err := codexReads("PreToolUse", encode(Codex{}.answer(nil, denied(reason)))); err != nil || got != codexBlock {
		t.Errorf("failure answer: %s, %v", got, err)
	}
}

// TestCodexGoldenAnswersAreAccepted: every captured Codex answer is one
// Codex accepts.
func TestCodexGoldenAnswersAreAccepted(t *testing.T) {
	goldens, err := filepath.Glob(filepath.Join("testdata", "golden", "codex", "*.golden"))
	if err != nil || len(goldens) == 0 {
		t.Fatalf("no Codex goldens: %v", err)
	}
	for _, g := range goldens {
		data, err := os.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}
		status, out, _ := strings.Cut(string(data), "\n")
		if status != "exit 0" {
			continue
		}
		event := "PreToolUse"
		if strings.HasPrefix(filepath.Base(g), "permissionrequest-") {
			event = "PermissionRequest"
		}
		if _, err := codexReads(event, []byte(out)); err != nil {
			t.Errorf("%s: Codex refuses it: %v", g, err)
		}
	}
}
