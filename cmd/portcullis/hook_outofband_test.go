package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/policy"
	"github.com/portcullis/portcullis/sqlite"
)

// TestHookHoldsWhenThePolicySaysOutOfBand: with approvals.outOfBand in
// the policy, a call that needs a person is not handed to Claude Code's own
// "ask" but held until a person answers out of band — without --hold.
func TestHookHoldsWhenThePolicySaysOutOfBand(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile(claudePolicy)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(src), "outOfBand: false", "outOfBand: true", 1)
	if text == string(src) {
		t.Fatal("the example policy has no approvals.outOfBand to turn on")
	}
	pol := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(pol, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	event := claudeEvent(t, "Bash", map[string]any{"command": "npm install left-pad"})

	// Without the key the host asks.
	code, stdout, _ := runCLI(t, event, "hook", "claude-code", "--policy", claudePolicy, "--state", filepath.Join(dir, "other"))
	if d, _ := preToolUse(t, stdout); code != 0 || d != "ask" {
		t.Fatalf("without outOfBand: exit %d, %s; want ask", code, d)
	}

	// The person answers through the store the hook uses.
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(context.Background(), filepath.Join(state, "portcullis.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p, _, err := policy.Load(pol)
	if err != nil {
		t.Fatal(err)
	}
	person, err := gate.New(p, gate.WithStore(st))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		approvePending(t, person, st, true, "npm install left-pad")
	}()
	code, stdout, stderr := runCLI(t, event, "hook", "claude-code", "--policy", pol, "--state", state)
	<-done
	if d, reason := preToolUse(t, stdout); code != 0 || d != "allow" {
		t.Fatalf("with outOfBand, approved out of band: exit %d, %s (%s; %s); want allow", code, d, reason, stderr)
	}
}
