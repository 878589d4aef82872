package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/loadgen"
)

// faultsEnv turns on the fault runs (each kills or stops something under
// load, for tens of seconds); CI sets it.
const faultsEnv = "PORTCULLIS_TEST_FAULTS"

func needFaults(t *testing.T) {
	t.Helper()
	if os.Getenv(faultsEnv) != "1" {
		t.Skip("a fault run under load: set " + faultsEnv + "=1 to run it")
	}
}

// loadPolicy is the policy of the load and fault runs: reads pass, writes
// need a person once per session, deletes are denied, shell commands are
// classified, and send_note is the validator's (when the policy has one).
const loadPolicy = `version: 1
tools:
  read_note:   {endpoint: READ}
  write_note:  {endpoint: UPDATE, defaultLevel: CONFIRM_SESSION}
  delete_note: {endpoint: DELETE, defaultLevel: DENY, rationale: "notes are kept"}
  run_shell:   {endpoint: EXECUTE, shellArg: command}
approvals:
  wait: 60s
`

// loadGateway is a gateway under test: its configuration, its agent's and
// people's tokens, and the file its upstream logs every call to.
type loadGateway struct {
	dir, cfg, token string
	upstreamLog     string
	stderr          string // the gateway's log
	proc            *exec.Cmd
	url             string
}

// newLoadGateway writes a gateway configuration on store ("" for SQLite in
// the state directory) with policy, whose upstream records its calls.
func newLoadGateway(t testing.TB, store, policy string) *loadGateway {
	t.Helper()
	dir := t.TempDir()
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	g := &loadGateway{dir: dir, token: hex.EncodeToString(b[:]), upstreamLog: filepath.Join(dir, "upstream.log"), stderr: filepath.Join(dir, "serve.log")}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte(policy), 0o600))
	must(os.WriteFile(filepath.Join(dir, "bot.token"), []byte(g.token+"\n"), 0o600))
	upArgs, err := json.Marshal([]string{os.Args[0], "-test.run=^$"})
	must(err)
	cfg := fmt.Sprintf(`policy: policy.yaml
state: state
store: %q
agents:
  - name: bot
    tokenFile: bot.token
upstreams:
  - name: notes
    command: %s
    env: {%s: "1", %s: %q}
`, store, upArgs, upstreamEnv, upstreamLogEnv, g.upstreamLog)
	g.cfg = filepath.Join(dir, "portcullis.yaml")
	must(os.WriteFile(g.cfg, []byte(cfg), 0o600))
	return g
}

// start starts `portcullis serve` on listen (127.0.0.1:0 for any port) and
// waits until it serves. Its log goes to g.stderr.
func (g *loadGateway) start(t testing.TB, listen string) {
	t.Helper()
	raw, err := json.Marshal([]string{"serve", "--config", g.cfg, "--listen", listen})
	if err != nil {
		t.Fatal(err)
	}
	logf, err := os.OpenFile(g.stderr, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), mainArgsEnv+"="+string(raw))
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logf.Close()
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { terminate(cmd, 15*time.Second) }) })
	u, err := awaitServing(out)
	if err != nil {
		t.Fatalf("%v; its log:\n%s", err, g.log())
	}
	g.proc, g.url = cmd, u
}

// stop ends the gateway with SIGTERM and waits for it.
func (g *loadGateway) stop() { terminate(g.proc, 15*time.Second) }

// kill ends the gateway with SIGKILL: no shutdown, no flush.
func (g *loadGateway) kill(t testing.TB) {
	t.Helper()
	if err := g.proc.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = g.proc.Wait() // killed: its error is the point
}

func (g *loadGateway) log() string {
	b, _ := os.ReadFile(g.stderr)
	if len(b) > 8000 {
		b = b[len(b)-8000:]
	}
	return string(b)
}

