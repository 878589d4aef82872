package policy_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/portcullis/portcullis/policy"
)

// The built-in default policy loads without a warning, and the copy under
// examples/default (which CI lints with --strict and tests with its
// policy_test.yaml) is the embedded file byte for byte.
func TestDefaultPolicy(t *testing.T) {
	pol, warns, err := policy.LoadDefault()
	if err != nil {
		t.Fatal(err)
	}
	if len(warns) != 0 {
		t.Errorf("warnings: %v", warns)
	}
	if pol.Source != "" || pol.Hash == "" || len(pol.Tools) == 0 {
		t.Errorf("Source %q, Hash %q, %d tools", pol.Source, pol.Hash, len(pol.Tools))
	}
	ex, err := os.ReadFile("../examples/default/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ex, policy.DefaultYAML()) {
		t.Error("examples/default/policy.yaml differs from policy/default.yaml: copy policy/default.yaml over it")
	}
}
