// Command portcullis is the one binary of the Portcullis permission gateway.
// With the command packages under internal/cmd it is the command layer,
// the only code that reads flags and the environment. This package keeps
// the process: main, the root command and its assembly from the command
// packages, the environment they are given (cmdutil.Env, filled here from
// the process and nowhere else), the signals, the mapping of errors to
// exit statuses, the portcullis-sh invocation and the version.
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
	"syscall"

	"github.com/spf13/pflag"

	"github.com/portcullis/portcullis/internal/cmd/cmdutil"
	"github.com/portcullis/portcullis/shellgate"
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

// exitCode prints err (if it has a message) and returns the process status:
// 0 for nil, the code of a cmdutil.ExitError, 2 for anything else (bad
// input).
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	var ee *cmdutil.ExitError
	if errors.As(err, &ee) {
		if ee.Msg != "" {
			fmt.Fprintln(stderr, "portcullis: "+ee.Msg)
		}
		return ee.Code
	}
	fmt.Fprintln(stderr, "portcullis: "+err.Error())
	return 2
}

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
