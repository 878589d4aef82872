package main

import (
	"bytes"
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/portcullis/portcullis/internal/cmd/cmdutil"
)

// TestTopCommands: the table the root is built from names each command as
// its constructor does, so that a per-call root finds the command its
// arguments name.
func TestTopCommands(t *testing.T) {
	env := processEnv()
	var names []string
	for _, tc := range topCommands {
		if got := tc.build(env).Name(); got != tc.name {
			t.Errorf("topCommands names %q the command %q", tc.name, got)
		}
		names = append(names, tc.name)
	}
	var tree []string
	for _, c := range newRootCmd(env).Commands() {
		tree = append(tree, c.Name())
	}
	slices.Sort(names)
	if !slices.Equal(tree, names) {
		t.Errorf("the tree's commands: %v; topCommands: %v", tree, names)
	}
	for _, name := range []string{"hook", "exec"} {
		root := newRootCmdFor(env, []string{name, "--help"})
		if cs := root.Commands(); len(cs) != 1 || cs[0].Name() != name {
			t.Errorf("the root built for %s has %d commands; want %s only", name, len(cs), name)
		}
	}
	if got := len(newRootCmdFor(env, []string{"decide"}).Commands()); got != len(topCommands) {
		t.Errorf("the root built for decide has %d commands; want all %d", got, len(topCommands))
	}
}

// TestPerCallRootSameAnswers: the hooks and exec, run from the root that
// holds them only, answer exactly as from the whole tree — help, usage
// errors, bad flags, single-dash long flags, refusals.
func TestPerCallRootSameAnswers(t *testing.T) {
	env := processEnv()
	for _, args := range [][]string{
		{"hook", "--help"},
		{"hook"},
		{"hook", "nope"},
		{"hook", "claud-code"},
		{"hook", "install", "--help"},
		{"hook", "claude-code", "--help"},
		{"hook", "gemini", "-h"},
		{"hook", "claude-code", "--bogus"},
		{"hook", "codex", "extra"},
		{"hook", "claude-code", "-gateway", "http://127.0.0.1:1", "-token-file", "/nonexistent/agent.token"},
		{"hook", "claude-code", "--gateway", "http://127.0.0.1:1"},
		{"exec", "--help"},
		{"exec", "--bogus"},
		{"exec"},
	} {
		var outs [2]string
		for i, full := range []bool{true, false} {
			root := newRootCmdFor(env, args)
			if full {
				root = newRootCmd(env)
			}
			var out, errb bytes.Buffer
			err := cmdutil.Execute(context.Background(), root, args, strings.NewReader(""), &out, &errb)
			code := exitCode(err, &errb)
			if out.Len()+errb.Len() == 0 {
				t.Errorf("portcullis %s: no output", strings.Join(args, " "))
			}
			outs[i] = "exit " + strconv.Itoa(code) + "\nstdout:\n" + out.String() + "\nstderr:\n" + errb.String()
		}
		if outs[0] != outs[1] {
			t.Errorf("portcullis %s:\n--- the whole tree\n%s\n--- the per-call root\n%s", strings.Join(args, " "), outs[0], outs[1])
		}
	}
}
