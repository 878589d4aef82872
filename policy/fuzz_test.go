package policy_test

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/portcullis/portcullis/policy"
)

// FuzzParse checks that Parse never panics, that a policy it returns passes
// Validate, and that Validate finds nothing left to clean or default in it.
// Seeds are in testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		p, _, err := policy.Parse("fuzz.yaml", data)
		if err != nil {
			if p != nil {
				t.Fatalf("Parse returned a policy with error %v", err)
			}
			return
		}
		again, _, err := policy.Parse("fuzz.yaml", data)
		if err != nil {
			t.Fatalf("Parse succeeded once, then failed: %v", err)
		}
		if _, err := policy.Validate(again); err != nil {
			t.Fatalf("Validate(Parse(data)) = %v; want nil", err)
		}
		if diff := cmp.Diff(p, again); diff != "" {
			t.Fatalf("Validate changed a parsed policy (-parsed +validated):\n%s", diff)
		}
	})
}

// FuzzParseTests checks that ParseTests never panics and that what it
// returns is valid: the policy passes Validate and every request passes
// Call.Validate. Seeds are in testdata/fuzz/FuzzParseTests.
func FuzzParseTests(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		// A test file may name its policy by path; keep the fuzzer away
		// from device and process files, which may block or never end.
		for _, s := range []string{"/dev", "/proc", "/sys"} {
			if bytes.Contains(data, []byte(s)) {
				return
			}
		}
		tf, err := policy.ParseTests("testdata/tests/fuzz_test.yaml", data)
		if err != nil {
			if tf != nil {
				t.Fatalf("ParseTests returned a test file with error %v", err)
			}
			return
		}
		if _, err := policy.Validate(tf.Policy); err != nil {
			t.Fatalf("Validate(ParseTests(data).Policy) = %v; want nil", err)
		}
		for _, c := range tf.Cases {
			if err := c.Request.Validate(); err != nil {
				t.Fatalf("case %q: request.Validate() = %v; want nil", c.Name, err)
			}
		}
	})
}
