package decidecmd_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/portcullis/portcullis/internal/cmd/cmdutil"
	"github.com/portcullis/portcullis/internal/cmd/decidecmd"
)

// TestDecideTakesThePolicyFromItsEnv: decide reads $PORTCULLIS_POLICY from
// the environment it is given, and without it says it uses the built-in
// default policy.
func TestDecideTakesThePolicyFromItsEnv(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(path, []byte("version: 1\ntools:\n  drop_table: {endpoint: DELETE, defaultLevel: DENY}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		vars   map[string]string
		want   string // in the decision
		notice bool
	}{
		{"policy in env", map[string]string{"PORTCULLIS_POLICY": path}, `"outcome":"deny"`, false},
		{"no policy", nil, `"tool":"drop_table"`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			cmd := decidecmd.NewDecideCmd(cmdutil.StaticEnv(tc.vars, dir))
			err := cmdutil.Execute(context.Background(), cmd, nil, strings.NewReader(`{"tool": "drop_table"}`+"\n"), &stdout, &stderr)
			if err != nil {
				t.Fatalf("decide: %v (stderr %q)", err, stderr.String())
			}
			if !strings.Contains(stdout.String(), tc.want) {
				t.Errorf("decide = %q; want %s", stdout.String(), tc.want)
			}
			if got := strings.Contains(stderr.String(), cmdutil.DefaultPolicyNotice); got != tc.notice {
				t.Errorf("stderr %q: the default policy's notice = %v; want %v", stderr.String(), got, tc.notice)
			}
		})
	}
}
