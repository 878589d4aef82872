package cmdutil_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/portcullis/portcullis/internal/cmd/cmdutil"
)

// tree is a small command tree with the shapes the conventions care
// about: flags with and without values, a shorthand, a command whose
// flags end at its first argument and one with a parser of its own.
func tree() *cobra.Command {
	root := &cobra.Command{Use: "tool"}
	noop := func(*cobra.Command, []string) {}
	explain := &cobra.Command{Use: "explain", Run: noop}
	explain.Flags().String("policy", "", "")
	explain.Flags().Bool("json", false, "")
	tail := &cobra.Command{Use: "tail", Run: noop}
	tail.Flags().IntP("lines", "n", 10, "")
	tail.Flags().BoolP("follow", "f", false, "")
	tail.Flags().Bool("json", false, "")
	audit := &cobra.Command{Use: "audit"}
	audit.AddCommand(tail)
	exec := &cobra.Command{Use: "exec", Run: noop, Annotations: map[string]string{cmdutil.FlagsFirst: "yes", cmdutil.OwnParser: "--shell"}}
	exec.Flags().String("policy", "", "")
	exec.Flags().Bool("no-wait", false, "")
	exec.Flags().StringP("command", "c", "", "")
	exec.Flags().Bool("shell", false, "")
	approvals := &cobra.Command{Use: "approvals", Run: noop}
	approvals.Flags().Bool("watch", false, "")
	approve := &cobra.Command{Use: "approve", Run: noop}
	root.AddCommand(explain, audit, exec, approvals, approve)
	return root
}

func TestSingleDashLongFlags(t *testing.T) {
	root := tree()
	for _, tc := range []struct{ in, want []string }{
		{[]string{"explain", "-policy", "p.yaml", "{}"}, []string{"explain", "--policy", "p.yaml", "{}"}},
		{[]string{"explain", "-policy=p.yaml", "-json"}, []string{"explain", "--policy=p.yaml", "--json"}},
		{[]string{"audit", "tail", "-n", "5", "-f", "-json"}, []string{"audit", "tail", "-n", "5", "-f", "--json"}},
		{[]string{"explain", "-policy", "-json"}, []string{"explain", "--policy", "-json"}}, // a flag's value is left
		{[]string{"explain", "--", "-policy"}, []string{"explain", "--", "-policy"}},
		{[]string{"exec", "-policy", "p.yaml", "ls", "-policy"}, []string{"exec", "--policy", "p.yaml", "ls", "-policy"}},
		{[]string{"exec", "-c", "-policy", "-no-wait"}, []string{"exec", "-c", "-policy", "--no-wait"}},
		{[]string{"exec", "--shell", "-l", "-c", "-policy"}, []string{"exec", "--shell", "-l", "-c", "-policy"}},
		{[]string{"frobnicate", "-policy"}, []string{"frobnicate", "-policy"}},
	} {
		if got := cmdutil.SingleDashLongFlags(root, tc.in); strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("SingleDashLongFlags(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
}

func TestSuggestions(t *testing.T) {
	root := tree()
	if got := cmdutil.Suggestions(root, "aprove"); strings.Join(got, ",") != "approve" {
		t.Errorf("Suggestions(aprove) = %q; want approve", got)
	}
	msg := cmdutil.UnknownCommandMessage(root, "aprove")
	for _, want := range []string{`unknown command "aprove" for "tool"`, "Did you mean this?\n\tapprove\n", "Run 'tool --help' for usage."} {
		if !strings.Contains(msg, want) {
			t.Errorf("UnknownCommandMessage: %q lacks %q", msg, want)
		}
	}
	if msg := cmdutil.UnknownCommandMessage(root, "zzzzzz"); strings.Contains(msg, "Did you mean") {
		t.Errorf("UnknownCommandMessage(zzzzzz) = %q; want no suggestion", msg)
	}

	approvals, _, err := root.Find([]string{"approvals"})
	if err != nil {
		t.Fatal(err)
	}
	if got := cmdutil.FlagSuggestions(approvals, "wat"); strings.Join(got, ",") != "watch" {
		t.Errorf("FlagSuggestions(wat) = %q; want watch", got)
	}
	err = approvals.ParseFlags([]string{"--wach"})
	var ne *pflag.NotExistError
	if !errors.As(err, &ne) {
		t.Fatalf("ParseFlags(--wach) = %v; want a NotExistError", err)
	}
	msg = cmdutil.FlagErrorMessage(approvals, err)
	for _, want := range []string{"unknown flag: --wach", "Did you mean this?\n\t--watch\n", "Run 'tool approvals --help' for usage."} {
		if !strings.Contains(msg, want) {
			t.Errorf("FlagErrorMessage: %q lacks %q", msg, want)
		}
	}
}
