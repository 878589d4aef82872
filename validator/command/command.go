// Package command is a portcullis.Model that runs a configured program —
// h-cli's `claude -p --model haiku` or any program that reads a
// prompt on stdin and prints an answer — once per question.
//
// It transports, it does not judge: the answer is returned as free text
// (Structured is false) for package validator to parse strictly. It must not
// leave processes behind: the program runs in its own process group, and the
// whole group is killed when the context ends. Its errors are never
// retryable: a program that failed once is not asked again within one
// validation.
package command

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/portcullis/portcullis"
)

// Defaults of Options.
const (
	DefaultMaxOutput = 64 << 10
	// stderrKept bounds the standard error kept for an error message.
	stderrKept = 4 << 10
	// stderrLines and stderrBytes bound the part of it an error shows.
	stderrLines = 5
	stderrBytes = 500
)

// Options configures a Model.
type Options struct {
	// MaxOutput bounds the standard output read (bytes); a program that
	// prints more is killed and its answer marked Truncated. Default 64 KiB.
	MaxOutput int
	// Env is the program's environment; nil means this process's.
	Env []string
	// Dir is the program's working directory; empty means this process's.
	Dir string
	// WaitDelay bounds the wait for the program's output to close after it
	// was killed or exited (a child that kept the pipe open). Default 1s.
	WaitDelay time.Duration
}

// Model runs a program per question. It is safe for concurrent use.
type Model struct {
	argv []string
	opts Options
	name string
}

var _ portcullis.Model = (*Model)(nil)

// New returns a Model running argv: argv[0] is the program (looked up in
// PATH when it has no slash), the rest its arguments.
func New(argv []string, opts Options) (*Model, error) {
	if len(argv) == 0 || argv[0] == "" {
		return nil, errors.New("command: no program to run (validator.command is empty)")
	}
	if opts.MaxOutput < 0 || opts.WaitDelay < 0 {
		return nil, errors.New("command: negative MaxOutput or WaitDelay")
	}
	if opts.MaxOutput == 0 {
		opts.MaxOutput = DefaultMaxOutput
	}
	if opts.WaitDelay == 0 {
		opts.WaitDelay = time.Second
	}
	return &Model{argv: slices.Clone(argv), opts: opts, name: "command/" + filepath.Base(argv[0])}, nil
}

// Name returns "command/" and the program's base name.
func (m *Model) Name() string { return m.name }

// Ask runs the program with p.System, a blank line and p.User on its
// standard input, and returns its standard output as the answer. A nonzero
// exit, a program that cannot start, an empty output or the end of ctx is
// an error (naming the first lines of the program's standard error); output
// beyond MaxOutput gives an answer marked Truncated.
func (m *Model) Ask(ctx context.Context, p portcullis.ModelPrompt) (portcullis.ModelAnswer, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stdout := &boundedBuffer{max: m.opts.MaxOutput, onFull: cancel}
	stderr := &boundedBuffer{max: stderrKept}
	cmd := exec.CommandContext(ctx, m.argv[0], m.argv[1:]...)
	cmd.Stdin = strings.NewReader(p.System + "\n\n" + p.User)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.Env, cmd.Dir = m.opts.Env, m.opts.Dir
	cmd.WaitDelay = m.opts.WaitDelay
	ownGroup(cmd)
	err := cmd.Run()
	if stdout.full() {
		return portcullis.ModelAnswer{Text: stdout.String(), Truncated: true}, nil
	}
	if cerr := context.Cause(ctx); cerr != nil && err != nil {
		return portcullis.ModelAnswer{}, fmt.Errorf("%s: %w", m.name, cerr)
	}
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return portcullis.ModelAnswer{}, fmt.Errorf("%s: %v%s", m.name, exit, firstLines(stderr.String()))
		}
		return portcullis.ModelAnswer{}, fmt.Errorf("%s: %w", m.name, err)
	}
	out := stdout.String()
	if strings.TrimSpace(out) == "" {
		return portcullis.ModelAnswer{}, fmt.Errorf("%s: the program printed nothing%s", m.name, firstLines(stderr.String()))
	}
	return portcullis.ModelAnswer{Text: out}, nil
}

// firstLines returns ": " and the first lines of a program's standard error,
// bounded, or "" when there is none.
func firstLines(s string) string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() && len(lines) < stderrLines {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		return ""
	}
	msg := strings.Join(lines, " | ")
	if len(msg) > stderrBytes {
		msg = strings.ToValidUTF8(msg[:stderrBytes], "") + "…"
	}
	return ": " + msg
}

// boundedBuffer keeps the first max bytes written and discards the rest,
// calling onFull once when it overflows.
type boundedBuffer struct {
	max    int
	onFull func()

	mu       sync.Mutex
	buf      bytes.Buffer
	overflow bool
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	room := b.max - b.buf.Len()
	if len(p) > room {
		b.buf.Write(p[:max(room, 0)])
		if !b.overflow {
			b.overflow = true
			if b.onFull != nil {
				b.onFull()
			}
		}
		return len(p), nil
	}
	b.buf.Write(p)
	return len(p), nil
}

func (b *boundedBuffer) full() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.overflow
}

func (b *boundedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
