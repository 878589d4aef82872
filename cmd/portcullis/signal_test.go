package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/server"
	"github.com/portcullis/portcullis/sqlite"
)

// lineWatch reads a process's output line by line and lets a test wait
// for a line containing a string.
type lineWatch struct {
	lines chan string
	seen  []string
}

func watchLines(t *testing.T, r io.Reader) *lineWatch {
	w := &lineWatch{lines: make(chan string, 256)}
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			w.lines <- sc.Text()
		}
		close(w.lines)
	}()
	return w
}

// await returns the first line (from now on) containing s; it fails the
// test when the output ends first, or after a minute (a hang).
func (w *lineWatch) await(t *testing.T, s string) string {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		select {
		case l, ok := <-w.lines:
			if !ok {
				t.Fatalf("the output ended before a line with %q; it was:\n%s", s, strings.Join(w.seen, "\n"))
			}
			w.seen = append(w.seen, l)
			if strings.Contains(l, s) {
				return l
			}
		case <-deadline:
			t.Fatalf("no line with %q within a minute; the output was:\n%s", s, strings.Join(w.seen, "\n"))
		}
	}
}

// heldWrite calls write_note (held for a person under servePolicy) and
// delivers its result.
func heldWrite(cs *mcp.ClientSession) <-chan *mcp.CallToolResult {
	out := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "write_note", Arguments: map[string]any{"id": 7}})
		if err != nil {
			res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "call failed: " + err.Error()}}}
		}
		out <- res
	}()
	return out
}

// checkTwoInterrupts signals the process twice with a call held: the
// first says on stderr what waits and how to answer it and stops
// nothing; the second refuses the call (the agent is told why) and the
// process exits with status 0. The refusal is in the audit log.
//
// wait waits for the process and returns its exit error.
func checkTwoInterrupts(t *testing.T, cmd *exec.Cmd, wait func() error, stderr *lineWatch, result <-chan *mcp.CallToolResult, state string) {
	t.Helper()
	stderr.await(t, "call held for a person")
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	what := stderr.await(t, "write_note of agent")
	if !strings.Contains(what, "portcullis approve ") || !strings.Contains(what, "portcullis deny ") {
		t.Errorf("after the first Ctrl-C, stderr says %q; want the held call and the commands that answer it", what)
	}
	stderr.await(t, "press Ctrl-C again")
	select {
	case res := <-result:
		t.Fatalf("the first Ctrl-C ended the held call: %q; want it still waiting", resultText(res))
	default:
	}
	if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the first Ctrl-C stopped the process: %v", err)
	}
	start := time.Now()
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	var res *mcp.CallToolResult
	select {
	case res = <-result:
	case <-time.After(time.Minute):
		t.Fatal("the second Ctrl-C did not answer the held call")
	}
	if !res.IsError || !strings.Contains(resultText(res), "the gateway was stopped (Ctrl-C) before a person answered") {
		t.Errorf("the held call's answer after the second Ctrl-C = %q (isError %v); want a refusal saying the gateway was stopped", resultText(res), res.IsError)
	}
	done := make(chan error, 1)
	go func() { done <- wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("exit after the second Ctrl-C: %v; want status 0", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the process did not exit after the second Ctrl-C")
	}
	t.Logf("from the second Ctrl-C to exit: %s", time.Since(start))

	st, err := sqlite.Open(context.Background(), filepath.Join(state, "portcullis.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	recs, err := st.QueryAudit(context.Background(), portcullis.AuditQuery{Kind: portcullis.AuditApproval})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		ev, err := r.Event()
		if err != nil {
			t.Fatal(err)
		}
		if ev.Actor == server.RefusedBy && ev.Outcome == portcullis.OutcomeDeny && ev.Tool != "" {
			return
		}
	}
	t.Errorf("no audit row of the refusal (actor %q, outcome deny) among %d approval rows", server.RefusedBy, len(recs))
}

func TestServeSignalTwiceRefusesHeldCalls(t *testing.T) {
	cfg, token := writeServeConfig(t, "")
	raw, _ := json.Marshal([]string{"serve", "--config", cfg, "--listen", "127.0.0.1:0"})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), mainArgsEnv+"="+string(raw))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errs, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	stderr := watchLines(t, errs)
	base, err := awaitServing(out)
	if err != nil {
		t.Fatal(err)
	}
	cs := connectHTTP(t, base, token)
	checkTwoInterrupts(t, cmd, cmd.Wait, stderr, heldWrite(cs), filepath.Join(filepath.Dir(cfg), "state"))
}

func TestMCPSignalTwiceRefusesHeldCalls(t *testing.T) {
	dir := t.TempDir()
	policyPath := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policyPath, []byte(servePolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	cmd := wrapperCmd(t, "--policy", policyPath, "--state", state, "--", "env", upstreamEnv+"=1", os.Args[0], "-test.run=^$")
	errs, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := watchLines(t, errs)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "signal-test", Version: "1"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	// The client's transport waits for the process it started: the
	// status is read once the client has closed.
	wait := func() error {
		cs.Wait()
		cs.Close()
		if cmd.ProcessState == nil {
			return fmt.Errorf("the process was not waited for")
		}
		if c := cmd.ProcessState.ExitCode(); c != 0 {
			return fmt.Errorf("exit status %d", c)
		}
		return nil
	}
	checkTwoInterrupts(t, cmd, wait, stderr, heldWrite(cs), state)
}

// TestServeSignalWithNothingHeldStops: with no call waiting for a
// person, the first Ctrl-C stops serve, as before.
func TestServeSignalWithNothingHeldStops(t *testing.T) {
	cfg, _ := writeServeConfig(t, "")
	s := startServe(t, cfg)
	if err := s.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("exit after Ctrl-C with nothing held: %v; want status 0", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("serve did not stop on Ctrl-C with nothing held")
	}
}
