package replay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/memstore"
	"github.com/portcullis/portcullis/policy"
	"github.com/portcullis/portcullis/replay"
)

func TestDecisionString(t *testing.T) {
	for _, tc := range []struct {
		d    replay.Decision
		want string
	}{
		{replay.Decision{Outcome: portcullis.OutcomeAllow, Level: portcullis.AutoApprove, Source: portcullis.SourceOperationDefault}, "allow AUTO_APPROVE"},
		{replay.Decision{Outcome: portcullis.OutcomeDeny, Level: portcullis.Deny, Code: portcullis.CodeElementPolicyViolation, Source: portcullis.SourceElementPolicy, SourceElement: "Lock"}, "deny DENY (ELEMENT_POLICY_VIOLATION, Lock)"},
		{replay.Decision{Outcome: portcullis.OutcomeConfirm, Level: portcullis.ConfirmSession, Code: portcullis.CodeConfirmationRequired, Source: portcullis.SourceElementPolicy, SourceElement: "Persona"}, "confirm CONFIRM_SESSION (Persona)"},
		{replay.Decision{Outcome: portcullis.OutcomeAllow, Level: portcullis.ConfirmSession, Source: portcullis.SourceSessionGrant}, "allow CONFIRM_SESSION (granted)"},
		{replay.Decision{Outcome: portcullis.OutcomeAllow, Level: portcullis.AutoApprove, Source: portcullis.SourceMode}, "allow AUTO_APPROVE (mode)"},
	} {
		if got := tc.d.String(); got != tc.want {
			t.Errorf("Decision%+v.String() = %q; want %q", tc.d, got, tc.want)
		}
	}
}

var (
	at      = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	changes = []replay.Change{
		{Seq: 5, Time: at, Tool: "delete_item", Agent: "bot",
			Old:  replay.Decision{Outcome: portcullis.OutcomeDeny, Level: portcullis.Deny, Code: portcullis.CodeElementPolicyViolation, SourceElement: "Lock"},
			New:  replay.Decision{Outcome: portcullis.OutcomeConfirm, Level: portcullis.ConfirmSingleUse, Code: portcullis.CodeConfirmationRequired},
			Kind: replay.KindLooser, Change: "deny DENY → confirm CONFIRM_SINGLE_USE"},
		{Seq: 12, Time: at.Add(time.Minute), Tool: "login", Session: "s1",
			Old:  replay.Decision{Outcome: portcullis.OutcomeConfirm, Level: portcullis.ConfirmSingleUse, Code: portcullis.CodeConfirmationRequired},
			New:  replay.Decision{Outcome: portcullis.OutcomeAllow, Level: portcullis.AutoApprove},
			Kind: replay.KindLooser, Change: "confirm CONFIRM_SINGLE_USE → allow AUTO_APPROVE",
			Redacted: []string{"password"}, Notes: []string{"validator not asked"}},
	}
	summary = replay.Summary{
		Policy: "new.yaml", Scanned: 20, Replayed: 18, Changed: 2, Looser: 2, Validator: 1,
		ByChange:    map[string]int64{"deny DENY → confirm CONFIRM_SINGLE_USE": 1, "confirm CONFIRM_SINGLE_USE → allow AUTO_APPROVE": 1},
		NotReplayed: map[string]int64{replay.SkipBlock: 1, replay.SkipBadRow: 1},
		Redacted:    1, RedactedArgs: map[string]int64{"password": 1},
		Unjudged: 3,
		FirstSeq: 1, LastSeq: 20,
	}
)

