package shellgate_test

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
	"github.com/portcullis/portcullis/hook"
	"github.com/portcullis/portcullis/memstore"
	"github.com/portcullis/portcullis/policy"
	"github.com/portcullis/portcullis/shellgate"
)

// shellPolicy is an h-cli-style shell gate: one shell tool, touch allowed
// by a rule, reboots denied, everything else by the classifier.
const shellPolicy = `version: 1
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

// newGate is the shell gate over a real gate with an in-process store, and
// that gate (to answer approvals as a person would).
func newGate(t *testing.T, wait time.Duration) (*shellgate.Gate, *gate.Gate) {
	t.Helper()
	pol, _, err := policy.Parse("policy.yaml", []byte(shellPolicy))
	if err != nil {
		t.Fatal(err)
	}
	g, err := gate.New(pol, gate.WithStore(memstore.New(nil)))
	if err != nil {
		t.Fatal(err)
	}
	tool, arg, err := shellgate.Tool(pol, "")
	if err != nil {
		t.Fatal(err)
	}
	return &shellgate.Gate{Decider: g, Holder: hook.WaitThenDecide{Waiter: g, Decider: g}, Tool: tool, Arg: arg, Wait: wait}, g
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// decideAndRun is what `portcullis exec` does: decide, and run only what
// the decision that stands allows.
func decideAndRun(t *testing.T, sg *shellgate.Gate, spec shellgate.Spec) (portcullis.Decision, bool) {
	t.Helper()
	command, err := spec.Command()
	if err != nil {
		t.Fatal(err)
	}
	d, err := sg.Decide(context.Background(), shellgate.Request{Command: command, Agent: "shell"})
	if err != nil || !d.Allowed() {
		return d, false
	}
	var out, errb bytes.Buffer
	if code, err := spec.Run(context.Background(), strings.NewReader(""), &out, &errb); code != 0 || err != nil {
		t.Fatalf("Run(%+v) = %d, %v (stderr %q); want 0", spec, code, err, errb.String())
	}
	return d, true
}

// TestDeniedNeverRuns: a command whose decision is not an allow is not
// allowed by Decide, so no part of it runs: the marker file it would have
// created first does not exist.
func TestDeniedNeverRuns(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "marker")
	for _, tc := range []struct {
		name   string
		spec   shellgate.Spec
		reason string
	}{
		{"a denied part after an allowed one", shellgate.Spec{Shell: true, Script: "touch " + marker + "; reboot"}, "takes the machine down"},
		{"a blocked command", shellgate.Spec{Shell: true, Script: "touch " + marker + " && portcullis approve apr_1"}, "approve itself"},
		{"a dangerous command, nobody waiting", shellgate.Spec{Shell: true, Script: "touch " + marker + "; rm -rf " + filepath.Join(dir, "x")}, "requires confirmation"},
		{"an unknown program, nobody waiting", shellgate.Spec{Argv: []string{"sh", "-c", "touch " + marker + "; $CMD"}}, "requires confirmation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sg, _ := newGate(t, 0) // 0: never wait for a person
			d, ran := decideAndRun(t, sg, tc.spec)
			if ran || exists(marker) {
				t.Fatalf("Decide(%+v) = %s (%s); the command ran", tc.spec, d.Outcome, d.Reason)
			}
			if !strings.Contains(d.Reason, tc.reason) {
				t.Errorf("Decide(%+v).Reason = %q; want it to say %q", tc.spec, d.Reason, tc.reason)
			}
		})
	}
}

// TestWaitsForAPerson: a command that needs a person is held until one
// answers: approved, the decision that stands allows it and it runs;
// denied, it never starts and the person's reason is the decision's.
func TestWaitsForAPerson(t *testing.T) {
	for _, approve := range []bool{true, false} {
		t.Run(map[bool]string{true: "approved", false: "denied"}[approve], func(t *testing.T) {
			sg, g := newGate(t, 20*time.Second)
			marker := filepath.Join(t.TempDir(), "marker")
			waited := make(chan portcullis.Decision, 1)
			sg.OnWait = func(d portcullis.Decision, wait time.Duration) {
				if wait != 20*time.Second {
					t.Errorf("OnWait(%s); want the gate's wait, 20s", wait)
				}
				waited <- d
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				d := <-waited
				var err error
				if approve {
					_, err = g.Approve(context.Background(), d.ChallengeID, "alice", false)
				} else {
					_, err = g.DenyApproval(context.Background(), d.ChallengeID, "alice", "not today")
				}
				if err != nil {
					t.Error(err)
				}
			}()
			d, ran := decideAndRun(t, sg, shellgate.Spec{Shell: true, Script: "mkdir " + marker})
			<-done
			if approve && (!ran || !exists(marker)) {
				t.Fatalf("approved: %s (%s), marker created %v; want it run", d.Outcome, d.Reason, exists(marker))
			}
			if !approve && (ran || exists(marker) || !strings.Contains(d.Reason, "not today")) {
				t.Fatalf("denied: %s (%s), marker created %v; want a deny with the person's reason, never run", d.Outcome, d.Reason, exists(marker))
			}
		})
	}
}

// TestNobodyAnswers: a held command nobody approves within the wait is a
// deny that says so, never an allow.
func TestNobodyAnswers(t *testing.T) {
	sg, _ := newGate(t, 50*time.Millisecond)
	d, err := sg.Decide(context.Background(), shellgate.Request{Command: "mkdir /tmp/never", Agent: "shell"})
	if err != nil {
		t.Fatal(err)
	}
	if d.Outcome != portcullis.OutcomeDeny || !strings.Contains(d.Reason, "nobody approved apr_") {
		t.Errorf("Decide after an unanswered wait = %s (%s); want deny, nobody approved", d.Outcome, d.Reason)
	}
}

// TestCall: the call is the policy's shell tool with the command under its
// argument, and the context is the caller's own observation.
func TestCall(t *testing.T) {
	sg, _ := newGate(t, 0)
	c := sg.Call(shellgate.Request{Command: "ls -l", Session: "s1", Agent: "ops", UserPresent: true})
	if c.Tool != "run_command" || c.Args["command"] != "ls -l" || c.Session != "s1" || c.Agent != "ops" || !c.UserPresent || c.ContextSource != portcullis.ContextHost {
		t.Errorf("Call = %+v; want run_command {command: ls -l} for ops in s1, user present, context from the host", c)
	}
}

func TestTool(t *testing.T) {
	pol, _, err := policy.Parse("policy.yaml", []byte("version: 1\ntools:\n  list: {endpoint: READ}\n  sh: {endpoint: EXECUTE, shellArg: cmd}\n  bash: {endpoint: EXECUTE, shellArg: command}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, tool, arg, err string
	}{
		{"", "sh", "cmd", ""},
		{"bash", "bash", "command", ""},
		{"list", "", "", "has no shellArg"},
		{"nope", "", "", "no tool \"nope\""},
	} {
		tool, arg, err := shellgate.Tool(pol, tc.name)
		if tool != tc.tool || arg != tc.arg || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("Tool(%q) = %q, %q, %v; want %q, %q, %q", tc.name, tool, arg, err, tc.tool, tc.arg, tc.err)
		}
	}
	none, _, err := policy.Parse("policy.yaml", []byte("version: 1\ntools:\n  list: {endpoint: READ}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := shellgate.Tool(none, ""); err == nil || !strings.Contains(err.Error(), "no shell tool") {
		t.Errorf("Tool of a policy without a shell tool: %v; want an error naming the problem", err)
	}
}

// TestCommand: what the gate classifies is what runs, argv quoted as a
// POSIX shell reads it.
func TestCommand(t *testing.T) {
	for _, tc := range []struct {
		spec shellgate.Spec
		want string
	}{
		{shellgate.Spec{Argv: []string{"printf", "%s-%s", "a b", "c"}}, `printf %s-%s 'a b' c`},
		{shellgate.Spec{Argv: []string{"rm", "-rf", "$HOME"}}, `rm -rf '$HOME'`},
		{shellgate.Spec{Shell: true, Script: "ls; rm -rf x"}, "ls; rm -rf x"},
	} {
		if got, err := tc.spec.Command(); err != nil || got != tc.want {
			t.Errorf("Command(%+v) = %q, %v; want %q", tc.spec, got, err, tc.want)
		}
	}
	if _, err := (&shellgate.Spec{}).Command(); err == nil {
		t.Error("Command of an empty spec: no error")
	}
}

// TestRun: a command runs with the given stdin, stdout and stderr, and its
// exit status is returned; one that cannot start is an error with the
// shell's status.
func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name           string
		stdin          string
		spec           shellgate.Spec
		code           int
		err            bool
		stdout, stderr string
	}{
		{"argv", "", shellgate.Spec{Argv: []string{"printf", "%s-%s", "a b", "c"}}, 0, false, "a b-c", ""},
		{"stdin to stdout", "from stdin", shellgate.Spec{Argv: []string{"cat"}}, 0, false, "from stdin", ""},
		{"shell commands and their status", "data", shellgate.Spec{Shell: true, Script: "cat; echo oops >&2; exit 3"}, 3, false, "data", "oops\n"},
		{"shell flags", "", shellgate.Spec{Shell: true, ShellFlags: []string{"-e"}, Script: "false; echo not reached"}, 1, false, "", ""},
		{"a failing program", "", shellgate.Spec{Argv: []string{"false"}}, 1, false, "", ""},
		{"a signal", "", shellgate.Spec{Shell: true, Script: "kill -TERM $$"}, 128 + 15, false, "", ""},
		{"no such program", "", shellgate.Spec{Argv: []string{"portcullis-no-such-program"}}, shellgate.ExitNotFound, true, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code, err := tc.spec.Run(context.Background(), strings.NewReader(tc.stdin), &out, &errb)
			if code != tc.code || (err != nil) != tc.err || out.String() != tc.stdout || errb.String() != tc.stderr {
				t.Errorf("Run(%+v) = %d, %v, stdout %q, stderr %q; want %d, error %v, %q, %q", tc.spec, code, err, out.String(), errb.String(), tc.code, tc.err, tc.stdout, tc.stderr)
			}
		})
	}
}

// TestRealShellNeverPortcullis: the real shell is never portcullis-sh,
// which would decide the command again forever.
func TestRealShellNeverPortcullis(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, shellgate.ShellName)
	if err := os.WriteFile(fake, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PORTCULLIS_REAL_SHELL", fake)
	if sh, err := shellgate.RealShell(); err == nil {
		t.Errorf("RealShell() = %q with PORTCULLIS_REAL_SHELL naming portcullis-sh; want an error", sh)
	}
	code, err := (&shellgate.Spec{Shell: true, Script: "true"}).Run(context.Background(), strings.NewReader(""), &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || code != shellgate.ExitDenied {
		t.Errorf("Run through portcullis-sh as the real shell = %d, %v; want %d and an error", code, err, shellgate.ExitDenied)
	}
}

func TestInvoked(t *testing.T) {
	for _, tc := range []struct {
		argv0     string
		ok, login bool
	}{
		{"/usr/local/bin/portcullis-sh", true, false},
		{"-portcullis-sh", true, true},
		{"/usr/local/bin/portcullis", false, false},
		{"sh", false, false},
	} {
		if ok, login := shellgate.Invoked(tc.argv0); ok != tc.ok || login != tc.login {
			t.Errorf("Invoked(%q) = %v, %v; want %v, %v", tc.argv0, ok, login, tc.ok, tc.login)
		}
	}
}

func TestParseShellArgs(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		script string
		login  bool
		flags  []string
		bad    bool
	}{
		{args: []string{"-c", "ls"}, script: "ls"},
		{args: []string{"-lc", "ls -l"}, script: "ls -l", login: true},
		{args: []string{"--login", "-e", "-o", "pipefail", "-c", "ls"}, script: "ls", login: true, flags: []string{"-e", "-o", "pipefail"}},
		{args: []string{"-c", "-l", "ls"}, script: "ls", login: true},
		{args: []string{"-c", "--", "ls"}, script: "ls"},
		{args: []string{}, bad: true},                                     // interactive
		{args: []string{"script.sh"}, bad: true},                          // a script file
		{args: []string{"-l"}, bad: true},                                 // a login shell reading stdin
		{args: []string{"-c"}, bad: true},                                 // no commands
		{args: []string{"-c", `"$@"`, "sh", "rm", "-rf", "/"}, bad: true}, // positional arguments
		{args: []string{"-s", "-c", "ls"}, bad: true},
	} {
		s, err := shellgate.ParseShellArgs(tc.args)
		if tc.bad {
			if err == nil {
				t.Errorf("ParseShellArgs(%q) = %+v; want an error", tc.args, s)
			}
			continue
		}
		if err != nil || s.Script != tc.script || s.Login != tc.login || !s.Shell || strings.Join(s.ShellFlags, " ") != strings.Join(tc.flags, " ") {
			t.Errorf("ParseShellArgs(%q) = %+v, %v; want script %q login %v flags %q", tc.args, s, err, tc.script, tc.login, tc.flags)
		}
	}
}
