//go:build unix

package remote_test

import (
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/portcullis/portcullis/validator/remote"
)

// TestProgramExitFailsItsQuestionsAndRestarts: the program killed under a
// question fails it with a retryable error; the next question starts it
// again.
func TestProgramExitFailsItsQuestionsAndRestarts(t *testing.T) {
	f := &fakeAPI{}
	m := newModel(t, prog, f, 0)
	errc := make(chan error, 1)
	go func() {
		_, err := m.Ask(t.Context(), ask("hang while killed"))
		errc <- err
	}()
	<-f.held
	pid := m.Pid()
	if pid == 0 {
		t.Fatal("no program runs while a question waits")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := <-errc
	var e *remote.Error
	if !errors.As(err, &e) || !e.Retryable() || !strings.Contains(err.Error(), "portcullis-provider exited") {
		t.Fatalf("Ask when the program was killed = %v; want a retryable error saying it exited", err)
	}
	if _, err := m.Ask(t.Context(), ask("after the restart")); err != nil {
		t.Fatalf("Ask after the program was killed = %v; want it started again and answering", err)
	}
	if again := m.Pid(); again == 0 || again == pid {
		t.Fatalf("the program's pid after the restart is %d (was %d); want a new process", again, pid)
	}
}

// TestProgramEndsWithItsInput: closing the model ends the program, and a
// question after that fails.
func TestProgramEndsWithItsInput(t *testing.T) {
	m := newModel(t, prog, &fakeAPI{}, 0)
	if _, err := m.Ask(t.Context(), ask("start")); err != nil {
		t.Fatal(err)
	}
	pid := m.Pid()
	m.Close()
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("the program (pid %d) after Close: kill 0 = %v; want it gone", pid, err)
	}
	if _, err := m.Ask(t.Context(), ask("after close")); err == nil {
		t.Fatal("Ask after Close answered; want an error")
	}
}
