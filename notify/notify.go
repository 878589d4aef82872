// Package notify delivers portcullis.Notice values to the people who watch
// the gateway: a desktop notification, a webhook, the terminal of a command
// a person runs, or several of these at once.
//
// These are human channels. A block notice carries the verification code
// that clears the block, and a notifier here must never deliver that code
// to anything an agent reads: not to an agent's output, a log an agent can
// reach, or a webhook that is not marked as a human channel (a Webhook
// drops the code unless WebhookOptions.Human is set).
//
// The gate calls Notify synchronously from inside a decision, so every
// notifier here returns at once: slow work (running a program, an HTTP
// request with retries) happens in the background, and a failed delivery is
// logged rather than holding up the decision.
package notify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/portcullis/portcullis"
)

// Multi fans a notice out to several notifiers. Every notifier is called,
// whatever the others return; nil entries are skipped.
type Multi []portcullis.Notifier

var _ portcullis.Notifier = Multi(nil)

// Notify calls every notifier and returns their errors joined.
func (m Multi) Notify(ctx context.Context, n portcullis.Notice) error {
	var errs []error
	for _, x := range m {
		if x == nil {
			continue
		}
		if err := x.Notify(ctx, n); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Writer writes one readable line per notice to an io.Writer: the terminal
// of a command a person runs. The line includes the verification code, so
// the writer must be a human channel. It is safe for concurrent use.
type Writer struct {
	mu sync.Mutex
	w  io.Writer
	// command: the notices of the person's own command (NewCommand).
	command bool
}

var _ portcullis.Notifier = (*Writer)(nil)

// NewWriter returns a notifier that writes to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// NewCommand returns a notifier that writes to w the notices of a
// command the person runs themselves (portcullis unblock --reissue): a
// block over several lines, the challenge, the code, when it expires (in
// local time) and the command that clears it, each on its own line; any
// other notice on one line.
func NewCommand(w io.Writer) *Writer { return &Writer{w: w, command: true} }

// Notify writes the notice's line.
func (w *Writer) Notify(_ context.Context, n portcullis.Notice) error {
	line := "portcullis: " + summary(n, true) + "\n"
	if w.command {
		line = commandText(n)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := io.WriteString(w.w, line); err != nil {
		return fmt.Errorf("notify: write: %w", err)
	}
	return nil
}

// summary is the one-line text of a notice. The code is included only when
// withCode is set.
func summary(n portcullis.Notice, withCode bool) string {
	var b strings.Builder
	switch n.Kind {
	case portcullis.NoticeBlock:
		fmt.Fprintf(&b, "agent %s is blocked: %s", clean(n.Agent), clean(n.Reason))
		if n.ChallengeID != "" {
			fmt.Fprintf(&b, " | challenge %s", clean(n.ChallengeID))
			if withCode && n.Code != "" {
				fmt.Fprintf(&b, ", code %s", clean(n.Code))
				if !n.ExpiresAt.IsZero() {
					fmt.Fprintf(&b, ", valid until %s", until(n.ExpiresAt))
				}
				fmt.Fprintf(&b, " | clear it: portcullis unblock %s --challenge %s --code %s", clean(n.Agent), clean(n.ChallengeID), clean(n.Code))
			} else {
				b.WriteString(" (the code is shown on the gateway's human channels)")
			}
		}
	case portcullis.NoticeApproval:
		fmt.Fprintf(&b, "approval needed for %s", orUnknown(n.Tool))
		if n.Agent != "" {
			fmt.Fprintf(&b, " by agent %s", clean(n.Agent))
		}
		if n.Session != "" {
			fmt.Fprintf(&b, " (session %s)", clean(n.Session))
		}
		fmt.Fprintf(&b, ": %s", clean(n.Reason))
		if n.ChallengeID != "" {
			id := clean(n.ChallengeID)
			fmt.Fprintf(&b, " | answer it: portcullis approve %s, or portcullis deny %s --reason TEXT", id, id)
		}
	case portcullis.NoticePendingLimit:
		fmt.Fprintf(&b, "too many requests waiting: %s", clean(n.Reason))
	default:
		fmt.Fprintf(&b, "%s: %s", clean(string(n.Kind)), clean(n.Reason))
	}
	if n.DecisionID != "" {
		fmt.Fprintf(&b, " | decision %s", clean(n.DecisionID))
	}
	if n.Link != "" {
		fmt.Fprintf(&b, " | %s", clean(n.Link))
	}
	return b.String()
}

// commandText is a notice as NewCommand's writer shows it.
func commandText(n portcullis.Notice) string {
	if n.Kind == portcullis.NoticeBlock {
		agent, id, code := clean(n.Agent), clean(n.ChallengeID), clean(n.Code)
		return fmt.Sprintf("agent %s is blocked (%s)\n  challenge: %s\n  code:      %s   (valid until %s)\n  clear it:  portcullis unblock %s --challenge %s --code %s\n",
			agent, clean(n.Reason), id, code, n.ExpiresAt.Local().Format(time.Kitchen), agent, id, code)
	}
	return fmt.Sprintf("%s: %s (decision %s)\n", clean(string(n.Kind)), clean(n.Reason), clean(n.DecisionID))
}

// Linked sets each notice's Link before passing it on: the page where a
// person acts on it. The gateway that serves the console uses it so every
// channel links to the approval's page.
type Linked struct {
	Next portcullis.Notifier
	// Link returns the page of a notice ("" for none).
	Link func(portcullis.Notice) string
}

// Notify sets the link (unless the notice has one) and passes it on.
func (l Linked) Notify(ctx context.Context, n portcullis.Notice) error {
	if n.Link == "" && l.Link != nil {
		n.Link = l.Link(n)
	}
	return l.Next.Notify(ctx, n)
}

func orUnknown(tool string) string {
	if tool == "" {
		return "a call"
	}
	return clean(tool)
}

// until formats an expiry time for a person.
func until(t time.Time) string { return t.UTC().Format("15:04:05 UTC") }

// maxField bounds each text field of a notification, so one long argument
// cannot bury the rest.
const maxField = 300

// clean makes text that may come from an agent (its name, a tool name, a
// reason quoting a command) safe to show a person on one line: control and
// format characters (newlines, terminal escapes, bidirectional overrides)
// become spaces, and long text is cut.
func clean(s string) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	var b strings.Builder
	n := 0
	for _, r := range s {
		if n == maxField {
			b.WriteString("…")
			break
		}
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			r = ' '
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}
