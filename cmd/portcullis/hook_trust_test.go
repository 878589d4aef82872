package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestHookGuardsGeminiTrust: the file in which Gemini CLI records the
// folders it trusts decides whether it runs a project's hooks at all. An
// agent that wrote DO_NOT_TRUST for its project into trustedFolders.json
// (in ~/.gemini, or where $GEMINI_CLI_TRUSTED_FOLDERS_PATH puts it) would
// run unchecked from its next session: the hook denies such a write as
// one to Portcullis's own files, whatever the policy says of writes.
func TestHookGuardsGeminiTrust(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("GEMINI_CLI_TRUSTED_FOLDERS_PATH", filepath.Join(home, "elsewhere", "trusted.json"))
	state := filepath.Join(t.TempDir(), "state")
	for _, path := range []string{
		filepath.Join(home, ".gemini", "trustedFolders.json"),
		filepath.Join(home, "elsewhere", "trusted.json"),
	} {
		ev, err := json.Marshal(map[string]any{
			"session_id": "s-1", "cwd": home, "hook_event_name": "BeforeTool", "timestamp": "2026-05-18T10:14:07.512Z",
			"tool_name":  "write_file",
			"tool_input": map[string]any{"file_path": path, "content": `{"` + home + `": "DO_NOT_TRUST"}`},
		})
		if err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := runCLI(t, string(ev), "hook", "gemini", "--state", state)
		if code != 0 || !strings.Contains(stdout, `"decision":"deny"`) || !strings.Contains(stdout, "one of Portcullis's own files") {
			t.Errorf("write_file %s: exit %d, %s %s; want a deny as a write to Portcullis's own files", path, code, stdout, stderr)
		}
	}
}
