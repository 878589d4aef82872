package shellgate_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/shellgate"
)

// TestRunDecided: what `portcullis exec` does with the decision that
// stands: an allowed command runs with its own status; a refused one
// never starts, and stderr says why and what would authorize it.
func TestRunDecided(t *testing.T) {
	sg, _ := newGate(t, 0)
	marker := filepath.Join(t.TempDir(), "marker")
	for _, tc := range []struct {
		name       string
		spec       shellgate.Spec
		code       int
		ran        bool
		stderrHas  string
		stdoutWant string
	}{
		{"allowed", shellgate.Spec{Shell: true, Script: "touch " + marker + "; echo hi; exit 3"}, 3, true, "", "hi\n"},
		{"denied", shellgate.Spec{Shell: true, Script: "touch " + marker + "; reboot"}, shellgate.ExitDenied, false, "portcullis: not run: ", ""},
		{"not found", shellgate.Spec{Argv: []string{filepath.Join(t.TempDir(), "none")}}, shellgate.ExitNotFound, false, "portcullis: ", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(marker)
			command, err := tc.spec.Command()
			if err != nil {
				t.Fatal(err)
			}
			d, err := sg.Decide(context.Background(), shellgate.Request{Command: command, Agent: "shell"})
			if err != nil {
				t.Fatal(err)
			}
			if tc.name == "not found" {
				d.Outcome = portcullis.OutcomeAllow // as a policy allowing it would
			}
			var out, errb bytes.Buffer
			code := tc.spec.RunDecided(context.Background(), d, strings.NewReader(""), &out, &errb)
			if code != tc.code || exists(marker) != tc.ran || out.String() != tc.stdoutWant || !strings.Contains(errb.String(), tc.stderrHas) {
				t.Errorf("RunDecided(%s) = %d, ran %v, stdout %q, stderr %q; want %d, %v, %q, stderr with %q",
					d.Outcome, code, exists(marker), out.String(), errb.String(), tc.code, tc.ran, tc.stdoutWant, tc.stderrHas)
			}
		})
	}
	var errb bytes.Buffer
	d := portcullis.Decision{Outcome: portcullis.OutcomeDeny, Reason: "Portcullis: no", WhatWouldAuthorize: "a person"}
	if code := (&shellgate.Spec{Argv: []string{"true"}}).RunDecided(context.Background(), d, nil, &errb, &errb); code != shellgate.ExitDenied || errb.String() != "portcullis: not run: no (what would authorize it: a person)\n" {
		t.Errorf("RunDecided(deny) = %d, %q; want %d and the reason with what would authorize it", code, errb.String(), shellgate.ExitDenied)
	}
}

func TestSayWaiting(t *testing.T) {
	var b bytes.Buffer
	shellgate.SayWaiting(&b)(portcullis.Decision{Reason: "Portcullis: rm needs a person", ChallengeID: "apr_1"}, 20*time.Second)
	want := "portcullis: rm needs a person\nportcullis: waiting up to 20s for a person to approve apr_1 (the Portcullis console, or `portcullis approve apr_1`)\n"
	if b.String() != want {
		t.Errorf("SayWaiting wrote %q; want %q", b.String(), want)
	}
}

func TestIsTerminal(t *testing.T) {
	f, err := os.Open(filepath.Join(t.TempDir(), "."))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if shellgate.IsTerminal(f) || shellgate.IsTerminal(strings.NewReader("")) {
		t.Error("IsTerminal of a directory or a string reader = true; want false")
	}
	if tty, err := os.Open("/dev/tty"); err == nil {
		defer tty.Close()
		if !shellgate.IsTerminal(tty) {
			t.Error("IsTerminal(/dev/tty) = false; want true")
		}
	}
}
