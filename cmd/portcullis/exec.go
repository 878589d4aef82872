package main

import (
	"context"
	"io"
	"os"
	"strings"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/hook"
	"github.com/portcullis/portcullis/shellgate"
)

// exitDenied is the exit status of a command the gate did not allow — the
// shell's "found but not executable".
const exitDenied = shellgate.ExitDenied

// shellInvocation reports whether the binary was started as portcullis-sh
// and returns the arguments of the exec command that stands for it.
func shellInvocation(argv0 string, args []string) ([]string, bool) {
	ok, login := shellgate.Invoked(argv0)
	if !ok {
		return nil, false
	}
	out := []string{"exec", "--shell"}
	if login {
		out = append(out, "-l")
	}
	return append(out, args...), true
}

// runExec is `portcullis exec` (and portcullis-sh): classify, decide, wait
// for a person when one must approve, then run the command with the
// caller's stdio and exit with its status.
func runExec(ctx context.Context, o *execOptions, spec shellgate.Spec, stdin io.Reader, stdout, stderr io.Writer) error {
	command, err := spec.Command()
	if err != nil {
		return usageError("exec: %v", err)
	}
	req := o.Request
	req.Command, req.UserPresent = command, shellgate.IsTerminal(stdin)
	req.Agent = firstNonEmpty(o.Agent, strings.TrimSpace(os.Getenv("PORTCULLIS_AGENT")), "shell")
	req.Session = firstNonEmpty(o.Session, strings.TrimSpace(os.Getenv("PORTCULLIS_SESSION")))
	d, err := execDecide(ctx, o, req, stderr)
	if err != nil {
		return err
	}
	if code := spec.RunDecided(ctx, d, stdin, stdout, stderr); code != 0 {
		return &exitError{code: code}
	}
	return nil
}

// execDecide decides the command under the policy's shell tool, waiting
// for a person unless --no-wait. The store is closed before it returns:
// the command runs without Portcullis holding its state open.
func execDecide(ctx context.Context, o *execOptions, req shellgate.Request, stderr io.Writer) (portcullis.Decision, error) {
	g, pol, cleanup, err := openAgentGate(ctx, o.policy, &o.state, &o.notify, cliLogger(stderr), stderr)
	if err != nil {
		return portcullis.Decision{}, err
	}
	defer cleanup()
	name, arg, err := shellgate.Tool(pol, o.tool)
	if err != nil {
		return portcullis.Decision{}, usageError("exec: %v", err)
	}
	sg := shellgate.Gate{Decider: g, Tool: name, Arg: arg, Wait: pol.Approvals.Wait, OnWait: shellgate.SayWaiting(stderr)}
	if !o.noWait {
		sg.Holder = hook.WaitThenDecide{Waiter: g, Decider: g}
	}
	d, err := sg.Decide(ctx, req)
	if err != nil {
		return d, &exitError{code: exitDenied, msg: "not run: " + err.Error()}
	}
	return d, nil
}
