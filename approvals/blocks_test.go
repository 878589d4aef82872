package approvals_test

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/approvals"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/sqlite"
)

// codes keeps the block notices a person would be sent.
type codes struct {
	mu  sync.Mutex
	got []portcullis.Notice
}

func (c *codes) Notify(_ context.Context, n portcullis.Notice) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, n)
	return nil
}

type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

func TestBlocks(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "portcullis.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	human := &codes{}
	g, err := gate.New(&portcullis.Policy{Version: 1}, gate.WithStore(st), gate.WithNotifier(human))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	b := &approvals.Blocks{Store: st, Gate: g, By: "cli:ana", Clock: fixedClock{at}}

	id, err := g.BlockAgent(ctx, "bot", "risk past the\n danger threshold", "d1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.BlockAgent(ctx, "other", "risk", "d2"); err != nil {
		t.Fatal(err)
	}
	list, err := st.Blocks(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("Blocks = %v, %v; want 2", list, err)
	}
	var out strings.Builder
	if err := approvals.WriteBlocks(&out, list); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.HasPrefix(s, "AGENT ") || !strings.Contains(s, "bot ") || !strings.Contains(s, id) || !strings.Contains(s, "risk past the danger threshold\n") {
		t.Errorf("WriteBlocks = %q; want a header and each block on one line with its challenge", s)
	}

	// A wrong code clears nothing and writes no row.
	wrong := "AAAAAA"
	if human.got[0].Code == wrong {
		wrong = "BBBBBB"
	}
	if err := b.Unblock(ctx, "bot", id, wrong); portcullis.ErrorCode(err) != portcullis.CodeVerificationFailed {
		t.Fatalf("Unblock(wrong code) = %v; want VERIFICATION_FAILED", err)
	}
	if err := b.Unblock(ctx, "bot", id, human.got[0].Code); err != nil {
		t.Fatalf("Unblock(right code) = %v", err)
	}
	if err := b.Clear(ctx, "other"); err != nil {
		t.Fatalf("Clear(other) = %v", err)
	}
	if list, err := st.Blocks(ctx); err != nil || len(list) != 0 {
		t.Fatalf("Blocks after clearing = %v, %v; want none", list, err)
	}

	recs, err := st.QueryAudit(ctx, portcullis.AuditQuery{Kind: portcullis.AuditUnblock})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		ev, err := r.Event()
		if err != nil {
			t.Fatal(err)
		}
		if !ev.Time.Equal(at) {
			t.Errorf("unblock row at %v; want the clock's %v", ev.Time, at)
		}
		got = append(got, ev.Agent+" "+ev.Actor+" "+ev.Detail)
	}
	want := []string{"bot cli:ana cleared with challenge " + id, "other cli:ana cleared by the administrator"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("unblock rows = %q; want %q", got, want)
	}
}

// List and ClearEach print what `portcullis unblock --list` and
// `--admin-token` do.
func TestBlocksListAndClearEach(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "portcullis.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	g, err := gate.New(&portcullis.Policy{Version: 1}, gate.WithStore(st), gate.WithNotifier(&codes{}))
	if err != nil {
		t.Fatal(err)
	}
	b := &approvals.Blocks{Store: st, Gate: g, By: "cli:ana"}
	var out strings.Builder
	if err := b.List(ctx, &out); err != nil || out.String() != "no agent is blocked\n" {
		t.Fatalf("List(none) = %q, %v", out.String(), err)
	}
	out.Reset()
	if err := b.ClearEach(ctx, nil, true, &out); err != nil || out.String() != "no agent is blocked\n" {
		t.Fatalf("ClearEach(all, none) = %q, %v", out.String(), err)
	}
	for _, a := range []string{"bot", "other", "third"} {
		if _, err := g.BlockAgent(ctx, a, "risk", "d-"+a); err != nil {
			t.Fatal(err)
		}
	}
	out.Reset()
	if err := b.List(ctx, &out); err != nil || !strings.HasPrefix(out.String(), "AGENT ") || strings.Count(out.String(), "\n") != 4 {
		t.Fatalf("List = %q, %v; want a header and three blocks", out.String(), err)
	}
	out.Reset()
	if err := b.ClearEach(ctx, []string{"other"}, false, &out); err != nil || out.String() != "unblocked other (administrator)\n" {
		t.Fatalf("ClearEach(other) = %q, %v", out.String(), err)
	}
	out.Reset()
	if err := b.ClearEach(ctx, nil, true, &out); err != nil || out.String() != "unblocked bot (administrator)\nunblocked third (administrator)\n" {
		t.Fatalf("ClearEach(all) = %q, %v", out.String(), err)
	}
	if list, err := st.Blocks(ctx); err != nil || len(list) != 0 {
		t.Fatalf("Blocks after ClearEach = %v, %v; want none", list, err)
	}
}

