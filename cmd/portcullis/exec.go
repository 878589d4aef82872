package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/hook"
)

// exitDenied is the exit status of a command the gate did not allow — the
// shell's "found but not executable".
const exitDenied = 126

// shellName is the name that makes the binary a login-shell wrapper: a
// link named portcullis-sh (or -portcullis-sh, as login(1) starts a login
// shell) runs `portcullis exec --shell` with its arguments.
const shellName = "portcullis-sh"

// shellInvocation reports whether the binary was started as portcullis-sh
// and returns the arguments of the exec command that stands for it.
func shellInvocation(argv0 string, args []string) ([]string, bool) {
	base := filepath.Base(argv0)
	if strings.TrimPrefix(base, "-") != shellName {
		return nil, false
	}
	out := []string{"exec", "--shell"}
	if strings.HasPrefix(base, "-") {
		out = append(out, "-l")
	}
	return append(out, args...), true
}

// execSpec is what exec runs: a program with arguments, or shell commands.
type execSpec struct {
	argv       []string // a program and its arguments, run directly
	script     string   // shell commands, run by the real shell with -c
	shell      bool     // script is set (it may be empty)
	login      bool     // run the real shell as a login shell
	shellFlags []string // -e, -u, -x, -v, -o OPT: passed to the real shell
}

// command is the text the gate classifies: exactly what will run.
func (s *execSpec) command() (string, error) {
	if s.shell {
		return s.script, nil
	}
	return shellJoin(s.argv)
}

// runExec is `portcullis exec` (and portcullis-sh): classify, decide, wait
// for a person when one must approve, then run the command with the
// caller's stdio and exit with its status.
func runExec(ctx context.Context, o *execOptions, spec execSpec, stdin io.Reader, stdout, stderr io.Writer) error {
	agent := firstNonEmpty(o.agent, strings.TrimSpace(os.Getenv("PORTCULLIS_AGENT")), "shell")
	session := firstNonEmpty(o.session, strings.TrimSpace(os.Getenv("PORTCULLIS_SESSION")))

	command, err := spec.command()
	if err != nil {
		return usageError("exec: %v", err)
	}
	d, err := execDecide(ctx, command, &o.state, &o.notify, o.policy, o.tool, agent, session, o.noWait, stdin, stderr)
	if err != nil {
		return err
	}
	if !d.Allowed() {
		fmt.Fprintf(stderr, "portcullis: not run: %s\n", strings.TrimPrefix(reasonLine(&d), "Portcullis: "))
		return &exitError{code: exitDenied}
	}
	return execRun(ctx, &spec, stdin, stdout, stderr)
}

// execDecide decides the command under the policy's shell tool, waiting
// for a person when one must approve it. The store is closed before it
// returns: the command runs without Portcullis holding its state open.
func execDecide(ctx context.Context, command string, sf *stateFlags, nf *notifyFlags, policyFlag, tool, agent, session string, noWait bool, stdin io.Reader, stderr io.Writer) (portcullis.Decision, error) {
	var none portcullis.Decision
	path := agentPolicyPath(policyFlag, stderr)
	log := cliLogger(stderr)
	st, err := sf.open(ctx, log)
	if err != nil {
		return none, err
	}
	defer st.Close()
	dir, err := sf.dir(true)
	if err != nil {
		return none, err
	}
	// The people who approve a command are told out of band; stderr is
	// the agent's.
	n, stopNotify, err := nf.notifier(log)
	if err != nil {
		return none, err
	}
	defer stopNotify()
	opts := []gate.Option{gate.WithStore(st), gate.WithLogger(log), gate.WithProtectedPaths(dir)}
	if n != nil {
		opts = append(opts, gate.WithNotifier(n))
	}
	g, pol, err := loadAgentGate(path, stderr, opts...)
	if err != nil {
		return none, err
	}
	name, arg, err := execTool(pol, tool)
	if err != nil {
		return none, err
	}
	c := portcullis.Call{
		Tool:        name,
		Args:        map[string]any{arg: command},
		Session:     session,
		Agent:       agent,
		UserPresent: isTerminal(stdin),
		// Seen by Portcullis itself (is stdin a terminal), not stated.
		ContextSource: portcullis.ContextHost,
	}
	d, err := g.Decide(ctx, c)
	if err != nil {
		return d, &exitError{code: exitDenied, msg: "not run: " + err.Error()}
	}
	if d.Outcome != portcullis.OutcomeConfirm || d.ChallengeID == "" || noWait {
		return d, nil
	}
	fmt.Fprintf(stderr, "portcullis: %s\nportcullis: waiting up to %s for a person to approve %s (the Portcullis console, or `portcullis approve %s`)\n",
		strings.TrimPrefix(d.Reason, "Portcullis: "), pol.Approvals.Wait, d.ChallengeID, d.ChallengeID)
	wctx, cancel := context.WithTimeout(ctx, pol.Approvals.Wait)
	defer cancel()
	d2, err := hook.WaitThenDecide{Waiter: g, Decider: g}.Hold(wctx, c, d)
	if err != nil {
		return d, &exitError{code: exitDenied, msg: "not run: waiting for approval " + d.ChallengeID + ": " + err.Error()}
	}
	if d2.Outcome == portcullis.OutcomeConfirm && d2.DecisionID == d.DecisionID {
		d2.Outcome = portcullis.OutcomeDeny
		d2.Reason = "nobody approved " + d.ChallengeID + " within " + pol.Approvals.Wait.String()
	}
	return d2, nil
}