func TestPrinterTable(t *testing.T) {
	var out bytes.Buffer
	p := replay.NewPrinter(&out, false)
	for i := range changes {
		if err := p.Change(&changes[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Summary(&summary); err != nil {
		t.Fatal(err)
	}
	want := `SEQ  TIME                  AGENT  SESSION  TOOL         OLD                                         NEW                         NOTES
5    2026-11-21T12:00:00Z  bot    -        delete_item  deny DENY (ELEMENT_POLICY_VIOLATION, Lock)  confirm CONFIRM_SINGLE_USE
12   2026-11-21T12:01:00Z  -      s1       login        confirm CONFIRM_SINGLE_USE                  allow AUTO_APPROVE          redacted: password; validator not asked

Replayed 18 decisions (rows 1-20 of 20 audit rows read) under new.yaml: 2 would change (0 stricter, 2 looser, 1 newly judged by the validator)
       1  confirm CONFIRM_SINGLE_USE → allow AUTO_APPROVE
       1  deny DENY → confirm CONFIRM_SINGLE_USE
1 decision had redacted arguments (password ×1): they were replayed with "[redacted]" in their place, so a redacted shell command or path was not classified again
3 calls would now go to the validator, which has no recorded verdict for them: shown as if it allowed
1 decision not replayed: decided by a danger-zone block (state, not policy)
1 decision not replayed: row does not decode
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
}

func TestPrinterNoChanges(t *testing.T) {
	var out bytes.Buffer
	if err := replay.NewPrinter(&out, false).Summary(&replay.Summary{Policy: "p.yaml"}); err != nil {
		t.Fatal(err)
	}
	if want := "Replayed 0 decisions (no decisions of 0 audit rows read) under p.yaml: 0 would change\n"; out.String() != want {
		t.Errorf("summary of an empty replay = %q; want %q", out.String(), want)
	}
}

func TestPrinterJSON(t *testing.T) {
	var out bytes.Buffer
	p := replay.NewPrinter(&out, true)
	for i := range changes {
		if err := p.Change(&changes[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Summary(&summary); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("JSON lines: %d; want 2 changes and a summary:\n%s", len(lines), out.String())
	}
	for i, c := range changes {
		var got replay.Change
		if err := json.Unmarshal([]byte(lines[i]), &got); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(c, got); diff != "" {
			t.Errorf("change %d (-want +got):\n%s", i, diff)
		}
	}
	if !strings.Contains(lines[0], "→") {
		t.Errorf("a change's line escapes its arrow: %s", lines[0])
	}
	var sum struct{ Summary replay.Summary }
	if err := json.Unmarshal([]byte(lines[2]), &sum); err != nil || !strings.HasPrefix(lines[2], `{"summary":`) {
		t.Fatalf("summary line %q: %v", lines[2], err)
	}
	if diff := cmp.Diff(summary, sum.Summary); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
}

func TestProgressString(t *testing.T) {
	for _, tc := range []struct {
		p    replay.Progress
		want string
	}{
		{replay.Progress{Scanned: 1, Seq: 7, Changed: 1}, "replayed 1 row (up to row 7), 1 change so far…"},
		{replay.Progress{Scanned: 100000, Seq: 100040, Changed: 0}, "replayed 100000 rows (up to row 100040), 0 changes so far…"},
	} {
		if got := fmt.Sprint(tc.p); got != tc.want {
			t.Errorf("Progress%+v = %q; want %q", tc.p, got, tc.want)
		}
	}
}

// Write replays and writes in one call; its errors say what failed.
func TestWrite(t *testing.T) {
	ctx := context.Background()
	old, _, err := policy.Parse("old.yaml", []byte("version: 1\ntools:\n  send_email: {endpoint: CREATE}\n"))
	if err != nil {
		t.Fatal(err)
	}
	st := memstore.New(nil)
	g, err := gate.New(old, gate.WithStore(st))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Decide(ctx, portcullis.Call{Tool: "send_email", Session: "s1"}); err != nil {
		t.Fatal(err)
	}
	stricter, _, err := policy.Parse("new.yaml", []byte("version: 1\ntools:\n  send_email: {endpoint: CREATE, defaultLevel: DENY}\n"))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	sum, err := replay.Write(ctx, stricter, st, replay.Options{}, &out, false)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Changed != 1 || sum.Stricter != 1 {
		t.Errorf("Write summary = %+v; want 1 stricter change", sum)
	}
	for _, want := range []string{
		"s1       send_email  confirm CONFIRM_SESSION  deny DENY\n",
		"Replayed 1 decision (rows 1-1 of 1 audit row read) under new.yaml: 1 would change (1 stricter, 0 looser)\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("Write wrote\n%s\nwhich lacks %q", out.String(), want)
		}
	}

	refused, _, err := policy.Parse("bad.yaml", []byte("version: 1\ntools:\n  Bash: {endpoint: EXECUTE, shellArg: command}\nshell:\n  rules:\n    - {pattern: [git, push], decision: deny, match: [git status]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := replay.Write(ctx, refused, st, replay.Options{}, &out, false); err == nil || !strings.HasPrefix(err.Error(), "bad.yaml: ") {
		t.Errorf("Write under a policy the gate refuses = %v; want an error naming bad.yaml", err)
	}
}