// Do does what `portcullis unblock` is asked, and says what does not fit.
func TestBlocksDo(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "portcullis.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	human := &codes{}
	g, err := gate.New(&portcullis.Policy{Version: 1}, gate.WithStore(st), gate.WithNotifier(human))
	if err != nil {
		t.Fatal(err)
	}
	b := &approvals.Blocks{Store: st, Gate: g, By: "cli:ana"}
	for _, tt := range []struct {
		r    approvals.UnblockRequest
		want string
	}{
		{approvals.UnblockRequest{List: true, Agents: []string{"bot"}}, "unblock --list takes no agent"},
		{approvals.UnblockRequest{Admin: true, All: true, Agents: []string{"bot"}}, "unblock --all takes no agent"},
		{approvals.UnblockRequest{Admin: true}, "unblock --admin-token takes one agent, or --all"},
		{approvals.UnblockRequest{}, "unblock takes one agent"},
		{approvals.UnblockRequest{Agents: []string{"bot"}, Challenge: "chl_1"}, "unblock bot needs --challenge ID and --code CODE (or --reissue for a new code)"},
	} {
		if err := b.Do(ctx, tt.r, io.Discard); err == nil || err.Error() != tt.want {
			t.Errorf("Do(%+v) = %v; want %q", tt.r, err, tt.want)
		}
	}

	first, err := g.BlockAgent(ctx, "bot", "risk", "d1")
	if err != nil {
		t.Fatal(err)
	}
	// A new code replaces the first; the first no longer clears.
	if err := b.Do(ctx, approvals.UnblockRequest{Agents: []string{"bot"}, Reissue: true}, io.Discard); err != nil || len(human.got) != 2 || human.got[1].ChallengeID == first {
		t.Fatalf("Do(reissue) = %v, notices %+v; want a new challenge sent", err, human.got)
	}
	var re *approvals.RefusedError
	if err := b.Do(ctx, approvals.UnblockRequest{Agents: []string{"bot"}, Challenge: first, Code: human.got[0].Code}, io.Discard); !errors.As(err, &re) {
		t.Fatalf("Do(the replaced challenge) = %v; want a *RefusedError", err)
	}
	var out strings.Builder
	n := human.got[1]
	if err := b.Do(ctx, approvals.UnblockRequest{Agents: []string{"bot"}, Challenge: n.ChallengeID, Code: n.Code}, &out); err != nil || out.String() != "unblocked bot\n" {
		t.Fatalf("Do(code) = %q, %v; want it unblocked", out.String(), err)
	}
	// Clearing an agent that is not blocked is not a refused code.
	if err := b.Do(ctx, approvals.UnblockRequest{Agents: []string{"bot"}, Admin: true}, io.Discard); portcullis.ErrorCode(err) != portcullis.CodeNotFound || errors.As(err, &re) {
		t.Fatalf("Do(admin, not blocked) = %v; want NOT_FOUND, not a refused code", err)
	}
}
