package policycmd_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/portcullis/portcullis/internal/cmd/cmdutil"
	"github.com/portcullis/portcullis/internal/cmd/policycmd"
)

// TestReplayReadsItsEnv: policy replay takes the policy and the state
// directory from the environment it is given, and refuses (exit status 2)
// to replay an audit log that is not there rather than report that
// nothing would change.
func TestReplayReadsItsEnv(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(path, []byte("version: 1\ntools:\n  read_note: {endpoint: READ}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	for _, tc := range []struct {
		name string
		vars map[string]string
		want string
	}{
		{"no policy", map[string]string{"PORTCULLIS_STATE": state}, "no policy file: pass --policy FILE or set PORTCULLIS_POLICY"},
		{"no audit log", map[string]string{"PORTCULLIS_POLICY": path, "PORTCULLIS_STATE": state}, "no audit log to replay"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := cmdutil.Execute(context.Background(), policycmd.NewPolicyCmd(cmdutil.StaticEnv(tc.vars, dir)), []string{"replay"}, nil, &stdout, &stderr)
			var ee *cmdutil.ExitError
			if !errors.As(err, &ee) || ee.Code != 2 || !strings.Contains(ee.Msg, tc.want) {
				t.Fatalf("policy replay = %v; want exit status 2 and %q", err, tc.want)
			}
			if stdout.Len() > 0 {
				t.Errorf("stdout = %q; want nothing", stdout.String())
			}
			if _, err := os.Stat(filepath.Join(state, "portcullis.db")); err == nil {
				t.Error("policy replay created a store")
			}
		})
	}
}
