package policy

import (
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// The package's regexps compile on first use. TestRegexpsFirstUse runs
// the first use in a new process of this test binary, from several
// goroutines at once (the race detector watches them under -race): the
// errors that need the regexps — a YAML error's line, an API key variable
// that is not a variable name — are reported as they are once compiled.
func TestRegexpsFirstUse(t *testing.T) {
	if os.Getenv("PORTCULLIS_POLICY_FIRST_USE") == "1" {
		regexpsFirstUse(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestRegexpsFirstUse$", "-test.count", "1", "-test.v")
	cmd.Env = append(os.Environ(), "PORTCULLIS_POLICY_FIRST_USE=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "first use: ok") {
		t.Fatalf("the first use in a new process: %v\n%s", err, out)
	}
}

func regexpsFirstUse(t *testing.T) {
	cases := map[string]string{
		"version: 1: 2\n": "bad.yaml:1: malformed YAML: mapping values are not allowed",
		"version: 1\nvalidator: {provider: anthropic, model: m, apiKeyEnv: sk-ant-123}\n": `bad.yaml:2: validator.apiKeyEnv: "sk-ant-123" is not an environment variable name`,
	}
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for i := 0; i < 8; i++ {
		for src, want := range cases {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _, err := Parse("bad.yaml", []byte(src))
				if err == nil || !strings.Contains(err.Error(), want) {
					errs <- "Parse(" + src + ") = " + errString(err) + "; want " + want
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if !t.Failed() {
		t.Log("first use: ok")
	}
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}
