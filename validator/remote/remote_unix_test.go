//go:build unix

package remote_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

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

// A program that stops reading its input (stuck, or stopped by someone)
// does not hold a question past its caller's deadline: the pipe fills, the
// write waits, and the question still ends with the context, the program
// ended so that the next question starts a fresh one.
func TestQuestionEndsWhenTheProgramStopsReading(t *testing.T) {
	stuck := filepath.Join(t.TempDir(), "stuck-provider")
	script := "#!/bin/sh\nread line\necho '{\"protocol\":" + strconv.Itoa(remote.Protocol) + ",\"name\":\"stuck\"}'\nexec sleep 600\n"
	if err := os.WriteFile(stuck, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := remote.New(remote.Options{Program: stuck, Config: remote.Config{Provider: "anthropic", Model: "m"}, RestartDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if _, err := m.Ask(shortContext(t), ask("a small question: the program reads none")); err == nil {
		t.Fatal("the stuck program answered")
	}
	pid := m.Pid()
	big := ask(strings.Repeat("a question larger than a pipe's buffer ", 1<<14))
	done := make(chan error, 1)
	go func() {
		_, err := m.Ask(shortContext(t), big)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Ask of a program that does not read = %v; want the caller's deadline", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Ask of a program that does not read outlived its caller's deadline")
	}
	if pid != 0 {
		if err := syscall.Kill(pid, 0); err == nil {
			// Reaped asynchronously: wait for the process to go.
			deadline := time.Now().Add(30 * time.Second)
			for syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
		}
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("the program that stopped reading (pid %d) still runs: kill 0 = %v", pid, err)
		}
	}
}

func shortContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	t.Cleanup(cancel)
	return ctx
}

// What the program prints on its standard error is shown in the error,
// with the API key taken out even when it has no shape a mask knows (a
// local server's key).
func TestProgramsStderrIsScrubbedOfTheKey(t *testing.T) {
	const key = "plainlocalkey42"
	leaky := filepath.Join(t.TempDir(), "leaky-provider")
	if err := os.WriteFile(leaky, []byte("#!/bin/sh\nread line\necho 'cannot reach the server with key "+key+"' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := remote.New(remote.Options{Program: leaky, Config: remote.Config{Provider: "openai", Model: "m", BaseURL: "http://127.0.0.1:1/v1"}, APIKey: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	_, err = m.Ask(t.Context(), ask("q"))
	if err == nil || !strings.Contains(err.Error(), "cannot reach the server") || strings.Contains(err.Error(), key) {
		t.Fatalf("Ask of a program that printed the key = %v; want its stderr shown without the key", err)
	}
}

// slowStart returns a program that starts prog only once release is
// called; started is closed when the program runs (before its hello), and
// pid returns its process id.
func slowStart(t *testing.T) (program string, started <-chan struct{}, release func(), pid func() int) {
	t.Helper()
	dir := t.TempDir()
	mark, goFile := filepath.Join(dir, "started"), filepath.Join(dir, "go")
	program = filepath.Join(dir, "slow-provider")
	script := "#!/bin/sh\necho $$ > " + mark + ".tmp && mv " + mark + ".tmp " + mark + "\n" +
		"while [ ! -e " + goFile + " ]; do sleep 0.01; done\nexec " + prog + "\n"
	if err := os.WriteFile(program, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		for {
			if _, err := os.Stat(mark); err == nil {
				return
			}
			select {
			case <-t.Context().Done():
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	release = func() {
		if err := os.WriteFile(goFile, nil, 0o600); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(release)
	pid = func() int {
		b, err := os.ReadFile(mark)
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	return program, ch, release, pid
}

// A question that comes while another question's start of the program is
// still running waits for it only as long as its own context allows: a
// slow start does not hold every caller to the start's own timeout.
func TestQuestionDoesNotWaitForAnotherStartPastItsDeadline(t *testing.T) {
	program, started, release, _ := slowStart(t)
	m := newModel(t, program, &fakeAPI{}, 0)
	first := make(chan error, 1)
	go func() {
		_, err := m.Ask(t.Context(), ask("first"))
		first <- err
	}()
	<-started
	second := make(chan error, 1)
	go func() {
		_, err := m.Ask(shortContext(t), ask("second"))
		second <- err
	}()
	select {
	case err := <-second:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Ask during another's start = %v; want its own deadline", err)
		}
	case <-time.After(30 * time.Second):
		release()
		t.Fatal("Ask during another's start waited for that start, past its own deadline")
	}
	release()
	if err := <-first; err != nil {
		t.Fatalf("the question that started the program = %v; want an answer", err)
	}
	if _, err := m.Ask(t.Context(), ask("third")); err != nil {
		t.Fatalf("Ask once the program runs = %v; want an answer", err)
	}
}

// Close during a start ends the program that start brings up, before
// Close returns: nothing is left running.
func TestCloseDuringStartEndsTheProgram(t *testing.T) {
	program, started, release, pid := slowStart(t)
	m := newModel(t, program, &fakeAPI{}, 0)
	first := make(chan error, 1)
	go func() {
		_, err := m.Ask(t.Context(), ask("first"))
		first <- err
	}()
	<-started
	closed := make(chan struct{})
	go func() {
		m.Close()
		close(closed)
	}()
	// Close waits for the start; let it finish.
	release()
	<-closed
	if err := syscall.Kill(pid(), 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("the program started during Close (pid %d) still runs: kill 0 = %v", pid(), err)
	}
	if err := <-first; err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("the question whose start Close overtook = %v; want an error saying the program was closed", err)
	}
}

// An answer line longer than the gateway keeps (a program, or the API
// behind it, writing without end) fails the question and ends the program,
// rather than being read whole into the gateway's memory.
func TestOverlongAnswerLineEndsTheProgram(t *testing.T) {
	chatty := filepath.Join(t.TempDir(), "chatty-provider")
	script := "#!/bin/sh\nread line\necho '{\"protocol\":" + strconv.Itoa(remote.Protocol) + ",\"name\":\"chatty\"}'\nread line\n" +
		"printf '{\"id\":1,\"answer\":{\"text\":\"'\nhead -c 3000000 /dev/zero | tr '\\0' a\nprintf '\"}}\\n'\nexec sleep 600\n"
	if err := os.WriteFile(chatty, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := remote.New(remote.Options{Program: chatty, Config: remote.Config{Provider: "anthropic", Model: "m"}, RestartDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	a, err := m.Ask(t.Context(), ask("q"))
	var e *remote.Error
	if !errors.As(err, &e) || !strings.Contains(err.Error(), "a line longer than") {
		t.Fatalf("Ask of a program that writes a 3 MB line = %d bytes of answer, %v; want an error saying the line is too long", len(a.Text), err)
	}
}

// The start belongs to no one question: when the question that began it
// gives up, the start goes on for the others waiting, which get the
// program it brings up rather than a second start.
func TestStartOutlivesTheQuestionThatBeganIt(t *testing.T) {
	program, started, release, pid := slowStart(t)
	m := newModel(t, program, &fakeAPI{}, 0)
	first := make(chan error, 1)
	go func() {
		_, err := m.Ask(shortContext(t), ask("first"))
		first <- err
	}()
	<-started
	firstPid := pid()
	second := make(chan error, 1)
	go func() {
		_, err := m.Ask(t.Context(), ask("second"))
		second <- err
	}()
	if err := <-first; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the question that began the start = %v; want its own deadline", err)
	}
	release()
	if err := <-second; err != nil {
		t.Fatalf("the question waiting for the start = %v; want an answer", err)
	}
	if got := m.Pid(); got != firstPid {
		t.Fatalf("the program runs as pid %d; want %d, the one the first start brought up", got, firstPid)
	}
}

// The last answer a program writes before it exits is read even without
// its line end.
func TestLastAnswerWithoutLineEnd(t *testing.T) {
	terse := filepath.Join(t.TempDir(), "terse-provider")
	script := "#!/bin/sh\nread line\necho '{\"protocol\":" + strconv.Itoa(remote.Protocol) + ",\"name\":\"terse\"}'\nread line\n" +
		"printf '{\"id\":1,\"answer\":{\"text\":\"done\"}}'\n"
	if err := os.WriteFile(terse, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := remote.New(remote.Options{Program: terse, Config: remote.Config{Provider: "anthropic", Model: "m"}, RestartDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	a, err := m.Ask(t.Context(), ask("q"))
	if err != nil || a.Text != "done" {
		t.Fatalf("Ask of a program whose last answer has no line end = %q, %v; want \"done\"", a.Text, err)
	}
}