// execTool returns the policy tool commands are decided under and its
// command argument: the one --tool names, or the first with shellArg.
func execTool(pol *portcullis.Policy, name string) (string, string, error) {
	if name == "" {
		n, arg, ok := hook.ShellTool(pol)
		if !ok {
			return "", "", usageError("exec: the policy has no shell tool: add a tools entry with shellArg (as examples/hcli/policy.yaml does), or name one with --tool")
		}
		return n, arg, nil
	}
	for _, t := range pol.Tools {
		if t.Name == name {
			if t.ShellArg == "" {
				return "", "", usageError("exec: tool %q has no shellArg: its commands would not be classified", name)
			}
			return t.Name, t.ShellArg, nil
		}
	}
	return "", "", usageError("exec: the policy has no tool %q", name)
}

// reasonLine is a decision's reason and what would authorize the call.
func reasonLine(d *portcullis.Decision) string {
	r := d.Reason
	if d.WhatWouldAuthorize != "" {
		r += " (what would authorize it: " + d.WhatWouldAuthorize + ")"
	}
	return r
}

// execRun runs the allowed command with the caller's stdio and returns its
// exit status as the command's. Signals that end portcullis (SIGINT,
// SIGTERM, through ctx) are passed on to it.
func execRun(ctx context.Context, spec *execSpec, stdin io.Reader, stdout, stderr io.Writer) error {
	var cmd *exec.Cmd
	if spec.shell {
		sh, err := realShell()
		if err != nil {
			return &exitError{code: exitDenied, msg: err.Error()}
		}
		var args []string
		if spec.login {
			args = append(args, "-l")
		}
		args = append(args, spec.shellFlags...)
		args = append(args, "-c", spec.script)
		cmd = exec.Command(sh, args...)
	} else {
		cmd = exec.Command(spec.argv[0], spec.argv[1:]...)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	if err := cmd.Start(); err != nil {
		code := exitDenied
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = 127
		}
		return &exitError{code: code, msg: err.Error()}
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			// Process is set: Start succeeded.
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
				fmt.Fprintf(stderr, "portcullis: pass on the signal: %v\n", err)
			}
		case <-done:
		}
	}()
	err := cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return &exitError{code: 128 + int(ws.Signal())}
		}
		return &exitError{code: ee.ExitCode()}
	}
	return &exitError{code: exitDenied, msg: err.Error()}
}

// realShell is the shell that runs allowed shell commands:
// $PORTCULLIS_REAL_SHELL, else bash, else /bin/sh — never portcullis
// itself, which would decide the command again forever.
func realShell() (string, error) {
	sh := strings.TrimSpace(os.Getenv("PORTCULLIS_REAL_SHELL"))
	if sh == "" {
		if p, err := exec.LookPath("bash"); err == nil {
			sh = p
		} else {
			sh = "/bin/sh"
		}
	}
	p, err := exec.LookPath(sh)
	if err != nil {
		return "", fmt.Errorf("the real shell %s: %w", sh, err)
	}
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find this binary: %w", err)
	}
	if samePath(p, self) || strings.TrimPrefix(filepath.Base(p), "-") == shellName {
		return "", fmt.Errorf("the real shell %s is portcullis itself: set PORTCULLIS_REAL_SHELL to a real shell such as /bin/bash", sh)
	}
	return p, nil
}

func samePath(a, b string) bool {
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	return err1 == nil && err2 == nil && ra == rb
}

// parseShellArgs reads a shell's command line the way sh does, as far as
// portcullis-sh supports it: options (-l/--login, -e, -u, -x, -v, -o OPT,
// -i, --noprofile, --norc), -c and the command string. Anything it does
// not understand is refused: commands read from a file or from stdin, and
// positional arguments after the command string (which "$@" would run
// without the gate seeing them), are never run.
func parseShellArgs(args []string) (execSpec, error) {
	var s execSpec
	c := false
	i := 0
options:
	for ; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			i++
			break options
		case a == "--login":
			s.login = true
		case a == "--noprofile", a == "--norc":
		case a == "-o" || a == "+o":
			if i+1 >= len(args) {
				return s, fmt.Errorf("%s needs an option name", a)
			}
			s.shellFlags = append(s.shellFlags, a, args[i+1])
			i++
		case strings.HasPrefix(a, "-") && len(a) > 1 && !strings.HasPrefix(a, "--"):
			for _, f := range a[1:] {
				switch f {
				case 'c':
					c = true
				case 'l':
					s.login = true
				case 'i':
					// Interactive: a command string runs once either way.
				case 'e', 'u', 'x', 'v':
					s.shellFlags = append(s.shellFlags, "-"+string(f))
				default:
					return s, fmt.Errorf("option -%c is not supported (portcullis-sh runs commands given with -c)", f)
				}
			}
		default:
			break options
		}
	}
	rest := args[i:]
	switch {
	case !c:
		return s, errors.New("portcullis-sh runs only commands given with -c 'COMMANDS'; an interactive shell or a script file is not gated")
	case len(rest) == 0:
		return s, errors.New("-c needs the commands to run")
	case len(rest) > 1:
		return s, errors.New("arguments after the -c commands are not supported: the gate would not see what \"$@\" runs")
	}
	s.script, s.shell = rest[0], true
	return s, nil
}

// isTerminal reports whether r is a terminal: a person at the keyboard.
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
