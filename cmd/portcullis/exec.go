package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/hook"
	"github.com/portcullis/portcullis/shellgate"
)

const execHelp = `exec [--policy FILE] [--state DIR | --store URL] [flags] -- COMMAND [ARGS...]
       exec [flags] -c 'SHELL COMMANDS'
       exec --shell [-l] -c 'SHELL COMMANDS'     (what portcullis-sh runs)

The command is classified and decided under the policy's shell tool; when
a person must approve it, exec waits (up to approvals.wait) for the answer.
An allowed command runs with this process's stdin, stdout and stderr, and
exec exits with its status. A command that is not allowed never starts:
exit status 126, the reason on stderr.`

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
func runExec(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	var (
		spec       shellgate.Spec
		sf         = stateFlags{perCall: true} // one decision per process
		nf         notifyFlags
		policyFlag string
		tool       string
		agent      string
		session    string
		noWait     bool
	)
	fs := newFlagSet("exec", stderr, execHelp)
	fs.StringVar(&policyFlag, "policy", "", "policy `file` (default $PORTCULLIS_POLICY, else the built-in default policy)")
	sf.register(fs)
	nf.register(fs)
	script := fs.String("c", "", "run these shell `commands` with the real shell (as sh -c does)")
	fs.StringVar(&tool, "tool", "", "the policy's shell `tool` to decide under (default: the first tool with shellArg)")
	fs.StringVar(&agent, "agent", "", "the agent `identity` (default $PORTCULLIS_AGENT, else shell)")
	fs.StringVar(&session, "session", "", "the session `id` grants are scoped to (default $PORTCULLIS_SESSION)")
	fs.BoolVar(&noWait, "no-wait", false, "do not wait for a person: a command that needs one exits 126 at once")
	if len(args) > 0 && args[0] == "--shell" {
		// A shell's command line: everything else comes from the
		// environment, as a login shell has no other way to be told.
		s, err := shellgate.ParseShellArgs(args[1:])
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", shellgate.ShellName, err)
			return &exitError{code: 2}
		}
		spec = s
	} else {
		// Flags come first; the command starts at "--" or at the first
		// argument that is not a flag, and its own flags are its own.
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return err
			}
			return &exitError{code: 2}
		}
		pos := fs.Args()
		c := false
		fs.Visit(func(f *flag.Flag) { c = c || f.Name == "c" })
		switch {
		case c && len(pos) > 0:
			return usageError("exec: give shell commands with -c, or a program after --, not both")
		case c:
			spec = shellgate.Spec{Script: *script, Shell: true}
		case len(pos) == 0:
			return usageError("exec needs a command: portcullis exec -- COMMAND [ARGS...] or portcullis exec -c 'COMMANDS'")
		default:
			spec = shellgate.Spec{Argv: pos}
		}
	}
	agent = firstNonEmpty(agent, strings.TrimSpace(os.Getenv("PORTCULLIS_AGENT")), "shell")
	session = firstNonEmpty(session, strings.TrimSpace(os.Getenv("PORTCULLIS_SESSION")))

	command, err := spec.Command()
	if err != nil {
		return usageError("exec: %v", err)
	}
	req := shellgate.Request{Command: command, Session: session, Agent: agent, UserPresent: isTerminal(stdin)}
	d, err := execDecide(ctx, req, &sf, &nf, policyFlag, tool, noWait, stderr)
	if err != nil {
		return err
	}
	if !d.Allowed() {
		fmt.Fprintf(stderr, "portcullis: not run: %s\n", strings.TrimPrefix(reasonLine(&d), "Portcullis: "))
		return &exitError{code: exitDenied}
	}
	code, err := spec.Run(ctx, stdin, stdout, stderr)
	switch {
	case err != nil:
		return &exitError{code: code, msg: err.Error()}
	case code != 0:
		return &exitError{code: code}
	}
	return nil
}

// execDecide wires the shell gate: the policy, the store and the people's
// channels, then decides the command (waiting for a person unless
// noWait). The store is closed before it returns: the command runs
// without Portcullis holding its state open.
func execDecide(ctx context.Context, req shellgate.Request, sf *stateFlags, nf *notifyFlags, policyFlag, tool string, noWait bool, stderr io.Writer) (portcullis.Decision, error) {
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
	name, arg, err := shellgate.Tool(pol, tool)
	if err != nil {
		return none, usageError("exec: %v", err)
	}
	sg := shellgate.Gate{
		Decider: g,
		Holder:  hook.WaitThenDecide{Waiter: g, Decider: g},
		Tool:    name,
		Arg:     arg,
		Wait:    pol.Approvals.Wait,
		OnWait: func(d portcullis.Decision, wait time.Duration) {
			fmt.Fprintf(stderr, "portcullis: %s\nportcullis: waiting up to %s for a person to approve %s (the Portcullis console, or `portcullis approve %s`)\n",
				strings.TrimPrefix(d.Reason, "Portcullis: "), wait, d.ChallengeID, d.ChallengeID)
		},
	}
	if noWait {
		sg.Holder = nil
	}
	d, err := sg.Decide(ctx, req)
	if err != nil {
		return d, &exitError{code: exitDenied, msg: "not run: " + err.Error()}
	}
	return d, nil
}

// reasonLine is a decision's reason and what would authorize the call.
func reasonLine(d *portcullis.Decision) string {
	r := d.Reason
	if d.WhatWouldAuthorize != "" {
		r += " (what would authorize it: " + d.WhatWouldAuthorize + ")"
	}
	return r
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
