package servecmd_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/portcullis/portcullis/internal/cmd/cmdutil"
	"github.com/portcullis/portcullis/internal/cmd/servecmd"
)

// TestBenchTakesTheTokenFromItsEnv: bench needs an agent token, from
// --token-file or $PORTCULLIS_AGENT_TOKEN of the environment it is given;
// without either it is bad input, whatever the process's own environment
// holds.
func TestBenchTakesTheTokenFromItsEnv(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := cmdutil.Execute(context.Background(), servecmd.NewBenchCmd(cmdutil.StaticEnv(nil, t.TempDir())), nil, nil, &stdout, &stderr)
	var ee *cmdutil.ExitError
	want := "no agent token: pass --token-file FILE or set PORTCULLIS_AGENT_TOKEN"
	if !errors.As(err, &ee) || ee.Code != 2 || ee.Msg != want {
		t.Fatalf("bench = %v; want exit status 2, %q", err, want)
	}
	if stdout.Len() > 0 {
		t.Errorf("stdout = %q; want nothing", stdout.String())
	}
}
