package main

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// dispatchedCommands reads the command names of run's switch in main.go.
func dispatchedCommands(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Name.Name != "run" {
			continue
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			sw, ok := n.(*ast.SwitchStmt)
			if !ok {
				return true
			}
			if id, ok := sw.Tag.(*ast.Ident); !ok || id.Name != "cmd" {
				return true
			}
			for _, s := range sw.Body.List {
				for _, e := range s.(*ast.CaseClause).List {
					lit, ok := e.(*ast.BasicLit)
					if !ok {
						continue
					}
					name, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					if !strings.HasPrefix(name, "-") {
						names = append(names, name)
					}
				}
			}
			return false
		})
	}
	if len(names) < 10 {
		t.Fatalf("found %d commands in run's switch in main.go; the test no longer reads it right", len(names))
	}
	slices.Sort(names)
	return names
}

func TestCompletionCoversEveryCommand(t *testing.T) {
	got := commandNames()
	slices.Sort(got)
	if diff := cmp.Diff(dispatchedCommands(t), got); diff != "" {
		t.Errorf("completion commands differ from run's dispatch in main.go (-dispatch +completion):\n%s", diff)
	}
}

// TestCompletionSubcommands checks the subcommands against the commands'
// own error messages for an unknown one.
func TestCompletionSubcommands(t *testing.T) {
	want := regexp.MustCompile(`\(want ([^)]*)\)`)
	for _, c := range completionCommands() {
		if c.name != "policy" && c.name != "audit" {
			continue
		}
		code, _, stderr := runCLI(t, "", c.name, "no-such-subcommand")
		m := want.FindStringSubmatch(stderr)
		if code != 2 || m == nil {
			t.Fatalf("%s no-such-subcommand: exit %d, %q; want exit 2 listing the subcommands", c.name, code, stderr)
		}
		subs := strings.FieldsFunc(strings.ReplaceAll(m[1], " or ", ", "), func(r rune) bool { return r == ',' || r == ' ' })
		if !slices.Equal(subs, c.subs) {
			t.Errorf("%s: completion offers %v; the command takes %v", c.name, c.subs, subs)
		}
	}
}

func TestCompletionFlagsComeFromTheFlagSets(t *testing.T) {
	flags, keys := completionTable(context.Background())
	for _, k := range keys {
		if k != "version" && k != "policy show-default" && len(flags[k].all) == 0 { // these two take no flags
			t.Errorf("%s: no flags read from its -h output", k)
		}
	}
	for k, want := range map[string][]string{
		"policy replay": {"--policy", "--since", "--until", "--json", "--state", "--store"},
		"policy test":   {"-v"},
		"audit tail":    {"-n", "-f"},
		"hook install":  {"--policy"},
		"version":       {"--json"},
	} {
		for _, f := range want {
			if !slices.Contains(flags[k].all, f) {
				t.Errorf("%s: flags %v lack %s", k, flags[k].all, f)
			}
		}
	}
	if !slices.Contains(flags["policy replay"].valued, "--since") || slices.Contains(flags["policy replay"].valued, "--json") {
		t.Errorf("policy replay: valued flags %v; want --since and not --json", flags["policy replay"].valued)
	}
}

// TestCompletionBash loads the bash script into a real bash and asks it
// for completions.
func TestCompletionBash(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatalf("bash is needed to test the bash completion: %v", err)
	}
	code, script, stderr := runCLI(t, "", "completion", "bash")
	if code != 0 {
		t.Fatalf("completion bash: exit %d: %s", code, stderr)
	}
	path := filepath.Join(t.TempDir(), "portcullis.bash")
	if err := os.WriteFile(path, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		words []string
		want  string
	}{
		{[]string{""}, strings.Join(commandNames(), " ")},
		{[]string{"pol"}, "policy"},
		{[]string{"policy", ""}, "lint test diff replay show-default"},
		{[]string{"policy", "replay", "--s"}, "--since --state --store"},
		{[]string{"policy", "test", "-"}, "-v"},
		{[]string{"policy", "replay", "--policy", "--s"}, ""}, // a value: file names
		{[]string{"audit", "verify", "--"}, "--expect --json --state --store --witness --witness-token-file"},
		{[]string{"hook", ""}, "claude-code codex gemini install"},
		{[]string{"hook", "install", "--p"}, "--policy --project"},
		{[]string{"exec", "--", "--p"}, ""}, // the command's own words
		{[]string{"completion", "z"}, "zsh"},
		{[]string{"version", "-"}, "--json"},
	} {
		words := append([]string{"portcullis"}, tc.words...)
		quoted := make([]string, len(words))
		for i, w := range words {
			quoted[i] = strconv.Quote(w)
		}
		prog := "source " + strconv.Quote(path) + "\nCOMP_WORDS=(" + strings.Join(quoted, " ") + ")\nCOMP_CWORD=" +
			strconv.Itoa(len(words)-1) + "\n_portcullis\necho \"${COMPREPLY[*]}\"\n"
		out, err := exec.Command(bash, "--norc", "--noprofile", "-c", prog).CombinedOutput()
		if err != nil {
			t.Fatalf("bash: %v\n%s", err, out)
		}
		if got := strings.TrimSpace(string(out)); got != tc.want {
			t.Errorf("completing %q = %q; want %q", strings.Join(tc.words, " "), got, tc.want)
		}
	}
}

func TestCompletionZshAndFish(t *testing.T) {
	for _, shell := range []string{"zsh", "fish"} {
		code, script, stderr := runCLI(t, "", "completion", shell)
		if code != 0 {
			t.Fatalf("completion %s: exit %d: %s", shell, code, stderr)
		}
		for _, name := range commandNames() {
			if !strings.Contains(script, name) {
				t.Errorf("%s script lacks command %q", shell, name)
			}
		}
		for _, want := range map[string][]string{
			"zsh":  {"#compdef portcullis", "'policy replay') flags=(", "--since", "compdef _portcullis portcullis"},
			"fish": {"complete -c portcullis -n '__fish_seen_subcommand_from policy; and __fish_seen_subcommand_from replay' -l since -r -F", "-s v"},
		}[shell] {
			if !strings.Contains(script, want) {
				t.Errorf("%s script lacks %q", shell, want)
			}
		}
	}
	if code, _, stderr := runCLI(t, "", "completion", "powershell"); code != 2 || !strings.Contains(stderr, "unknown shell") {
		t.Errorf("completion powershell: exit %d, %q; want 2 and unknown shell", code, stderr)
	}
}
