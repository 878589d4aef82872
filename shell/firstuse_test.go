package shell

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// The command handlers are built on first use (loadHandlers), not when
// the package is initialised. TestHandlersFirstUse runs the first use in a
// new process of this test binary, so that the tables are really empty
// when it starts: several goroutines classify at once (the race detector
// watches them when the test runs under -race), and every one of them must
// see the whole table — a command judged by a handler registered early,
// one registered late, a safe name, a safe name with a handler of its own,
// and a package tool's alias.
func TestHandlersFirstUse(t *testing.T) {
	if os.Getenv("PORTCULLIS_SHELL_FIRST_USE") == "1" {
		firstUse(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestHandlersFirstUse$", "-test.count", "1", "-test.v")
	cmd.Env = append(os.Environ(), "PORTCULLIS_SHELL_FIRST_USE=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "first use: ok") {
		t.Fatalf("the first use in a new process: %v\n%s", err, out)
	}
}

func firstUse(t *testing.T) {
	if handlers != nil || safeSet != nil {
		t.Fatal("the handlers were built before their first use")
	}
	c, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"kubectl delete namespace prod": "", // registerCloud, the first
		"systemctl stop sshd":           "", // registerSystem, the last
		"ls -la":                        "safe",
		"fd -x rm -rf {}":               "", // a safe name whose own handler wins
		"apt-get install curl":          "", // packageTools' alias of apt
		"git status":                    "safe",
	}
	// What each command is judged in this process once the tables are
	// built, sequentially, to compare the concurrent first answers with.
	var mu sync.Mutex
	got := map[string][]string{}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		for cmd := range want {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cl := c.Classify(cmd)
				mu.Lock()
				got[cmd] = append(got[cmd], fmt.Sprint(cl.Category, cl.RiskScore, cl.Reasons))
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	if len(handlers) < 600 {
		t.Fatalf("after the first use: %d handlers", len(handlers))
	}
	for _, n := range safeNames {
		if _, ok := safeSet[n]; !ok || handlers[n] == nil {
			t.Fatalf("after the first use: the safe name %q is missing", n)
		}
	}
	for cmd, cat := range want {
		cl := c.Classify(cmd)
		again := fmt.Sprint(cl.Category, cl.RiskScore, cl.Reasons)
		for _, g := range got[cmd] {
			if g != again {
				t.Errorf("%q at first use: %s; afterwards: %s", cmd, g, again)
			}
		}
		switch {
		case cat == "safe" && cl.Category != Safe:
			t.Errorf("%q: %s; want safe", cmd, again)
		case cat == "" && cl.Category == Safe:
			t.Errorf("%q: %s; want a handler to judge it not safe", cmd, again)
		}
	}
	if !t.Failed() {
		t.Log("first use: ok")
	}
}
