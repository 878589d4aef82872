package shellgate

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
	"time"

	"github.com/portcullis/portcullis"
)

// Run runs a command the gate allowed with the given stdin, stdout and
// stderr and returns its exit status: the program's own, 128+N when a
// signal N ended it. A command that could not be started returns an error
// with ExitNotFound (no such program) or ExitDenied (anything else). When
// ctx ends (portcullis got SIGINT or SIGTERM) the command is sent SIGTERM.
//
// Run must be called only for a decision that allows the command; it
// decides nothing.
func (s *Spec) Run(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	var cmd *exec.Cmd
	if s.Shell {
		sh, err := RealShell()
		if err != nil {
			return ExitDenied, err
		}
		var args []string
		if s.Login {
			args = append(args, "-l")
		}
		args = append(args, s.ShellFlags...)
		args = append(args, "-c", s.Script)
		cmd = exec.Command(sh, args...)
	} else {
		if len(s.Argv) == 0 {
			return ExitDenied, errors.New("no command")
		}
		cmd = exec.Command(s.Argv[0], s.Argv[1:]...)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	if err := cmd.Start(); err != nil {
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return ExitNotFound, err
		}
		return ExitDenied, err
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
		return 0, nil
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return ee.ExitCode(), nil
	}
	return ExitDenied, err
}

// RealShell is the shell that runs allowed shell commands:
// $PORTCULLIS_REAL_SHELL, else bash, else /bin/sh — never portcullis
// itself (this binary, or a program named portcullis-sh), which would
// decide the command again forever.
func RealShell() (string, error) {
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
	if samePath(p, self) || strings.TrimPrefix(filepath.Base(p), "-") == ShellName {
		return "", fmt.Errorf("the real shell %s is portcullis itself: set PORTCULLIS_REAL_SHELL to a real shell such as /bin/bash", sh)
	}
	return p, nil
}

func samePath(a, b string) bool {
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	return err1 == nil && err2 == nil && ra == rb
}

// RunDecided runs the command when d, the decision that stands (Gate's
// Decide), allows it, and returns its exit status (Run's). A command d
// does not allow never starts: the reason, and what would authorize it,
// are said on stderr, and the status is ExitDenied. A command that could
// not be started is said on stderr too.
func (s *Spec) RunDecided(ctx context.Context, d portcullis.Decision, stdin io.Reader, stdout, stderr io.Writer) int {
	if !d.Allowed() {
		why := strings.TrimPrefix(d.Reason, "Portcullis: ")
		if d.WhatWouldAuthorize != "" {
			why += " (what would authorize it: " + d.WhatWouldAuthorize + ")"
		}
		fmt.Fprintf(stderr, "portcullis: not run: %s\n", why)
		return ExitDenied
	}
	code, err := s.Run(ctx, stdin, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "portcullis: %v\n", err)
	}
	return code
}

// SayWaiting is a Gate's OnWait that tells the person at w (the agent's
// terminal) what the command waits for and where a person answers it.
func SayWaiting(w io.Writer) func(d portcullis.Decision, wait time.Duration) {
	return func(d portcullis.Decision, wait time.Duration) {
		fmt.Fprintf(w, "portcullis: %s\nportcullis: waiting up to %s for a person to approve %s (the Portcullis console, or `portcullis approve %s`)\n",
			strings.TrimPrefix(d.Reason, "Portcullis: "), wait, d.ChallengeID, d.ChallengeID)
	}
}

// IsTerminal reports whether r is a terminal: a person at the keyboard.
func IsTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
