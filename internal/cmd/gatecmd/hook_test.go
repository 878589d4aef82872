package gatecmd_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/portcullis/portcullis/internal/cmd/cmdutil"
	"github.com/portcullis/portcullis/internal/cmd/gatecmd"
)

// TestHookReadsItsEnv: the claude-code hook decides under the policy of
// $PORTCULLIS_POLICY of the environment it is given, with the state of
// $PORTCULLIS_STATE; a policy that does not load is answered with a deny
// in the host's format and exit status 2.
func TestHookReadsItsEnv(t *testing.T) {
	dir := t.TempDir()
	event := `{"session_id": "s1", "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "ls"}}`
	for _, tc := range []struct {
		name string
		vars map[string]string
		code int
		want string
	}{
		{"default policy", map[string]string{"PORTCULLIS_STATE": filepath.Join(dir, "state")}, 0, `"permissionDecision":"allow"`},
		{"policy missing", map[string]string{"PORTCULLIS_STATE": filepath.Join(dir, "state"), "PORTCULLIS_POLICY": filepath.Join(dir, "missing.yaml")}, 2, `"permissionDecision":"deny"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := cmdutil.Execute(context.Background(), gatecmd.NewHookCmd(cmdutil.StaticEnv(tc.vars, dir)), []string{"claude-code"}, strings.NewReader(event), &stdout, &stderr)
			code := 0
			if ee := (*cmdutil.ExitError)(nil); errors.As(err, &ee) {
				code = ee.Code
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.code || !strings.Contains(stdout.String(), tc.want) {
				t.Errorf("hook claude-code: exit status %d, %q; want %d and %s (stderr %q)", code, stdout.String(), tc.code, tc.want, stderr.String())
			}
		})
	}
}
