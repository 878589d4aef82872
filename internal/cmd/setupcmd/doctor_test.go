package setupcmd_test

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/portcullis/portcullis/hostconfig"
	"github.com/portcullis/portcullis/internal/cmd/cmdutil"
	"github.com/portcullis/portcullis/internal/cmd/setupcmd"
)

// TestDoctorLooksWhereItsEnvSays: doctor looks for the clients in the
// home directory of the environment it is given; in an empty one it finds
// nothing, which is not a fault.
func TestDoctorLooksWhereItsEnvSays(t *testing.T) {
	home := t.TempDir()
	env := cmdutil.StaticEnv(nil, home)
	env.HostConfig = func() (hostconfig.Env, error) {
		return hostconfig.Env{Home: home, ConfigDir: filepath.Join(home, ".config"), CodexHome: filepath.Join(home, ".codex")}, nil
	}
	var stdout, stderr bytes.Buffer
	if err := cmdutil.Execute(context.Background(), setupcmd.NewDoctorCmd(env), []string{"--json"}, nil, &stdout, &stderr); err != nil {
		t.Fatalf("doctor: %v (stderr %q)", err, stderr.String())
	}
	if got := stdout.String(); got != "[]\n" {
		t.Errorf("doctor --json = %q; want [] (nothing installed)", got)
	}
}
