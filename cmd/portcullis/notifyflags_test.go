package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/notify"
)

// dangerPolicy makes `rm -rf /` from agent bot a danger-zone stop.
const dangerPolicy = `version: 1
tools:
  Bash: {endpoint: EXECUTE, shellArg: command}
elements:
  - name: bot
    type: agent
    active: true
    autonomy: {riskTolerance: moderate}
`

const dangerRequest = `{"tool":"Bash","agent":"bot","args":{"command":"rm -rf /"},"run":{"id":"r1","step":1}}` + "\n"

var codePattern = regexp.MustCompile(`^[0-9A-HJ-NP-Z]{6}$`)

func writePolicy(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// webhookSink is an httptest webhook that keeps every body it receives.
type webhookSink struct {
	mu     sync.Mutex
	bodies []string
	srv    *httptest.Server
}

func newWebhookSink(t *testing.T) *webhookSink {
	t.Helper()
	s := &webhookSink{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("read webhook body: %v", err)
		}
		s.mu.Lock()
		s.bodies = append(s.bodies, string(b))
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *webhookSink) received() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.bodies...)
}

// blockNoticeFrom decodes the one block notice the sink received.
func (s *webhookSink) blockNotice(t *testing.T) portcullis.Notice {
	t.Helper()
	got := s.received()
	if len(got) != 1 {
		t.Fatalf("the webhook received %d notices; want 1: %q", len(got), got)
	}
	var n portcullis.Notice
	if err := json.Unmarshal([]byte(got[0]), &n); err != nil {
		t.Fatalf("webhook body %q: %v", got[0], err)
	}
	if n.Kind != portcullis.NoticeBlock || n.Agent != "bot" {
		t.Fatalf("webhook notice = %+v; want a block of bot", n)
	}
	return n
}

// stopped runs decide on the danger request and returns its decision.
func stopped(t *testing.T, dir string, flags ...string) (portcullis.Decision, string, string) {
	t.Helper()
	args := append([]string{"decide", "--policy", writePolicy(t, dangerPolicy), "--state", dir}, flags...)
	code, stdout, stderr := runCLI(t, dangerRequest, args...)
	if code != 0 {
		t.Fatalf("decide exit %d: %s", code, stderr)
	}
	ds := decisions(t, stdout)
	if len(ds) != 1 || ds[0].Outcome != portcullis.OutcomeStop || ds[0].ChallengeID == "" {
		t.Fatalf("decide = %+v; want a stop with a challenge", ds)
	}
	return ds[0], stdout, stderr
}

func TestDecideNotifiesHumanWebhook(t *testing.T) {
	sink := newWebhookSink(t)
	dir := t.TempDir()
	d, stdout, stderr := stopped(t, dir, "--notify-webhook", sink.srv.URL+"/hook", "--notify-webhook-human")

	n := sink.blockNotice(t)
	if !codePattern.MatchString(n.Code) || n.ChallengeID != d.ChallengeID {
		t.Fatalf("webhook notice = %+v; want the challenge %s and a 6-character code", n, d.ChallengeID)
	}
	if strings.Contains(stdout, n.Code) {
		t.Fatalf("the decision on stdout carries the code %s: %s", n.Code, stdout)
	}
	if strings.Contains(stderr, n.Code) {
		t.Errorf("the log carries the code %s: %s", n.Code, stderr)
	}
	code, out, errOut := runCLI(t, "", "unblock", "bot", "--challenge", n.ChallengeID, "--code", n.Code, "--state", dir)
	if code != 0 || !strings.Contains(out, "unblocked bot") {
		t.Fatalf("unblock with the webhook's code = exit %d, %q, %q", code, out, errOut)
	}
}

