package notify_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/notify"
)

// fakeProgram writes a shell script named name into a temporary directory;
// each run appends its arguments to the returned file, each ended by NUL,
// and the run ended by a record separator (0x1e).
func fakeProgram(t *testing.T, name string) (program, out string) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("the fake notification program is a shell script")
	}
	dir := t.TempDir()
	out = filepath.Join(dir, "args")
	script := "#!/bin/sh\n{ for a in \"$@\"; do printf '%s\\000' \"$a\"; done; printf '\\036'; } >> " + shellQuote(out) + "\n"
	program = filepath.Join(dir, name)
	if err := os.WriteFile(program, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	return program, out
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// runs reads the argument lists the fake program recorded.
func runs(t *testing.T, out string) [][]string {
	t.Helper()
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("the fake program did not run: %v", err)
	}
	var all [][]string
	for rec := range strings.SplitSeq(strings.TrimSuffix(string(b), "\x1e"), "\x1e") {
		all = append(all, strings.Split(strings.TrimSuffix(rec, "\x00"), "\x00"))
	}
	return all
}

func closeDesktop(t *testing.T, d *notify.Desktop) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestDesktopNotifySend(t *testing.T) {
	program, out := fakeProgram(t, "notify-send")
	d, ok := notify.NewDesktop(notify.DesktopOptions{Program: program, ConsoleURL: "http://127.0.0.1:7878/"})
	if !ok {
		t.Fatalf("NewDesktop(%s) not available", program)
	}
	block := blockNotice()
	block.Reason = "rm -rf / <a href='x'>"
	if err := d.Notify(context.Background(), block); err != nil {
		t.Fatal(err)
	}
	closeDesktop(t, d) // one run at a time keeps the order of the records
	if err := d.Notify(context.Background(), approvalNotice()); err != nil {
		t.Fatal(err)
	}
	closeDesktop(t, d)
	if err := d.Notify(context.Background(), portcullis.Notice{Kind: portcullis.NoticePendingLimit, Agent: "bot", DecisionID: "d3", Reason: `Agent "bot" has 50 approval requests waiting for you`}); err != nil {
		t.Fatal(err)
	}
	closeDesktop(t, d)

	got := runs(t, out)
	if len(got) != 3 {
		t.Fatalf("the program ran %d times; want 3: %q", len(got), got)
	}
	if body := got[2][4]; !strings.Contains(body, "Too many requests waiting (agent bot)") || !strings.Contains(body, "50 approval requests waiting") {
		t.Errorf("pending limit: body = %q; want the agent and the count", body)
	}
	wantFlags := []string{"--app-name=Portcullis", "--urgency=critical", "--", "Portcullis"}
	if len(got[0]) != 5 || !slices.Equal(got[0][:4], wantFlags) {
		t.Fatalf("block: args = %q; want %q and a body", got[0], wantFlags)
	}
	body := got[0][4]
	for _, w := range []string{"Agent bot was stopped", "Challenge: chl_abc", "Code: K7P2QX", "portcullis unblock bot --challenge chl_abc --code K7P2QX", "&lt;a href='x'&gt;", "Open the console: http://127.0.0.1:7878/"} {
		if !strings.Contains(body, w) {
			t.Errorf("block: body %q lacks %q", body, w)
		}
	}
	if got[1][1] != "--urgency=normal" || got[1][3] != "Portcullis" {
		t.Errorf("approval: args = %q; want normal urgency and the title", got[1])
	}
	if body := got[1][4]; !strings.Contains(body, "delete_element") || !strings.Contains(body, "permanently removes data") || strings.Contains(body, "Code") {
		t.Errorf("approval: body = %q; want the tool and the reason, no code", body)
	}
}

func TestDesktopOsascript(t *testing.T) {
	program, out := fakeProgram(t, "osascript")
	d, ok := notify.NewDesktop(notify.DesktopOptions{Program: program})
	if !ok {
		t.Fatalf("NewDesktop(%s) not available", program)
	}
	n := blockNotice()
	n.Agent = `bot" & (do shell script "id") & "`
	if err := d.Notify(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	closeDesktop(t, d)
	got := runs(t, out)
	if len(got) != 1 || len(got[0]) != 2 || got[0][0] != "-e" {
		t.Fatalf("args = %q; want -e SCRIPT", got)
	}
	script := got[0][1]
	if !strings.HasPrefix(script, `display notification "`) || !strings.Contains(script, `with title "Portcullis"`) || !strings.Contains(script, "K7P2QX") {
		t.Errorf("script = %q; want a display notification titled Portcullis with the code", script)
	}
	if !strings.Contains(script, `Agent bot\" & (do shell script \"id\") & \" was stopped`) {
		t.Errorf("script = %q; want the agent's quotes escaped", script)
	}
}

func TestDesktopUnavailable(t *testing.T) {
	if d, ok := notify.NewDesktop(notify.DesktopOptions{Program: "portcullis-no-such-notifier"}); ok || d != nil {
		t.Errorf("NewDesktop(missing program) = %v, %v; want nil, false", d, ok)
	}
	t.Setenv("PATH", t.TempDir())
	if notify.DesktopProgram() == "" {
		return
	}
	if _, ok := notify.NewDesktop(notify.DesktopOptions{}); ok {
		t.Errorf("NewDesktop with %s not on PATH: ok; want not available", notify.DesktopProgram())
	}
}

// A failing program is logged, not returned: Notify has returned long
// before.
func TestDesktopProgramFails(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the fake notification program is a shell script")
	}
	program := filepath.Join(t.TempDir(), "notify-send")
	if err := os.WriteFile(program, []byte("#!/bin/sh\necho 'no bus' >&2\nexit 1\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	d, ok := notify.NewDesktop(notify.DesktopOptions{Program: program, Logger: logs.logger()})
	if !ok {
		t.Fatal("not available")
	}
	if err := d.Notify(context.Background(), blockNotice()); err != nil {
		t.Fatalf("Notify = %v; want nil (the failure is logged)", err)
	}
	closeDesktop(t, d)
	if got := logs.String(); !strings.Contains(got, "desktop notification failed") || !strings.Contains(got, "no bus") || strings.Contains(got, "K7P2QX") {
		t.Errorf("log = %q; want the failure with the program's output and without the code", got)
	}
}

func TestAppleScriptString(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"plain", "Agent bot was stopped", `"Agent bot was stopped"`},
		{"quotes", `say "hi"`, `"say \"hi\""`},
		{"backslash", `C:\tmp\`, `"C:\\tmp\\"`},
		{"backslash before quote", `\"`, `"\\\""`},
		{"newline", "a\nb", `"a\nb"`},
		{"control characters", "a\rb\x1bc\td\x7f", `"a b c d "`},
		{"injection", `" & (do shell script "id") & "`, `"\" & (do shell script \"id\") & \""`},
		{"unicode", "zoë ✓", `"zoë ✓"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := notify.AppleScriptString(tt.in); got != tt.want {
				t.Errorf("appleScriptString(%q) = %s; want %s", tt.in, got, tt.want)
			}
		})
	}
}

var _ portcullis.Notifier = (*notify.Desktop)(nil)
