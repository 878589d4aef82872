package shell_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/shell"
)

func TestClassifyLines(t *testing.T) {
	c, err := shell.New(shell.Options{})
	if err != nil {
		t.Fatal(err)
	}
	in := "{\"command\": \"git status\"}\n\n{\"command\": \"rm -r -f /\"}\r\n{\"command\": \"ls -l\"}"
	var out bytes.Buffer
	if err := c.ClassifyLines(context.Background(), strings.NewReader(in), &out); err != nil {
		t.Fatalf("ClassifyLines = %v; want nil", err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	var got []shell.Category
	for _, l := range lines {
		var cl shell.Classification
		if err := json.Unmarshal([]byte(l), &cl); err != nil {
			t.Fatalf("line %q is not a classification: %v", l, err)
		}
		got = append(got, cl.Category)
	}
	if want := []shell.Category{shell.Safe, shell.Dangerous, shell.Safe}; !slicesEqual(got, want) {
		t.Errorf("ClassifyLines categories = %v; want %v", got, want)
	}
}

func slicesEqual[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestClassifyLinesRefusesABadLine(t *testing.T) {
	c, err := shell.New(shell.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, line, want string }{
		{"not an object", `"ls"`, `line 2: not a classify request (want {"command": "..."}): json: cannot unmarshal string into Go value of type shell.classifyRequest`},
		{"not a string", `{"command": 3}`, `line 2: not a classify request (want {"command": "..."}): json: cannot unmarshal number into Go struct field classifyRequest.command of type string`},
		{"unknown field", `{"command": "ls", "cwd": "/"}`, `line 2: not a classify request (want {"command": "..."}): json: unknown field "cwd"`},
		{"missing command", `{}`, `line 2: missing "command" (want {"command": "..."})`},
		{"trailing data", `{"command": "ls"} {}`, `line 2: unexpected data after the request object`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := c.ClassifyLines(context.Background(), strings.NewReader("{\"command\": \"ls\"}\n"+tc.line+"\n{\"command\": \"ls\"}\n"), &out)
			if err == nil || err.Error() != tc.want {
				t.Errorf("ClassifyLines(%s) = %v; want %s", tc.line, err, tc.want)
			}
			if n := strings.Count(out.String(), "\n"); n != 1 {
				t.Errorf("ClassifyLines(%s) wrote %d classifications; want the one before the bad line", tc.line, n)
			}
		})
	}
}

func TestOptionsWithPolicy(t *testing.T) {
	dir := t.TempDir()
	doc, rules := filepath.Join(dir, "permissions.md"), filepath.Join(dir, "rules.md")
	pol := &portcullis.Policy{
		Source:         "policy.yaml",
		PolicyDocument: doc,
		Validator:      &portcullis.ValidatorConfig{Rules: rules},
		Shell:          portcullis.ShellPolicy{Rules: []portcullis.ShellRule{{Pattern: [][]string{{"git"}, {"push"}}, Decision: portcullis.ShellDeny, Justification: "no pushes"}}},
	}
	c, err := shell.New(shell.Options{ProtectedPaths: []string{filepath.Join(dir, "state")}}.WithPolicy(pol))
	if err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		command string
		want    shell.Category
	}{
		{"git push origin main", shell.Blocked},
		{"rm " + filepath.Join(wd, "policy.yaml"), shell.Blocked},
		{"echo x > " + doc, shell.Blocked},
		{"cat /dev/null > " + rules, shell.Blocked},
		{"touch " + filepath.Join(dir, "state", "x"), shell.Blocked},
		{"git status", shell.Safe},
	} {
		if got := c.Classify(tc.command); got.Category != tc.want {
			t.Errorf("Classify(%q) = %s %v; want %s", tc.command, got.Category, got.Reasons, tc.want)
		}
	}
}
