//go:build unix

package command_test

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

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/validator/command"
)

// script writes an executable shell script into a test directory and
// returns its path.
func script(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o700); err != nil {
		t.Fatal(err)
	}
	return p
}

func newModel(t *testing.T, argv []string, opts command.Options) *command.Model {
	t.Helper()
	m, err := command.New(argv, opts)
	if err != nil {
		t.Fatalf("New(%q): %v", argv, err)
	}
	return m
}

var prompt = portcullis.ModelPrompt{System: "You are a gate.", User: "<<<ACTION-x>>>\nrm -rf /\n<<<END-ACTION-x>>>"}

const verdict = `{"verdict":"deny","reasoning":"destructive","whatWouldAuthorize":"","confidence":0.9}`

func TestObedientProgram(t *testing.T) {
	p := script(t, "judge.sh", `cat > "$0.stdin"
printf '%s\n' "$1"
`)
	m := newModel(t, []string{p, verdict}, command.Options{})
	if m.Name() != "command/judge.sh" {
		t.Errorf("Name() = %q; want command/judge.sh", m.Name())
	}
	a, err := m.Ask(context.Background(), prompt)
	if err != nil {
		t.Fatalf("Ask: %v", err)
	}
	if strings.TrimSpace(a.Text) != verdict || a.Structured || a.Truncated || a.Refused {
		t.Errorf("Ask = %+v; want the program's output as free text", a)
	}
	stdin, err := os.ReadFile(p + ".stdin")
	if err != nil {
		t.Fatal(err)
	}
	if want := prompt.System + "\n\n" + prompt.User; string(stdin) != want {
		t.Errorf("the program read %q; want %q", stdin, want)
	}
}

func TestTimeoutKillsTheGroup(t *testing.T) {
	p := script(t, "slow.sh", `sleep 30 &
echo $! > "$0.child"
sleep 30
`)
	m := newModel(t, []string{p}, command.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := m.Ask(ctx, prompt)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Ask past the deadline: %v; want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Ask returned after %v; want soon after the 300ms deadline", d)
	}
	b, err := os.ReadFile(p + ".child")
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Logf("cleanup: kill %d: %v", pid, err)
			}
			t.Fatalf("the program's child %d is still running after the timeout", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alive reports whether pid runs (a zombie, killed and awaiting its reaper,
// does not count).
func alive(pid int) bool {
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil {
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		return len(f) > 0 && f[0] != "Z"
	}
	return syscall.Kill(pid, 0) == nil
}

func TestFailures(t *testing.T) {
	cases := []struct {
		name, body string
		want       []string
	}{
		{"exit 1", "echo 'auth: invalid key' >&2\necho 'second line' >&2\nexit 1\n", []string{"exit status 1", "auth: invalid key", "second line"}},
		{"empty output", "cat >/dev/null\nprintf '  \\n'\n", []string{"printed nothing"}},
		{"long stderr", "i=0\nwhile [ $i -lt 100 ]; do echo \"line $i $i $i $i $i $i $i $i $i $i $i $i $i $i $i $i $i\" >&2; i=$((i+1)); done\nexit 3\n", []string{"exit status 3", "line 0", "line 4"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := newModel(t, []string{script(t, "p.sh", tc.body)}, command.Options{})
			_, err := m.Ask(context.Background(), prompt)
			if err == nil {
				t.Fatalf("Ask(%s): no error", tc.name)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Ask(%s) = %q; want it to mention %q", tc.name, err, w)
				}
			}
			if strings.Contains(err.Error(), "line 5 ") || len(err.Error()) > 700 {
				t.Errorf("Ask(%s) error is not bounded: %d bytes", tc.name, len(err.Error()))
			}
			if r, ok := err.(interface{ Retryable() bool }); ok && r.Retryable() {
				t.Errorf("Ask(%s) error is retryable", tc.name)
			}
		})
	}
	if _, err := newModel(t, []string{filepath.Join(t.TempDir(), "absent")}, command.Options{}).Ask(context.Background(), prompt); err == nil {
		t.Errorf("Ask(absent program): no error")
	}
	if _, err := command.New(nil, command.Options{}); err == nil {
		t.Errorf("New(no argv): no error")
	}
}

func TestTooMuchOutput(t *testing.T) {
	for name, body := range map[string]string{
		"bounded": "head -c 200000 /dev/zero | tr '\\0' a\n",
		"endless": "yes aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n",
	} {
		t.Run(name, func(t *testing.T) {
			m := newModel(t, []string{script(t, "loud.sh", body)}, command.Options{MaxOutput: 1000})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			a, err := m.Ask(ctx, prompt)
			if err != nil {
				t.Fatalf("Ask(%s): %v", name, err)
			}
			if !a.Truncated || len(a.Text) != 1000 {
				t.Errorf("Ask(%s) = truncated %v, %d bytes; want truncated at 1000", name, a.Truncated, len(a.Text))
			}
			if ctx.Err() != nil {
				t.Errorf("Ask(%s) ran until the deadline; want the program killed at the bound", name)
			}
		})
	}
}
