package policy_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/portcullis/portcullis/policy"
)

const policyDoc = "../docs/POLICY.md"

// TestPolicyDocCoversEveryKey checks that docs/POLICY.md names every key
// the parser accepts.
func TestPolicyDocCoversEveryKey(t *testing.T) {
	doc, err := os.ReadFile(policyDoc)
	if err != nil {
		t.Fatalf("read %s: %v", policyDoc, err)
	}
	// The words of the document's code spans: `endpoint`, `rules[].pattern`,
	// `[{name: X, wantedLevel: Y}]`.
	words := map[string]bool{}
	for _, span := range codeSpan.FindAllString(string(doc), -1) {
		for _, w := range word.FindAllString(span, -1) {
			words[w] = true
		}
	}
	for mapping, keys := range policy.Keys {
		for _, k := range keys {
			if !words[k] {
				t.Errorf("%s does not document the %s key `%s`", policyDoc, mapping, k)
			}
		}
	}
}

var (
	codeSpan = regexp.MustCompile("`[^`\n]+`")
	word     = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)
)

var docFile = regexp.MustCompile("(?s)<!-- file: (\\S+) -->\n```yaml\n(.*?)```\n")

// TestPolicyDocExamplesAreTheTestedFiles checks that each YAML block of
// docs/POLICY.md marked with a file comment is that file, byte for byte,
// and that the worked example loads.
func TestPolicyDocExamplesAreTheTestedFiles(t *testing.T) {
	doc, err := os.ReadFile(policyDoc)
	if err != nil {
		t.Fatalf("read %s: %v", policyDoc, err)
	}
	blocks := docFile.FindAllSubmatch(doc, -1)
	if len(blocks) < 2 {
		t.Fatalf("%s has %d file blocks; want the worked example's two", policyDoc, len(blocks))
	}
	for _, b := range blocks {
		path := strings.TrimPrefix(string(b[1]), "policy/")
		want, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%s names %s: %v", policyDoc, b[1], err)
			continue
		}
		if string(b[2]) != string(want) {
			t.Errorf("%s: the block for %s differs from the file", policyDoc, b[1])
		}
	}
	tf, err := policy.LoadTests("testdata/example/policy_test.yaml")
	if err != nil {
		t.Fatalf("LoadTests(worked example) = %v", err)
	}
	if len(tf.Warnings) != 0 || len(tf.Cases) != 6 {
		t.Errorf("LoadTests(worked example) = %d warnings, %d cases; want 0 and 6", len(tf.Warnings), len(tf.Cases))
	}
}
