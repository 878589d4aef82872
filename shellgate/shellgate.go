// Package shellgate is the shell gate behind `portcullis exec` and the
// portcullis-sh login shell: it decides one shell command under the
// policy's shell tool, holds it while a person must approve it, and runs
// it only when the decision that stands allows it.
//
// It never decides anything itself: it consumes a portcullis.Decider (and,
// to wait for a person, a Holder), which *gate.Gate and the decision API's
// client satisfy. A command whose decision is not an allow, or that could
// not be decided, never starts. The package imports only the root package
// of this module; flags, the store and the output to people are the
// caller's.
package shellgate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"mvdan.cc/sh/v3/syntax"

	"github.com/portcullis/portcullis"
)

// ExitDenied is the exit status of a command the gate did not allow (and
// of one that could not be started): the shell's "found but not
// executable".
const ExitDenied = 126

// ExitNotFound is the exit status of a command whose program does not
// exist, as the shell's.
const ExitNotFound = 127

// Spec is what the gate decides and runs: a program with arguments, or
// shell commands for the real shell.
type Spec struct {
	// Argv is a program and its arguments, run directly (when Shell is
	// false).
	Argv []string
	// Script is the shell commands the real shell runs with -c (when
	// Shell is true; it may be empty).
	Script string
	// Shell says Script is set.
	Shell bool
	// Login runs the real shell as a login shell (-l).
	Login bool
	// ShellFlags are passed to the real shell before -c: -e, -u, -x, -v,
	// -o OPT.
	ShellFlags []string
}

// Command is the text the gate classifies: exactly what will run. Argv is
// quoted as a POSIX shell would need it, so the classifier reads the
// words the program receives.
func (s *Spec) Command() (string, error) {
	if s.Shell {
		return s.Script, nil
	}
	if len(s.Argv) == 0 {
		return "", errors.New("no command")
	}
	out := make([]string, len(s.Argv))
	for i, w := range s.Argv {
		q, err := syntax.Quote(w, syntax.LangPOSIX)
		if err != nil {
			return "", fmt.Errorf("quote %q: %w", w, err)
		}
		out[i] = q
	}
	return strings.Join(out, " "), nil
}

// Tool returns the policy tool commands are decided under and its command
// argument: the tool named (which must have shellArg), or with name empty
// the first tool with shellArg. The error says what is missing.
func Tool(pol *portcullis.Policy, name string) (tool, arg string, err error) {
	for _, t := range pol.Tools {
		switch {
		case name == "" && t.ShellArg != "":
			return t.Name, t.ShellArg, nil
		case name != "" && t.Name == name && t.ShellArg == "":
			return "", "", fmt.Errorf("tool %q has no shellArg: its commands would not be classified", name)
		case name != "" && t.Name == name:
			return t.Name, t.ShellArg, nil
		}
	}
	if name == "" {
		return "", "", errors.New("the policy has no shell tool: add a tools entry with shellArg (as examples/hcli/policy.yaml does), or name one with --tool")
	}
	return "", "", fmt.Errorf("the policy has no tool %q", name)
}

// Holder holds a call whose decision d needs a person until one answers,
// the request expires or ctx ends, and returns the decision that then
// stands (d itself while nobody has answered). hook.WaitThenDecide makes
// one of a gate; the decision API's client is one through a gateway.
type Holder interface {
	Hold(ctx context.Context, c portcullis.Call, d portcullis.Decision) (portcullis.Decision, error)
}

// Gate decides shell commands under one policy tool.
type Gate struct {
	// Decider decides the calls. Required.
	Decider portcullis.Decider
	// Holder waits for a person's answer; nil never waits.
	Holder Holder
	// Tool and Arg are the policy's shell tool and its command argument
	// (see Tool).
	Tool, Arg string
	// Wait is how long a command waits for a person (the policy's
	// approvals.wait); 0 never waits: a command that needs a person is
	// not run.
	Wait time.Duration
	// OnWait, when set, is called before the gate waits for a person's
	// answer to the decision's approval request, so the caller can say
	// what it waits for and where to answer.
	OnWait func(d portcullis.Decision, wait time.Duration)
}

// Request is one command to decide and who runs it.
type Request struct {
	// Command is the shell text classified (Spec.Command).
	Command string
	// Session scopes grants; Agent is the acting identity.
	Session, Agent string
	// UserPresent says a person is at the terminal, as the caller saw it
	// (never as the command's author stated it).
	UserPresent bool
}

// Call is the call a request is decided as.
func (g *Gate) Call(r Request) portcullis.Call {
	return portcullis.Call{
		Tool:        g.Tool,
		Args:        map[string]any{g.Arg: r.Command},
		Session:     r.Session,
		Agent:       r.Agent,
		UserPresent: r.UserPresent,
		// Seen by Portcullis's caller itself, not stated by the agent.
		ContextSource: portcullis.ContextHost,
	}
}

// Decide decides the command and, when a person must approve it and the
// gate may wait, holds it until the person answers or Wait has passed.
// It returns the decision that stands: the command may run only when that
// decision's Allowed reports true. Nobody answering in time is a deny
// that says so. A non-nil error means the command could not be decided or
// the wait failed: it must not run.
func (g *Gate) Decide(ctx context.Context, r Request) (portcullis.Decision, error) {
	if g.Decider == nil {
		return portcullis.Decision{}, errors.New("shellgate: no decider")
	}
	c := g.Call(r)
	d, err := g.Decider.Decide(ctx, c)
	if err != nil {
		return d, err
	}
	if d.Outcome != portcullis.OutcomeConfirm || d.ChallengeID == "" || g.Holder == nil || g.Wait <= 0 {
		return d, nil
	}
	if g.OnWait != nil {
		g.OnWait(d, g.Wait)
	}
	wctx, cancel := context.WithTimeout(ctx, g.Wait)
	defer cancel()
	d2, err := g.Holder.Hold(wctx, c, d)
	if err != nil {
		return d, fmt.Errorf("waiting for approval %s: %w", d.ChallengeID, err)
	}
	if d2.Outcome == portcullis.OutcomeConfirm && d2.DecisionID == d.DecisionID {
		d2.Outcome, d2.PermissionLevel = portcullis.OutcomeDeny, portcullis.Deny
		d2.Reason = "nobody approved " + d.ChallengeID + " within " + g.Wait.String()
	}
	return d2, nil
}
