package hook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/portcullis/portcullis/hook"
)

// FuzzHook feeds arbitrary bytes to every host's hook. Whatever the input,
// the answer is one JSON object and the exit status 0 (decided) or 2 (a
// deny); a failed hook never allows, and an input that is not a
// well-formed event is never allowed.
//
//	go test ./hook -run XX -fuzz FuzzHook -fuzztime 1m
func FuzzHook(f *testing.F) {
	seeds, err := filepath.Glob(filepath.Join("testdata", "golden", "*", "*.json"))
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	fx := map[string]*hook.Handler{}
	for _, host := range hook.Hosts {
		fix := newFixture(f, policyFor[host.Name()])
		fx[host.Name()] = fix.handler(f, hook.Options{})
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		for _, host := range hook.Hosts {
			var out, errOut bytes.Buffer
			code := fx[host.Name()].Run(context.Background(), host, bytes.NewReader(input), &out, &errOut)
			var answer map[string]any
			if err := json.Unmarshal(out.Bytes(), &answer); err != nil {
				t.Fatalf("%s: answer %q is not a JSON object: %v", host.Name(), out.Bytes(), err)
			}
			allowed := bytes.Contains(out.Bytes(), []byte(`"allow"`))
			switch code {
			case 0:
				if allowed && !json.Valid(input) {
					t.Fatalf("%s: input that is not JSON was allowed: %q → %s", host.Name(), input, out.Bytes())
				}
			case hook.ExitBlock:
				if allowed || !bytes.Contains(out.Bytes(), []byte(`deny`)) {
					t.Fatalf("%s: exit 2 without a deny: %s", host.Name(), out.Bytes())
				}
			default:
				t.Fatalf("%s: exit %d; want 0 or 2", host.Name(), code)
			}
		}
	})
}
