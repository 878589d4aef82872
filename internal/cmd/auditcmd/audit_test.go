package auditcmd_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/portcullis/portcullis/internal/cmd/auditcmd"
	"github.com/portcullis/portcullis/internal/cmd/cmdutil"
)

// TestVerifyUsesTheStateOfItsEnv: audit verify opens the store in the
// state directory $PORTCULLIS_STATE of the environment it is given, and a
// new log verifies.
func TestVerifyUsesTheStateOfItsEnv(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	var stdout, stderr bytes.Buffer
	env := cmdutil.StaticEnv(map[string]string{"PORTCULLIS_STATE": state}, dir)
	if err := cmdutil.Execute(context.Background(), auditcmd.NewAuditCmd(env), []string{"verify"}, nil, &stdout, &stderr); err != nil {
		t.Fatalf("audit verify: %v (stderr %q)", err, stderr.String())
	}
	if got := stdout.String(); !strings.HasPrefix(got, "ok: 0 rows verified from the start") {
		t.Errorf("audit verify = %q; want a whole, empty log", got)
	}
	if _, err := os.Stat(filepath.Join(state, "portcullis.db")); err != nil {
		t.Errorf("the store of $PORTCULLIS_STATE: %v", err)
	}
}
