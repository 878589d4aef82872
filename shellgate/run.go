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
