package main

import (
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/portcullis/portcullis/internal/buildinfo"
	"gopkg.in/yaml.v3"
)

func TestVersion(t *testing.T) {
	code, stdout, stderr := runCLI(t, "", "version", "--json")
	if code != 0 {
		t.Fatalf("version --json: exit %d: %s", code, stderr)
	}
	var b buildinfo.Info
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
	var b buildinfo.Info
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
	// The provider program installs beside it, as the README says.
	cmd = exec.Command("go", "install", "../portcullis-provider")
	cmd.Env = append(os.Environ(), "GOBIN="+gobin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go install ./cmd/portcullis-provider: %v\n%s", err, out)
	}
	provider := filepath.Join(gobin, "portcullis-provider")
	if runtime.GOOS == "windows" {
		provider += ".exe"
	}
	out, err = exec.Command(provider, "--help").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "The Portcullis gateway starts this program") {
		t.Errorf("portcullis-provider --help = %v\n%s; want exit status 2 and its usage", err, out)
	}
}

// TestGoreleaserConfig checks .goreleaser.yaml against the code: every
// platform of the release, static builds, -X targets that exist, and
// archive files that exist (or that its hook generates).
func TestGoreleaserConfig(t *testing.T) {
	data, err := os.ReadFile("../../.goreleaser.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Version int
		Before  struct{ Hooks []string }
		Builds  []struct {
			Main    string
			Binary  string
			Env     []string
			Goos    []string
			Goarch  []string
			Ldflags []string
		}
		Archives []struct {
			Formats         []string
			FormatOverrides []struct {
				Goos    string
				Formats []string
			} `yaml:"format_overrides"`
			Files []string
		}
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatalf(".goreleaser.yaml: %v", err)
	}
	if cfg.Version != 2 || len(cfg.Builds) != 2 || len(cfg.Archives) != 1 {
		t.Fatalf(".goreleaser.yaml: version %d, %d builds, %d archives; want version 2, two builds (portcullis and portcullis-provider), one archive", cfg.Version, len(cfg.Builds), len(cfg.Archives))
	}
	for i, name := range []string{"portcullis", "portcullis-provider"} {
		b := cfg.Builds[i]
		if b.Main != "./cmd/"+name || b.Binary != name || !slices.Contains(b.Env, "CGO_ENABLED=0") {
			t.Errorf("build %d = %+v; want ./cmd/%s as %s with CGO_ENABLED=0", i, b, name, name)
		}
		if !cmp.Equal(b.Goos, []string{"linux", "darwin", "windows"}) || !cmp.Equal(b.Goarch, []string{"amd64", "arm64"}) {
			t.Errorf("%s: platforms %v × %v; want linux, darwin, windows × amd64, arm64", name, b.Goos, b.Goarch)
		}
	}
	b := cfg.Builds[0]
	vars := packageStringVars(t, "version.go")
	targets := regexp.MustCompile(`-X main\.(\w+)=`).FindAllStringSubmatch(strings.Join(b.Ldflags, " "), -1)
	if len(targets) != 3 {
		t.Errorf("ldflags %v set %d variables; want version, commit and date", b.Ldflags, len(targets))
	}
	for _, m := range targets {
		if !vars[m[1]] {
			t.Errorf("ldflags set main.%s, which is not a string variable of version.go", m[1])
		}
	}
	a := cfg.Archives[0]
	if len(a.FormatOverrides) != 1 || a.FormatOverrides[0].Goos != "windows" || !slices.Equal(a.FormatOverrides[0].Formats, []string{"zip"}) {
		t.Errorf("format overrides %+v; want zip for windows", a.FormatOverrides)
	}
	for _, f := range a.Files {
		if f == "completions/*" {
			if !strings.Contains(strings.Join(cfg.Before.Hooks, "\n"), "./cmd/portcullis completion") {
				t.Errorf("the archives take completions/*, but no before hook generates them")
			}
			continue
		}
		matches, err := fs.Glob(os.DirFS("../.."), strings.Replace(f, "**/", "*/", 1))
		if err != nil || len(matches) == 0 {
			t.Errorf("archive file %q matches nothing in the repository (%v)", f, err)
		}
	}
}

// packageStringVars names the package-level string variables of a file.
func packageStringVars(t *testing.T, file string) map[string]bool {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]bool{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.VAR {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); ok && id.Name == "string" {
				for _, n := range vs.Names {
					vars[n.Name] = true
				}
			}
		}
	}
	return vars
}
