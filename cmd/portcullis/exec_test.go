package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/policy"
	"github.com/portcullis/portcullis/shellgate"
	"github.com/portcullis/portcullis/sqlite"
)

// execPolicy is an h-cli-style shell gate: one shell tool, touch allowed
// by a rule, reboots denied, everything else by the classifier.
const execPolicy = `version: 1
unknownTools: deny
tools:
  run_command: {endpoint: EXECUTE, shellArg: command}
shell:
  rules:
    - pattern: [touch]
      decision: allow
      justification: creating empty files is harmless here
    - pattern: [[reboot, shutdown]]
      decision: deny
      justification: takes the machine down
approvals:
  wait: 20s
`

// execEnv is a state directory and a policy file for exec tests.
type execEnv struct {
	dir, state, policy string
}

func newExecEnv(t *testing.T, pol string) *execEnv {
	t.Helper()
	dir := t.TempDir()
	e := &execEnv{dir: dir, state: filepath.Join(dir, "state"), policy: filepath.Join(dir, "policy.yaml")}
	if err := os.WriteFile(e.policy, []byte(pol), 0o644); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *execEnv) run(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	return runCLI(t, stdin, append([]string{"exec", "--policy", e.policy, "--state", e.state}, args...)...)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// TestExecDeniedNeverStarts: a command that is not allowed exits 126 with
// the reason on stderr, and no part of it ran: the marker file it would
// have created first does not exist.
func TestExecDeniedNeverStarts(t *testing.T) {
	e := newExecEnv(t, execPolicy)
	marker := filepath.Join(e.dir, "marker")
	for _, tc := range []struct {
		name   string
		args   []string
		reason string
	}{
		{"a denied part after an allowed one", []string{"-c", "touch " + marker + "; reboot"}, "takes the machine down"},
		{"a blocked command", []string{"-c", "touch " + marker + " && portcullis approve apr_1"}, "approve itself"},
		{"Portcullis's own state", []string{"--", "touch", filepath.Join(e.state, "portcullis.db"), marker}, "Portcullis's own files"},
		{"a dangerous command, nobody waiting", []string{"--no-wait", "-c", "touch " + marker + "; rm -rf " + filepath.Join(e.dir, "x")}, "requires confirmation"},
		{"an unknown program, nobody waiting", []string{"--no-wait", "--", "sh", "-c", "touch " + marker + "; $CMD"}, "requires confirmation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := e.run(t, "", tc.args...)
			if code != shellgate.ExitDenied {
				t.Errorf("exit %d; want %d (stderr %q)", code, shellgate.ExitDenied, stderr)
			}
			if !strings.Contains(stderr, tc.reason) || !strings.HasPrefix(stderr, "portcullis: not run: ") {
				t.Errorf("stderr %q; want the reason (%q)", stderr, tc.reason)
			}
			if stdout != "" {
				t.Errorf("stdout %q; want nothing", stdout)
			}
			if exists(marker) {
				t.Fatalf("the denied command ran: %s exists", marker)
			}
		})
	}
}

// TestExecRuns: an allowed command runs with the caller's stdin, stdout
// and stderr, and exec exits with its status.
func TestExecRuns(t *testing.T) {
	e := newExecEnv(t, execPolicy)
	marker := filepath.Join(e.dir, "made")
	for _, tc := range []struct {
		name           string
		stdin          string
		args           []string
		code           int
		stdout, stderr string
	}{
		{"argv", "", []string{"--", "printf", "%s-%s", "a b", "c"}, 0, "a b-c", ""},
		{"stdin to stdout", "from stdin", []string{"--", "cat"}, 0, "from stdin", ""},
		{"shell commands and their status", "data", []string{"-c", "cat; echo oops >&2; exit 3"}, 3, "data", "oops\n"},
		{"a failing program", "", []string{"--", "false"}, 1, "", ""},
		{"a rule's allow", "", []string{"--", "touch", marker}, 0, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := e.run(t, tc.stdin, tc.args...)
			if code != tc.code || stdout != tc.stdout || stderr != tc.stderr {
				t.Errorf("exec %q = exit %d, stdout %q, stderr %q; want %d, %q, %q", tc.args, code, stdout, stderr, tc.code, tc.stdout, tc.stderr)
			}
		})
	}
	if !exists(marker) {
		t.Errorf("the allowed touch did not run")
	}
	// Every decision has its audit row.
	code, out, stderr := runCLI(t, "", "audit", "query", "--state", e.state, "--tool", "run_command", "--json")
	if code != 0 || strings.Count(out, `"kind":"decision"`) < 5 {
		t.Errorf("audit query: exit %d, %d decision rows (%s); want 5 or more", code, strings.Count(out, `"kind":"decision"`), stderr)
	}
}

// TestExecWaitsForAPerson: a command that needs a person waits for the
// answer; approved, it runs; denied, it never starts.
func TestExecWaitsForAPerson(t *testing.T) {
	for _, approve := range []bool{true, false} {
		t.Run(map[bool]string{true: "approved", false: "denied"}[approve], func(t *testing.T) {
			e := newExecEnv(t, execPolicy)
			marker := filepath.Join(e.dir, "marker")
			done := make(chan struct{})
			go func() {
				defer close(done)
				answerFirstApproval(t, e, approve)
			}()
			code, _, stderr := e.run(t, "", "-c", "mkdir "+marker)
			<-done
			if approve && (code != 0 || !exists(marker)) {
				t.Fatalf("approved: exit %d, marker created %v (stderr %q); want 0, true", code, exists(marker), stderr)
			}
			if !approve && (code != shellgate.ExitDenied || exists(marker) || !strings.Contains(stderr, "not today")) {
				t.Fatalf("denied: exit %d, marker created %v (stderr %q); want %d, false, the person's reason", code, exists(marker), stderr, shellgate.ExitDenied)
			}
			if !strings.Contains(stderr, "waiting up to 20s for a person to approve apr_") {
				t.Errorf("stderr %q does not say what it waits for", stderr)
			}
		})
	}
}