func (g *loadGateway) humanToken(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(g.dir, "state", "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// loadConfig is the mix of the fault runs: both entry points, every kind.
func (g *loadGateway) loadConfig(t testing.TB) loadgen.Config {
	return loadgen.Config{
		BaseURL: g.url, AgentToken: g.token, HumanToken: g.humanToken(t),
		Via: []loadgen.Via{loadgen.API, loadgen.MCP}, Sessions: 8, Duration: 5 * time.Minute,
		Mix:           map[loadgen.Kind]int{loadgen.Read: 60, loadgen.Write: 15, loadgen.Deny: 15, loadgen.Shell: 10},
		Tools:         loadgen.Tools{Read: "read_note", Write: "write_note", Deny: "delete_note", Shell: "run_shell", ShellArg: "command"},
		CallTimeout:   20 * time.Second,
		ProgressEvery: 100 * time.Millisecond,
	}
}

// upstreamCalls reads the upstream's call log: the calls it received and
// the process ids it ran as.
func (g *loadGateway) upstreamCalls(t testing.TB) (calls []upstreamCall, pids []int) {
	t.Helper()
	b, err := os.ReadFile(g.upstreamLog)
	if err != nil {
		t.Fatal(err)
	}
	for line := range bytes.Lines(b) {
		var c upstreamCall
		if err := json.Unmarshal(line, &c); err != nil {
			// A line cut by a SIGKILL is the last one; it is not a call
			// that was answered.
			continue
		}
		if c.PID != 0 {
			pids = append(pids, c.PID)
			continue
		}
		calls = append(calls, c)
	}
	return calls, pids
}

// checkNothingRefusedForwarded fails when the upstream received a call the
// policy refuses: a delete, a blocked shell command, or a tool in refused.
func (g *loadGateway) checkNothingRefusedForwarded(t testing.TB, refused ...string) []upstreamCall {
	t.Helper()
	calls, _ := g.upstreamCalls(t)
	for _, c := range calls {
		if c.Tool == "delete_note" || contains(refused, c.Tool) {
			t.Errorf("the upstream received %s %s, which the policy denies", c.Tool, c.Args)
		}
		if c.Tool == "run_shell" && strings.Contains(string(c.Args), "portcullis ") {
			t.Errorf("the upstream received the blocked shell command %s", c.Args)
		}
	}
	return calls
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// checkAnswers fails when an answer allowed what the policy refuses.
func checkAnswers(t testing.TB, rep *loadgen.Report) {
	t.Helper()
	for _, a := range rep.Answers {
		if a.Outcome != portcullis.OutcomeAllow {
			continue
		}
		blocked := a.Kind == loadgen.Shell && strings.Contains(fmt.Sprint(a.Args["command"]), "portcullis ")
		if a.Kind == loadgen.Deny || blocked {
			t.Errorf("%s %s %v in session %s was allowed", a.Via, a.Tool, a.Args, a.Session)
		}
	}
}

// waitFor runs the load's progress until cond holds, or fails the test
// after a minute: what the test waits for must happen, whatever the speed
// of the machine.
func waitFor(t testing.TB, snaps <-chan loadgen.Snapshot, what string, cond func(loadgen.Snapshot) bool) loadgen.Snapshot {
	t.Helper()
	deadline := time.After(90 * time.Second)
	for {
		select {
		case s := <-snaps:
			if cond(s) {
				return s
			}
		case <-deadline:
			t.Fatalf("waited 90s for %s", what)
		}
	}
}

// runLoad starts the load in the background; the returned function stops
// it and returns its report. Progress snapshots arrive on the channel.
func runLoad(t testing.TB, cfg loadgen.Config) (<-chan loadgen.Snapshot, func() *loadgen.Report) {
	t.Helper()
	snaps := make(chan loadgen.Snapshot, 1)
	cfg.Progress = func(s loadgen.Snapshot) {
		select {
		case <-snaps: // keep only the latest
		default:
		}
		snaps <- s
	}
	ctx, cancel := context.WithCancel(context.Background())
	type result struct {
		rep *loadgen.Report
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := loadgen.Run(ctx, cfg)
		done <- result{rep, err}
	}()
	var once sync.Once
	var res result
	stop := func() *loadgen.Report {
		once.Do(func() {
			cancel()
			res = <-done
		})
		if res.err != nil {
			t.Fatal(res.err)
		}
		return res.rep
	}
	t.Cleanup(func() { stop() })
	return snaps, stop
}
