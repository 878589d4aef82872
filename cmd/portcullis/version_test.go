package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestVersion(t *testing.T) {
	code, stdout, stderr := runCLI(t, "", "version", "--json")
	if code != 0 {
		t.Fatalf("version --json: exit %d: %s", code, stderr)
	}
	var b buildInfo
	if err := json.Unmarshal([]byte(stdout), &b); err != nil {
		t.Fatalf("version --json = %q: %v", stdout, err)
	}
	if b.Version == "" || b.Go != runtime.Version() || b.Platform != runtime.GOOS+"/"+runtime.GOARCH {
		t.Errorf("version --json = %+v; want a version, %s and %s/%s", b, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	}
}

func TestVersionLinkTimeValues(t *testing.T) {
	defer func(v, c, d string) { version, commit, date = v, c, d }(version, commit, date)
	version, commit, date = "v1.2.3", "0123456789abcdef", "2026-01-02T03:04:05Z"
	code, stdout, stderr := runCLI(t, "", "version")
	if code != 0 {
		t.Fatalf("version: exit %d: %s", code, stderr)
	}
	for _, want := range []string{"portcullis v1.2.3\n", "commit     0123456789abcdef\n", "built      2026-01-02T03:04:05Z\n", "go         " + runtime.Version()} {
		if !strings.Contains(stdout, want) {
			t.Errorf("version output lacks %q:\n%s", want, stdout)
		}
	}
	if code, _, _ := runCLI(t, "", "version", "extra"); code != 2 {
		t.Errorf("version extra: exit %d; want 2", code)
	}
}

// TestGoInstall installs the command with the Go toolchain, as a user
// would, and runs it: the binary starts, knows its commit (from the VCS
// stamp) and takes a release build's date from -ldflags -X.
func TestGoInstall(t *testing.T) {
	gobin := t.TempDir()
	cmd := exec.Command("go", "install", "-buildvcs=auto", "-ldflags", "-X main.date=2026-01-02T03:04:05Z", ".")
	cmd.Env = append(os.Environ(), "GOBIN="+gobin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go install ./cmd/portcullis: %v\n%s", err, out)
	}
	bin := filepath.Join(gobin, "portcullis")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	out, err := exec.Command(bin, "version", "--json").Output()
	if err != nil {
		t.Fatalf("portcullis version --json: %v", err)
	}
	var b buildInfo
	if err := json.Unmarshal(out, &b); err != nil {
		t.Fatalf("version --json = %q: %v", out, err)
	}
	if b.Date != "2026-01-02T03:04:05Z" {
		t.Errorf("date = %q; want the -X main.date value", b.Date)
	}
	// With git and a repository, the toolchain stamps the commit; without
	// (a source archive), there is none to report.
	head, gitErr := exec.Command("git", "rev-parse", "HEAD").Output()
	switch want := strings.TrimSpace(string(head)); {
	case gitErr == nil && b.Commit != want:
		t.Errorf("commit = %q; want HEAD %s", b.Commit, want)
	case gitErr != nil && b.Commit != "":
		t.Errorf("commit = %q outside a git checkout; want none", b.Commit)
	}
	if b.Version == "" || b.Version == "(devel)" && gitErr == nil {
		t.Errorf("version = %q; want the module's (pseudo-)version stamped from git", b.Version)
	}
	if out, err := exec.Command(bin, "help").Output(); err != nil || !strings.Contains(string(out), "portcullis version") {
		t.Errorf("portcullis help: %v\n%s", err, out)
	}
}
