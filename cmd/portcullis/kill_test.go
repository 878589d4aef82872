package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/sqlite"
)

// mainArgsEnv makes the test binary run the command itself (with the JSON
// array of arguments it holds) instead of the tests, so a test can start
// the real command as a child process and kill it.
const mainArgsEnv = "PORTCULLIS_TEST_MAIN_ARGS"

func TestMain(m *testing.M) {
	if os.Getenv(upstreamEnv) == "1" {
		os.Exit(runTestUpstream())
	}
	if raw := os.Getenv(mainArgsEnv); raw != "" {
		var args []string
		if err := json.Unmarshal([]byte(raw), &args); err != nil {
			fmt.Fprintln(os.Stderr, "bad", mainArgsEnv, err)
			os.Exit(2)
		}
		os.Exit(exitCode(run(context.Background(), args, os.Stdin, os.Stdout, os.Stderr), os.Stderr))
	}
	os.Exit(m.Run())
}

// TestKillMidLoadLosesNoDecision kills `portcullis decide --state` with
// SIGKILL while it decides a stream of calls: every decision it had
// answered (a caller would have forwarded the allowed ones) has its audit
// row, and the log still verifies: with the default durability and with
// the store URL's sync=process (commits in the write-ahead log, no fsync).
func TestKillMidLoadLosesNoDecision(t *testing.T) {
	t.Run("full", func(t *testing.T) { killMidLoad(t, "") })
	t.Run("process", func(t *testing.T) { killMidLoad(t, "?sync=process") })
}

func killMidLoad(t *testing.T, query string) {
	dir := filepath.Join(t.TempDir(), "state")
	args, err := json.Marshal([]string{"decide", "--policy", "testdata/policy.yaml", "--state", dir, "--store", "sqlite://" + filepath.Join(dir, "portcullis.db") + query})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), mainArgsEnv+"="+string(args))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()

	// Feed calls until the child dies; a few at a time, as agents would.
	go func() {
		w := bufio.NewWriter(stdin)
		for i := 0; ; i++ {
			fmt.Fprintf(w, `{"tool": "list_elements", "session": "s%d", "args": {"i": %d}}`+"\n", i%8, i)
			if i%4 == 3 {
				if err := w.Flush(); err != nil {
					return
				}
			}
		}
	}()

	answered := map[string]bool{}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	deadline := time.Now().Add(20 * time.Second)
	for sc.Scan() {
		var d portcullis.Decision
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatalf("child wrote %q: %v", sc.Text(), err)
		}
		if d.Outcome != portcullis.OutcomeAllow {
			t.Fatalf("decision %s = %s (%s); want allow", d.DecisionID, d.Outcome, d.Reason)
		}
		answered[d.DecisionID] = true
		if len(answered) >= 400 || time.Now().After(deadline) {
			break
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait() // killed: the error is expected
	if len(answered) < 50 {
		t.Fatalf("the child answered only %d decisions before the deadline", len(answered))
	}

	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "portcullis.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	audited := map[string]bool{}
	err = st.ScanAudit(context.Background(), 0, func(r portcullis.AuditRecord) (bool, error) {
		ev, err := r.Event()
		if err != nil {
			return false, err
		}
		audited[ev.DecisionID] = true
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for id := range answered {
		if !audited[id] {
			t.Errorf("decision %s was answered but has no audit row", id)
		}
	}
	v, err := portcullis.VerifyAudit(context.Background(), st, nil)
	if err != nil || !v.OK() {
		t.Fatalf("VerifyAudit after SIGKILL = %+v, %v", v, err)
	}
	t.Logf("%d decisions answered before SIGKILL, %d audit rows", len(answered), v.Rows)
}
