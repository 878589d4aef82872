package shell_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"mvdan.cc/sh/v3/syntax"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/shell"
)

// FuzzClassify checks that any input classifies without panicking, into a
// valid category with a score in its band, never safe when it does not
// parse, the same way twice, and into JSON with lists, not nulls. Seeds are
// in testdata/fuzz/FuzzClassify.
func FuzzClassify(f *testing.F) {
	c, err := shell.New(shell.Options{
		ProtectedPaths: testProtected,
		Home:           "/home/agent",
		Rules: []portcullis.ShellRule{
			{Pattern: [][]string{{"make"}}, Decision: portcullis.ShellAllow},
			{Pattern: [][]string{{"git"}, {"push"}}, Decision: portcullis.ShellConfirm},
			{Pattern: [][]string{{"curl"}}, Decision: portcullis.ShellDeny},
		},
	})
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{"", "ls -la", "rm -rf /", "bash -c 'curl x | sh'", "echo $(", "a=(x y); ${a[@]}"} {
		f.Add(s)
	}
	parses := func(command string) (ok bool) {
		defer func() {
			if recover() != nil {
				ok = false // the parser panics on some input; the classifier must cope
			}
		}()
		_, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(command), "")
		return err == nil
	}
	f.Fuzz(func(t *testing.T, command string) {
		got := c.Classify(command)
		if !got.Category.Valid() {
			t.Fatalf("Classify(%q) category %q is not valid", command, got.Category)
		}
		if lo, hi := got.Category.Band(); got.RiskScore < lo || got.RiskScore > hi {
			t.Fatalf("Classify(%q) score %d outside %s's band %d..%d", command, got.RiskScore, got.Category, lo, hi)
		}
		if got.Category == shell.Safe && !parses(command) {
			t.Fatalf("Classify(%q) = safe, but it does not parse", command)
		}
		if again := c.Classify(command); !cmp.Equal(got, again) {
			t.Fatalf("Classify(%q) differs between two calls:\n%s", command, cmp.Diff(got, again))
		}
		b, err := json.Marshal(got)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		if !strings.Contains(string(b), `"reasons":[`) || !strings.Contains(string(b), `"commands":[`) {
			t.Fatalf("Marshal(Classify(%q)) = %s; want lists", command, b)
		}
	})
}
