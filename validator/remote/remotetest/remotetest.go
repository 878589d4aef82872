// Package remotetest builds the provider program, portcullis-provider, for
// the tests of the packages that start it: the real program, which then
// asks whatever model server the test's configuration names.
package remotetest

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/portcullis/portcullis/validator/remote"
)

// Build builds the program into dir and returns its path. It needs the go
// command, as every test of this module does.
func Build(t testing.TB, dir string) string {
	t.Helper()
	bin, err := BuildIn(dir)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// BuildIn is Build for a TestMain, which has no testing.TB.
func BuildIn(dir string) (string, error) {
	bin := filepath.Join(dir, remote.Program)
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	out, err := exec.Command("go", "build", "-o", bin, "github.com/portcullis/portcullis/cmd/"+remote.Program).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", remote.Program, err, out)
	}
	return bin, nil
}
