// Command portcullis is the one binary of the Portcullis permission gateway.
// It is the only package that wires the engine to its adapters: flags,
// environment and files are read here and nowhere else.
//
// main calls run (root.go), which takes its arguments and streams
// explicitly, so tests run the real command in process.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/pflag"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	args := os.Args[1:]
	// Started as portcullis-sh (a link to this binary): a login-shell
	// wrapper that gates every command it is given.
	if sh, ok := shellInvocation(os.Args[0], args); ok {
		args = sh
	}
	err := run(ctx, args, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// exitError carries an exit status; its message, when non-empty, is printed.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// usageError is a command-line mistake: exit status 2.
func usageError(format string, args ...any) error {
	return &exitError{code: 2, msg: fmt.Sprintf(format, args...)}
}

// exitCode prints err (if it has a message) and returns the process status:
// 0 for nil, the code of an exitError, 2 for anything else (bad input).
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintln(stderr, "portcullis: "+ee.msg)
		}
		return ee.code
	}
	fmt.Fprintln(stderr, "portcullis: "+err.Error())
	return 2
}

// policyPath returns the --policy value or $PORTCULLIS_POLICY.
func policyPath(flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	if env := strings.TrimSpace(os.Getenv("PORTCULLIS_POLICY")); env != "" {
		return env, nil
	}
	return "", usageError("no policy file: pass --policy FILE or set PORTCULLIS_POLICY")
}

// defaultPolicyNotice is said once on stderr by a command that falls back
// on the built-in default policy.
const defaultPolicyNotice = "no --policy given: using the built-in default policy (portcullis policy show-default prints it)"

// agentPolicyPath is policyPath for the commands that gate an agent (hook,
// exec, mcp, decide): with neither --policy nor $PORTCULLIS_POLICY it says
// so on stderr and returns "", which loadAgentGate reads as the built-in
// default policy.
func agentPolicyPath(flagValue string, stderr io.Writer) string {
	if path, err := policyPath(flagValue); err == nil {
		return path
	}
	fmt.Fprintln(stderr, defaultPolicyNotice)
	return ""
}
