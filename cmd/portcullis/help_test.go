package main

import (
	"strings"
	"testing"

	"github.com/portcullis/portcullis/internal/cmd/cmdutil"
	"github.com/spf13/cobra"
)

// everyCommand is the path of every command of the tree, the root first.
func everyCommand() [][]string {
	var out [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		out = append(out, path)
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" {
				continue
			}
			walk(sub, append(append([]string(nil), path...), sub.Name()))
		}
	}
	root := newRootCmd(processEnv())
	root.InitDefaultCompletionCmd()
	walk(root, nil)
	return out
}

// TestHelpGolden: --help of every command and group, on stdout, exit 0.
func TestHelpGolden(t *testing.T) {
	cmds := everyCommand()
	if len(cmds) < 30 {
		t.Fatalf("found %d commands; the tree walk is broken", len(cmds))
	}
	for _, path := range cmds {
		name := "help_" + strings.Join(append([]string{"portcullis"}, path...), "_")
		t.Run(name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, "", append(path, "--help")...)
			if code != 0 || stderr != "" {
				t.Fatalf("%v --help: exit %d, stderr %q; want 0 and nothing", path, code, stderr)
			}
			if strings.Contains(stdout, "\n  -policy") || strings.Contains(stdout, " -config") {
				t.Errorf("single-dash long flag listed:\n%s", stdout)
			}
			golden(t, name, stdout)
		})
	}
}

// TestSuggestions: a misspelled command or flag is bad input, told in a
// few lines with what was probably meant.
func TestSuggestions(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"suggest_command", []string{"aprove", "x"}},
		{"suggest_subcommand", []string{"policy", "lnt", "p.yaml"}},
		{"suggest_audit_subcommand", []string{"audit", "tial"}},
		{"suggest_flag", []string{"serve", "--conf", "x.yaml"}},
		{"suggest_flag_prefix", []string{"approvals", "--wat"}},
		{"unknown_flag", []string{"version", "--frobnicate"}},
		{"unknown_shorthand", []string{"audit", "tail", "-x"}},
		{"missing_flag_value", []string{"explain", "--policy"}},
		{"group_without_command", []string{"audit"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, "", tc.args...)
			if code != 2 || stdout != "" {
				t.Fatalf("%v: exit %d, stdout %q; want 2 and nothing on stdout", tc.args, code, stdout)
			}
			if tc.name != "group_without_command" && strings.Count(stderr, "\n") > 8 {
				t.Errorf("%v: %d lines on stderr; want a short message:\n%s", tc.args, strings.Count(stderr, "\n"), stderr)
			}
			golden(t, tc.name, stderr)
		})
	}
}

// TestSingleDashLongFlags: the long flags earlier versions took with one
// dash (-policy FILE, -json, -n 5) still work, and nothing after "--", no
// flag's value and no exec command is rewritten.
func TestSingleDashLongFlags(t *testing.T) {
	code, stdout, stderr := runCLI(t, "", "explain", `{"tool": "create_element"}`, "-policy", "testdata/policy.yaml", "-json")
	if code != 0 || len(decisions(t, strings.ReplaceAll(stdout, "\n", ""))) != 1 {
		t.Fatalf("explain -policy FILE -json: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if code, stdout, stderr := runCLI(t, "", "policy", "test", "-v", "testdata/pass_test.yaml"); code != 0 || !strings.Contains(stdout, "PASS") {
		t.Fatalf("policy test -v: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if code, _, stderr := runCLI(t, "", "policy", "lint", "-strict=true", "testdata/lint_warnings.yaml"); code != 1 {
		t.Fatalf("policy lint -strict=true: exit %d, stderr %q; want 1", code, stderr)
	}
	root := newRootCmd(processEnv())
	for _, tc := range []struct{ in, want []string }{
		{[]string{"explain", "-policy", "p.yaml", "{}"}, []string{"explain", "--policy", "p.yaml", "{}"}},
		{[]string{"audit", "tail", "-n", "5", "-f", "-json"}, []string{"audit", "tail", "-n", "5", "-f", "--json"}},
		{[]string{"mcp", "-policy=p.yaml", "--", "npx", "-policy", "x"}, []string{"mcp", "--policy=p.yaml", "--", "npx", "-policy", "x"}},
		{[]string{"exec", "-policy", "p.yaml", "ls", "-policy"}, []string{"exec", "--policy", "p.yaml", "ls", "-policy"}},
		{[]string{"exec", "-c", "-policy", "-no-wait"}, []string{"exec", "-c", "-policy", "--no-wait"}},
		{[]string{"exec", "--shell", "-l", "-c", "-policy"}, []string{"exec", "--shell", "-l", "-c", "-policy"}},
		{[]string{"deny", "apr_1", "-reason", "-json"}, []string{"deny", "apr_1", "--reason", "-json"}},
		{[]string{"classify", "-policy", "p.yaml", "--", "rm", "-state"}, []string{"classify", "--policy", "p.yaml", "--", "rm", "-state"}},
		{[]string{"frobnicate", "-policy"}, []string{"frobnicate", "-policy"}},
	} {
		if got := cmdutil.SingleDashLongFlags(root, tc.in); strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("cmdutil.SingleDashLongFlags(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
}

// TestCompletion: cobra writes the completion scripts from the command
// tree, for bash, zsh, fish and PowerShell; and the tree completes
// commands and flags.
func TestCompletion(t *testing.T) {
	for shell, want := range map[string]string{
		"bash":       "__start_portcullis",
		"zsh":        "#compdef portcullis",
		"fish":       "complete -c portcullis",
		"powershell": "Register-ArgumentCompleter",
	} {
		code, stdout, stderr := runCLI(t, "", "completion", shell)
		if code != 0 || !strings.Contains(stdout, want) {
			t.Errorf("completion %s: exit %d, stderr %q; output lacks %q", shell, code, stderr, want)
		}
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"__complete", "po"}, []string{"policy"}},
		{[]string{"__complete", "policy", ""}, []string{"lint", "test", "diff", "replay", "show-default"}},
		{[]string{"__complete", "audit", "tail", "--"}, []string{"--lines", "--follow", "--state", "--store"}},
		{[]string{"__complete", "hook", ""}, []string{"claude-code", "codex", "gemini", "install"}},
		{[]string{"__complete", "hook", "install", ""}, []string{"claude-code", "codex"}},
		{[]string{"__complete", "serve", "--con"}, []string{"--config"}},
	} {
		code, stdout, stderr := runCLI(t, "", tc.args...)
		if code != 0 {
			t.Errorf("%v: exit %d, stderr %q", tc.args, code, stderr)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(stdout, w) {
				t.Errorf("%v: completions %q lack %q", tc.args, stdout, w)
			}
		}
	}
}
