package peoplecmd_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/portcullis/portcullis/internal/cmd/cmdutil"
	"github.com/portcullis/portcullis/internal/cmd/peoplecmd"
)

// TestApprovalsReadItsEnv: approvals uses the store of $PORTCULLIS_STATE
// of the environment it is given, or, when that environment names a
// gateway, the gateway, for which it needs the human token.
func TestApprovalsReadItsEnv(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	ctx := context.Background()

	var stdout, stderr bytes.Buffer
	env := cmdutil.StaticEnv(map[string]string{"PORTCULLIS_STATE": state}, dir)
	if err := cmdutil.Execute(ctx, peoplecmd.NewApprovalsCmd(env), nil, nil, &stdout, &stderr); err != nil {
		t.Fatalf("approvals: %v (stderr %q)", err, stderr.String())
	}
	if got := stdout.String(); got != "no pending approval requests\n" {
		t.Errorf("approvals = %q; want no pending approval requests", got)
	}

	env = cmdutil.StaticEnv(map[string]string{"PORTCULLIS_STATE": filepath.Join(dir, "none"), "PORTCULLIS_GATEWAY": "http://127.0.0.1:1"}, dir)
	err := cmdutil.Execute(ctx, peoplecmd.NewApprovalsCmd(env), nil, nil, &stdout, &stderr)
	var ee *cmdutil.ExitError
	if !errors.As(err, &ee) || ee.Code != 2 || !strings.Contains(ee.Msg, "no human token for the gateway") {
		t.Errorf("approvals through $PORTCULLIS_GATEWAY without a token = %v; want exit status 2, no human token", err)
	}
}
