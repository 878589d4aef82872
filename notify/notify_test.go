package notify_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/notify"
)

// blockNotice is a danger-zone notice with its code.
func blockNotice() portcullis.Notice {
	return portcullis.Notice{
		Kind: portcullis.NoticeBlock, Agent: "bot", DecisionID: "d1", ChallengeID: "chl_abc",
		Reason: "rm -rf / is in the danger zone", Code: "K7P2QX",
		ExpiresAt: time.Date(2030, 1, 2, 15, 4, 5, 0, time.UTC),
	}
}

func approvalNotice() portcullis.Notice {
	return portcullis.Notice{
		Kind: portcullis.NoticeApproval, Agent: "bot", Session: "s1", Tool: "delete_element",
		DecisionID: "d2", Reason: "Destructive operation, permanently removes data",
	}
}

// recorder keeps the notices it is given and returns err.
type recorder struct {
	got []portcullis.Notice
	err error
}

func (r *recorder) Notify(_ context.Context, n portcullis.Notice) error {
	r.got = append(r.got, n)
	return r.err
}

func TestMultiCallsEveryNotifier(t *testing.T) {
	errDown := errors.New("desktop down")
	first, second, third := &recorder{err: errDown}, &recorder{}, &recorder{err: errors.New("webhook closed")}
	m := notify.Multi{first, nil, second, third}
	err := m.Notify(context.Background(), blockNotice())
	if !errors.Is(err, errDown) || !strings.Contains(err.Error(), "webhook closed") {
		t.Errorf("Multi.Notify = %v; want both errors joined", err)
	}
	for i, r := range []*recorder{first, second, third} {
		if len(r.got) != 1 || r.got[0].Code != "K7P2QX" {
			t.Errorf("notifier %d got %v; want the notice once", i, r.got)
		}
	}
	if err := (notify.Multi{second}).Notify(context.Background(), approvalNotice()); err != nil {
		t.Errorf("Multi.Notify with no failure = %v; want nil", err)
	}
}

func TestWriterLine(t *testing.T) {
	tests := []struct {
		name   string
		notice portcullis.Notice
		want   []string
	}{
		{"block", blockNotice(), []string{"agent bot is blocked", "rm -rf / is in the danger zone", "challenge chl_abc", "code K7P2QX", "15:04:05 UTC", "portcullis unblock bot --challenge chl_abc --code K7P2QX", "decision d1"}},
		{"approval", approvalNotice(), []string{"approval needed for delete_element", "agent bot", "session s1", "permanently removes data", "decision d2"}},
		{"pending limit", portcullis.Notice{Kind: portcullis.NoticePendingLimit, Agent: "bot", DecisionID: "d3", Reason: `Agent "bot" has 50 approval requests waiting for you`, Link: "http://127.0.0.1:8470/approvals?agent=bot"},
			[]string{"too many requests waiting", `Agent "bot" has 50 approval requests waiting for you`, "decision d3", "/approvals?agent=bot"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := notify.NewWriter(&buf).Notify(context.Background(), tt.notice); err != nil {
				t.Fatal(err)
			}
			got := buf.String()
			if strings.Count(got, "\n") != 1 || !strings.HasSuffix(got, "\n") {
				t.Errorf("Writer wrote %q; want one line", got)
			}
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("Writer wrote %q; want it to contain %q", got, w)
				}
			}
		})
	}
}

// NewCommand shows a block over lines of their own, the command that
// clears it last, its expiry in local time; other notices on one line.
func TestCommandText(t *testing.T) {
	n := blockNotice()
	until := n.ExpiresAt.Local().Format(time.Kitchen)
	tests := []struct {
		notice portcullis.Notice
		want   string
	}{
		{n, "agent bot is blocked (rm -rf / is in the danger zone)\n  challenge: chl_abc\n  code:      K7P2QX   (valid until " + until + ")\n  clear it:  portcullis unblock bot --challenge chl_abc --code K7P2QX\n"},
		{approvalNotice(), "approval: Destructive operation, permanently removes data (decision d2)\n"},
	}
	for _, tt := range tests {
		var buf bytes.Buffer
		if err := notify.NewCommand(&buf).Notify(context.Background(), tt.notice); err != nil {
			t.Fatal(err)
		}
		if got := buf.String(); got != tt.want {
			t.Errorf("NewCommand wrote\n%q; want\n%q", got, tt.want)
		}
	}
	// An agent's name cannot add lines or send terminal escapes.
	n.Agent = "bot\n  code:      AAAAAA\x1b[2K"
	var buf bytes.Buffer
	if err := notify.NewCommand(&buf).Notify(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	if got := buf.String(); strings.Count(got, "\n") != 4 || strings.ContainsRune(got, '\x1b') {
		t.Errorf("NewCommand wrote %q; want four lines without escapes", got)
	}
}

// An agent's text cannot break the line or send terminal escapes.
func TestWriterCleansAgentText(t *testing.T) {
	n := blockNotice()
	n.Agent = "bot\n  code:      AAAAAA\x1b[2K"
	var buf bytes.Buffer
	if err := notify.NewWriter(&buf).Notify(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	if got := buf.String(); strings.Count(got, "\n") != 1 || strings.ContainsRune(got, '\x1b') {
		t.Errorf("Writer wrote %q; want one line without escapes", got)
	}
}

func TestWriterConcurrent(t *testing.T) {
	var buf bytes.Buffer
	w := notify.NewWriter(&buf)
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if err := w.Notify(context.Background(), blockNotice()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for i, line := range strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n") {
		if !strings.HasPrefix(line, "portcullis: agent bot is blocked") || !strings.HasSuffix(line, "decision d1") {
			t.Fatalf("line %d = %q; want whole lines", i, line)
		}
	}
	if n := strings.Count(buf.String(), "\n"); n != 50 {
		t.Errorf("Writer wrote %d lines; want 50", n)
	}
}

func TestLinkedSetsTheLinkEveryChannelShows(t *testing.T) {
	var buf bytes.Buffer
	l := notify.Linked{Next: notify.NewWriter(&buf), Link: func(n portcullis.Notice) string {
		return "http://127.0.0.1:8470/approvals/" + n.ChallengeID
	}}
	if err := l.Notify(context.Background(), portcullis.Notice{Kind: portcullis.NoticeApproval, Tool: "write_note", ChallengeID: "apr_1", Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "| http://127.0.0.1:8470/approvals/apr_1") {
		t.Fatalf("line %q does not link to the approval's page", buf.String())
	}
	buf.Reset()
	if err := l.Notify(context.Background(), portcullis.Notice{Kind: portcullis.NoticeApproval, ChallengeID: "apr_2", Link: "http://elsewhere/x"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "http://elsewhere/x") || strings.Contains(buf.String(), "apr_2\n") {
		t.Fatalf("a notice's own link was replaced: %q", buf.String())
	}
}

// TestApprovalLineSaysHowToAnswer: the terminal line of a call waiting
// for a person gives the commands that answer it, beside the console link.
func TestApprovalLineSaysHowToAnswer(t *testing.T) {
	var b strings.Builder
	n := approvalNotice()
	n.ChallengeID = "apr_7x"
	n.Link = "http://127.0.0.1:8470/approvals/apr_7x"
	if err := notify.NewWriter(&b).Notify(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"portcullis approve apr_7x", "portcullis deny apr_7x --reason", n.Link} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("line %q does not say %q", b.String(), want)
		}
	}
}
