package notify

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/portcullis/portcullis"
)

const (
	// desktopTimeout bounds one run of the notification program.
	desktopTimeout = 5 * time.Second
	// maxDesktopRuns bounds the notification programs running at once; a
	// notice beyond it is dropped (and Notify says so) rather than queued.
	maxDesktopRuns = 4
	// desktopTitle is the title of every desktop notification.
	desktopTitle = "Portcullis"
)

// DesktopOptions configure a Desktop notifier.
type DesktopOptions struct {
	// Program is the notification program to run: its name on PATH or a
	// path. Default: DesktopProgram(). A program named osascript is given
	// an AppleScript `display notification`; any other is called like
	// notify-send.
	Program string
	// ConsoleURL, when set, is added to every notification as the place to
	// act on it ("Open the console: URL").
	ConsoleURL string
	// Logger receives failures of the program. Default: slog.Default().
	Logger *slog.Logger
}

// Desktop shows notices as desktop notifications: notify-send on Linux and
// the BSDs, osascript on macOS. A desktop is a human channel: a block's
// notification carries the verification code.
type Desktop struct {
	program    string
	osascript  bool
	consoleURL string
	log        *slog.Logger

	running chan struct{} // one token per program running
	wg      sync.WaitGroup
}

var _ portcullis.Notifier = (*Desktop)(nil)

// DesktopProgram names the notification program of this operating system:
// osascript on macOS, notify-send elsewhere but Windows, where there is none
// ("").
func DesktopProgram() string {
	switch runtime.GOOS {
	case "darwin":
		return "osascript"
	case "windows", "android", "ios", "plan9", "js", "wasip1":
		return ""
	}
	return "notify-send"
}

// NewDesktop returns a desktop notifier, or ok=false when the notification
// program is not available (not found on PATH), so a caller can say so.
func NewDesktop(opts DesktopOptions) (d *Desktop, ok bool) {
	prog := opts.Program
	if prog == "" {
		prog = DesktopProgram()
	}
	if prog == "" {
		return nil, false
	}
	path, err := exec.LookPath(prog)
	if err != nil {
		return nil, false
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Desktop{
		program:    path,
		osascript:  strings.TrimSuffix(filepath.Base(path), ".exe") == "osascript",
		consoleURL: opts.ConsoleURL,
		log:        log,
		running:    make(chan struct{}, maxDesktopRuns),
	}, true
}

// Notify starts the notification program in the background and returns at
// once. It returns an error only when the notice was dropped because too
// many notifications are still being shown.
func (d *Desktop) Notify(ctx context.Context, n portcullis.Notice) error {
	select {
	case d.running <- struct{}{}:
	default:
		return fmt.Errorf("desktop notification for decision %s dropped: %d notifications are still being shown", n.DecisionID, maxDesktopRuns)
	}
	args := d.args(n)
	// The program outlives the decision that asked for it, but not the
	// timeout.
	runCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), desktopTimeout)
	d.wg.Go(func() {
		defer func() { <-d.running }()
		defer cancel()
		cmd := exec.CommandContext(runCtx, d.program, args...)
		cmd.WaitDelay = time.Second
		var out bytes.Buffer
		cmd.Stdout = &out
		cmd.Stderr = &out
		if err := cmd.Run(); err != nil {
			d.log.Error("desktop notification failed", "program", filepath.Base(d.program), "kind", n.Kind, "agent", n.Agent, "decision", n.DecisionID, "err", err, "output", clean(out.String()))
		}
	})
	return nil
}

// Close waits until the notifications being shown have been handed to the
// desktop, or until ctx ends.
func (d *Desktop) Close(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		d.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("desktop notifications still running: %w", ctx.Err())
	}
}

// args are the program's arguments for a notice.
func (d *Desktop) args(n portcullis.Notice) []string {
	subtitle, lines := desktopText(n)
	if n.Link != "" {
		lines = append(lines, "Open: "+n.Link)
	} else if d.consoleURL != "" {
		lines = append(lines, "Open the console: "+d.consoleURL)
	}
	if d.osascript {
		script := "display notification " + appleScriptString(strings.Join(lines, "\n")) +
			" with title " + appleScriptString(desktopTitle) +
			" subtitle " + appleScriptString(subtitle)
		return []string{"-e", script}
	}
	urgency := "normal"
	if n.Kind == portcullis.NoticeBlock {
		urgency = "critical"
	}
	body := subtitle + "\n" + strings.Join(lines, "\n")
	// Notification servers read the body as markup; an agent's text must
	// not turn into a link.
	return []string{"--app-name=" + desktopTitle, "--urgency=" + urgency, "--", desktopTitle, markupEscaper.Replace(body)}
}

var markupEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// desktopText is a notification's subtitle and body lines.
func desktopText(n portcullis.Notice) (subtitle string, lines []string) {
	switch n.Kind {
	case portcullis.NoticeBlock:
		subtitle = "Agent " + clean(n.Agent) + " was stopped"
		lines = append(lines, clean(n.Reason))
		if n.ChallengeID != "" {
			lines = append(lines, "Challenge: "+clean(n.ChallengeID))
		}
		if n.Code != "" {
			code := "Code: " + clean(n.Code)
			if !n.ExpiresAt.IsZero() {
				code += " (valid until " + until(n.ExpiresAt) + ")"
			}
			lines = append(lines, code,
				"portcullis unblock "+clean(n.Agent)+" --challenge "+clean(n.ChallengeID)+" --code "+clean(n.Code))
		}
	case portcullis.NoticeApproval:
		subtitle = "Approval needed: " + orUnknown(n.Tool)
		if n.Agent != "" {
			subtitle += " (agent " + clean(n.Agent) + ")"
		}
		lines = append(lines, clean(n.Reason))
	case portcullis.NoticePendingLimit:
		subtitle = "Too many requests waiting"
		if n.Agent != "" {
			subtitle += " (agent " + clean(n.Agent) + ")"
		}
		lines = append(lines, clean(n.Reason))
	default:
		subtitle = clean(string(n.Kind))
		lines = append(lines, clean(n.Reason))
	}
	return subtitle, lines
}

// appleScriptString quotes s as an AppleScript string literal: backslashes
// and double quotes are escaped, a newline becomes \n, and other control
// characters become spaces, so no text can end the literal and add script.
func appleScriptString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r == '"':
			b.WriteString(`\"`)
		case r == '\n':
			b.WriteString(`\n`)
		case r < 0x20 || r == 0x7f:
			b.WriteByte(' ')
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
