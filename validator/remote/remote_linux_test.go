package remote_test

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// The API key reaches the program on its standard input only: every
// process of the same user can read another's arguments and environment.
func TestKeyIsNotInTheProgramsArgumentsOrEnvironment(t *testing.T) {
	m := newModel(t, prog, &fakeAPI{}, 0)
	if _, err := m.Ask(t.Context(), ask("start")); err != nil {
		t.Fatal(err)
	}
	pid := m.Pid()
	if pid == 0 {
		t.Fatal("no program runs after a question")
	}
	for _, f := range []string{"environ", "cmdline"} {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/" + f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), testKey) {
			t.Errorf("/proc/PID/%s of the provider program holds the API key", f)
		}
	}
}