// answerFirstApproval answers the first pending approval in the exec
// environment's store as a person would, through a gate of its own on the
// same SQLite file.
func answerFirstApproval(t *testing.T, e *execEnv, approve bool) {
	ctx := context.Background()
	deadline := time.Now().Add(15 * time.Second)
	for !exists(filepath.Join(e.state, "portcullis.db")) {
		if time.Now().After(deadline) {
			t.Error("no store appeared")
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	st, err := sqlite.Open(ctx, filepath.Join(e.state, "portcullis.db"), sqlite.Options{})
	if err != nil {
		t.Error(err)
		return
	}
	defer st.Close()
	pol, _, err := policy.Load(e.policy)
	if err != nil {
		t.Error(err)
		return
	}
	g, err := gate.New(pol, gate.WithStore(st))
	if err != nil {
		t.Error(err)
		return
	}
	for time.Now().Before(deadline) {
		as, err := st.Approvals(ctx, portcullis.ApprovalFilter{Status: portcullis.ApprovalPending})
		if err != nil {
			t.Error(err)
			return
		}
		if len(as) > 0 {
			if approve {
				_, err = g.Approve(ctx, as[0].ID, "alice", false)
			} else {
				_, err = g.DenyApproval(ctx, as[0].ID, "alice", "not today")
			}
			if err != nil {
				t.Error(err)
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Error("no approval request appeared")
}

// TestExecValidator: with a validator whose scope is every shell command
// (h-cli's gate), its deny stops the command before it starts.
func TestExecValidator(t *testing.T) {
	for _, tc := range []struct {
		answer string
		code   int
	}{
		{`{"verdict":"deny","reasoning":"reads the network core config","whatWouldAuthorize":"an operator","confidence":0.9}`, shellgate.ExitDenied},
		{`{"verdict":"allow","reasoning":"a harmless listing","whatWouldAuthorize":"","confidence":0.9}`, 0},
	} {
		dir := t.TempDir()
		judge := filepath.Join(dir, "judge.sh")
		if err := os.WriteFile(judge, []byte("#!/bin/sh\ncat > /dev/null\nprintf '%s\\n' '"+tc.answer+"'\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "groundRules.md"), []byte("Never touch the core.\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		e := newExecEnv(t, execPolicy+"validator:\n  provider: command\n  command: ["+judge+"]\n  mode: stateless\n  rules: "+filepath.Join(dir, "groundRules.md")+"\n  scope: {shell: true}\n")
		marker := filepath.Join(e.dir, "marker")
		code, _, stderr := e.run(t, "", "--", "touch", marker)
		if code != tc.code || exists(marker) != (tc.code == 0) {
			t.Errorf("validator %s: exit %d, ran %v (stderr %q); want exit %d", tc.answer, code, exists(marker), stderr, tc.code)
		}
	}
}

func TestExecUsage(t *testing.T) {
	e := newExecEnv(t, "version: 1\ntools:\n  list_elements: {endpoint: READ}\n")
	if code, _, stderr := e.run(t, "", "--", "true"); code != 2 || !strings.Contains(stderr, "no shell tool") {
		t.Errorf("policy without a shell tool: exit %d, %q; want 2 naming the problem", code, stderr)
	}
	e = newExecEnv(t, execPolicy)
	for _, args := range [][]string{{}, {"-c", "true", "--", "true"}, {"--tool", "nope", "--", "true"}} {
		if code, _, _ := e.run(t, "", args...); code != 2 {
			t.Errorf("exec %q: exit %d; want 2", args, code)
		}
	}
}

// TestExecShellMode runs `exec --shell` as portcullis-sh does: the policy
// and state come from the environment.
func TestExecShellMode(t *testing.T) {
	e := newExecEnv(t, execPolicy)
	t.Setenv("PORTCULLIS_POLICY", e.policy)
	t.Setenv("PORTCULLIS_STATE", e.state)
	marker := filepath.Join(e.dir, "marker")
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"exec", "--shell", "-lc", "echo hi"}, strings.NewReader(""), &out, &errb)
	if code := exitCode(err, &errb); code != 0 || out.String() != "hi\n" {
		t.Errorf("portcullis-sh -lc 'echo hi': exit %d, %q (%s)", code, out.String(), errb.String())
	}
	out.Reset()
	errb.Reset()
	err = run(context.Background(), []string{"exec", "--shell", "-c", "touch " + marker + "; shutdown -h now"}, strings.NewReader(""), &out, &errb)
	if code := exitCode(err, &errb); code != shellgate.ExitDenied || exists(marker) {
		t.Errorf("portcullis-sh -c with a denied part: exit %d, ran %v; want %d, never run", code, exists(marker), shellgate.ExitDenied)
	}
	if args, ok := shellInvocation("/usr/local/bin/-portcullis-sh", []string{"-c", "ls"}); !ok || strings.Join(args, " ") != "exec --shell -l -c ls" {
		t.Errorf("login invocation: %q, %v", args, ok)
	}
	if _, ok := shellInvocation("/usr/local/bin/portcullis", nil); ok {
		t.Error("portcullis taken for portcullis-sh")
	}
}