// A webhook not marked human is told of the block without its code; a
// reissued code then reaches a human webhook as well as the terminal.
func TestWebhookWithoutHumanGetsNoCode(t *testing.T) {
	agentSide := newWebhookSink(t)
	dir := t.TempDir()
	d, _, _ := stopped(t, dir, "--notify-webhook", agentSide.srv.URL, "--notify-webhook-format", "slack")
	got := agentSide.received()
	if len(got) != 1 {
		t.Fatalf("the webhook received %d notices; want 1", len(got))
	}
	var p struct{ Text string }
	if err := json.Unmarshal([]byte(got[0]), &p); err != nil || !strings.Contains(p.Text, d.ChallengeID) || regexp.MustCompile(`code [0-9A-Z]{6}`).MatchString(p.Text) {
		t.Fatalf("slack payload %q (%v); want the challenge without a code", got[0], err)
	}

	human := newWebhookSink(t)
	code, stdout, stderr := runCLI(t, "", "unblock", "bot", "--reissue", "--state", dir, "--notify-webhook", human.srv.URL, "--notify-webhook-human")
	if code != 0 {
		t.Fatalf("unblock --reissue exit %d: %s", code, stderr)
	}
	n := human.blockNotice(t)
	if !codePattern.MatchString(n.Code) || !strings.Contains(stdout, n.Code) {
		t.Fatalf("reissued notice %+v, terminal %q; want the same new code on both", n, stdout)
	}
	if code, out, errOut := runCLI(t, "", "unblock", "bot", "--challenge", n.ChallengeID, "--code", n.Code, "--state", dir); code != 0 {
		t.Fatalf("unblock with the reissued code = exit %d, %q, %q", code, out, errOut)
	}
}

func TestDecideNotifiesDesktop(t *testing.T) {
	prog := notify.DesktopProgram()
	if prog == "" || runtime.GOOS == "windows" {
		t.Skipf("no desktop notification program on %s", runtime.GOOS)
	}
	bin := t.TempDir()
	out := filepath.Join(t.TempDir(), "args")
	script := "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done >> '" + out + "'\n"
	if err := os.WriteFile(filepath.Join(bin, prog), []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	d, stdout, _ := stopped(t, t.TempDir(), "--notify-desktop")
	args, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("%s did not run: %v", prog, err)
	}
	m := regexp.MustCompile(`Code: ([0-9A-Z]{6})`).FindSubmatch(args)
	if m == nil || !strings.Contains(string(args), d.ChallengeID) {
		t.Fatalf("%s was run with %q; want the challenge and the code", prog, args)
	}
	if strings.Contains(stdout, string(m[1])) {
		t.Fatalf("the decision on stdout carries the code: %s", stdout)
	}

	t.Setenv("PATH", t.TempDir())
	code, _, stderr := runCLI(t, dangerRequest, "decide", "--policy", writePolicy(t, dangerPolicy), "--state", t.TempDir(), "--notify-desktop")
	if code != 2 || !strings.Contains(stderr, prog) {
		t.Fatalf("--notify-desktop without %s = exit %d, %q; want 2 naming the program", prog, code, stderr)
	}
}

func TestNotifyFlagErrors(t *testing.T) {
	policy := writePolicy(t, dangerPolicy)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"decide without state", []string{"decide", "--policy", policy, "--notify-webhook", "http://127.0.0.1:1/"}, "--state"},
		{"human without a webhook", []string{"decide", "--policy", policy, "--state", t.TempDir(), "--notify-webhook-human"}, "need --notify-webhook"},
		{"format without a webhook", []string{"decide", "--policy", policy, "--state", t.TempDir(), "--notify-webhook-format", "slack"}, "need --notify-webhook"},
		{"bad webhook URL", []string{"decide", "--policy", policy, "--state", t.TempDir(), "--notify-webhook", "ftp://x/"}, "--notify-webhook"},
		{"bad webhook format", []string{"decide", "--policy", policy, "--state", t.TempDir(), "--notify-webhook", "http://127.0.0.1:1/", "--notify-webhook-format", "xml"}, "xml"},
		{"unblock without reissue", []string{"unblock", "--list", "--state", t.TempDir(), "--notify-webhook", "http://127.0.0.1:1/"}, "--reissue"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, dangerRequest, tt.args...)
			if code != 2 || !strings.Contains(stderr, tt.want) {
				t.Errorf("%s = exit %d, %q; want 2 mentioning %q", strings.Join(tt.args, " "), code, stderr, tt.want)
			}
		})
	}
}
