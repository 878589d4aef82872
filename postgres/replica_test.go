package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/storetest"
)

// Two gateway replicas in one process: two Stores on one database and
// schema, each with its own connections and listener.

func TestReplicasShareState(t *testing.T) {
	dsn := testDSN(t)
	t.Parallel()
	ctx := context.Background()
	schema := freshSchema(t)
	clock := storetest.NewClock()
	a := openStore(t, dsn, schema, clock)
	b := openStore(t, dsn, schema, clock)

	// A grant made through one replica holds on the other at once.
	g, err := a.AddGrant(ctx, portcullis.Grant{Kind: portcullis.GrantSession, Tool: "deploy", Session: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	if got, ok, err := b.UseGrant(ctx, portcullis.GrantQuery{Session: "s1", Tool: "deploy", Level: portcullis.ConfirmSession, Now: clock.Now()}); err != nil || !ok || got.ID != g.ID {
		t.Fatalf("replica B UseGrant = %q, %v, %v; want replica A's grant %q", got.ID, ok, err, g.ID)
	}
	if err := b.RevokeGrant(ctx, g.ID); err != nil {
		t.Fatalf("replica B RevokeGrant(A's grant): %v", err)
	}
	if _, ok, err := a.UseGrant(ctx, portcullis.GrantQuery{Session: "s1", Tool: "deploy", Level: portcullis.ConfirmSession, Now: clock.Now()}); err != nil || ok {
		t.Fatalf("replica A UseGrant after B revoked = %v, %v; want none", ok, err)
	}

	// An approval asked on one replica is decided on the other, once.
	apr := portcullis.Approval{
		ID: "apr_1", DecisionID: "d1", Status: portcullis.ApprovalPending, Tool: "deploy", Level: portcullis.ConfirmSingleUse,
		Call:      portcullis.Call{Tool: "deploy", Session: "s1", Agent: "bot", Args: map[string]any{"env": "prod"}},
		CreatedAt: clock.Now(), ExpiresAt: clock.Now().Add(5 * time.Minute), ArgsDigest: "sha256:d",
	}
	if err := a.CreateApproval(ctx, apr); err != nil {
		t.Fatal(err)
	}
	if _, err := b.DecideApproval(ctx, "apr_1", portcullis.ApprovalDecision{Status: portcullis.ApprovalApproved, By: "ana", At: clock.Now()}); err != nil {
		t.Fatalf("replica B DecideApproval(A's request): %v", err)
	}
	if got, err := a.Approval(ctx, "apr_1"); err != nil || got.Status != portcullis.ApprovalApproved || got.DecidedBy != "ana" {
		t.Fatalf("replica A Approval after B approved = %+v, %v; want approved by ana", got, err)
	}
	_, err = a.DecideApproval(ctx, "apr_1", portcullis.ApprovalDecision{Status: portcullis.ApprovalDenied, By: "bo", At: clock.Now()})
	if code := portcullis.ErrorCode(err); code != portcullis.CodeConflict {
		t.Fatalf("replica A DecideApproval after B decided: %v (code %q); want CONFLICT", err, code)
	}

	// A block put through one replica stops the agent on the other.
	if err := b.PutBlock(ctx, portcullis.Block{Agent: "bot", Reason: "risk 95", ChallengeID: "chl_1", CreatedAt: clock.Now()}); err != nil {
		t.Fatal(err)
	}
	if blk, ok, err := a.Block(ctx, "bot"); err != nil || !ok || blk.ChallengeID != "chl_1" {
		t.Fatalf("replica A Block(bot) after B blocked it = %+v, %v, %v", blk, ok, err)
	}
}

func TestReplicasConsumeSingleUseGrantOnce(t *testing.T) {
	dsn := testDSN(t)
	t.Parallel()
	ctx := context.Background()
	schema := freshSchema(t)
	clock := storetest.NewClock()
	replicas := []portcullis.Store{openStore(t, dsn, schema, clock), openStore(t, dsn, schema, clock)}
	const rounds, callers = 20, 16
	for round := range rounds {
		args := map[string]any{"round": json.Number(fmt.Sprint(round))}
		g, err := replicas[round%2].AddGrant(ctx, portcullis.Grant{Kind: portcullis.GrantSingle, Tool: "rm", Session: "s", Args: args})
		if err != nil {
			t.Fatal(err)
		}
		var used atomic.Int32
		var wg sync.WaitGroup
		for i := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, ok, err := replicas[i%2].UseGrant(ctx, portcullis.GrantQuery{Session: "s", Tool: "rm", ArgsDigest: g.ArgsDigest,
					Level: portcullis.ConfirmSingleUse, Consume: true, Now: clock.Now()})
				if err != nil {
					t.Error(err)
				}
				if ok {
					used.Add(1)
				}
			}()
		}
		wg.Wait()
		if n := used.Load(); n != 1 {
			t.Fatalf("round %d: %d callers on two replicas consumed one single-use grant %d times; want once", round, callers, n)
		}
	}
}

func TestReplicasAppendOneChain(t *testing.T) {
	dsn := testDSN(t)
	t.Parallel()
	ctx := context.Background()
	schema := freshSchema(t)
	clock := storetest.NewClock()
	replicas := []portcullis.Store{openStore(t, dsn, schema, clock), openStore(t, dsn, schema, clock)}
	const writers, each = 16, 25
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				ev := portcullis.AuditEvent{Kind: portcullis.AuditDecision, Time: clock.Now(), DecisionID: fmt.Sprintf("d%d-%d", w, i),
					Session: fmt.Sprintf("s%d", w), Tool: "t", Outcome: portcullis.OutcomeAllow}
				if _, err := replicas[w%2].AppendAudit(ctx, ev, ev); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for i, s := range replicas {
		v, err := portcullis.VerifyAudit(ctx, s, nil)
		if err != nil {
			t.Fatal(err)
		}
		if want := int64(writers * each * 2); !v.OK() || v.Rows != want || v.LastSeq != want {
			t.Fatalf("replica %d: VerifyAudit after concurrent appends from two replicas = %+v; want %d rows in one chain", i, v, want)
		}
	}
}

// TestReplicasAlternateAppends appends through one replica, then the other:
// each finds the head moved by the other since its own last append.
func TestReplicasAlternateAppends(t *testing.T) {
	dsn := testDSN(t)
	t.Parallel()
	ctx := context.Background()
	schema := freshSchema(t)
	clock := storetest.NewClock()
	replicas := []portcullis.Store{openStore(t, dsn, schema, clock), openStore(t, dsn, schema, clock)}
	prev := portcullis.GenesisHash
	for i := range 12 {
		ev := portcullis.AuditEvent{Kind: portcullis.AuditDecision, Time: clock.Now(), DecisionID: fmt.Sprintf("d%d", i)}
		recs, err := replicas[i/2%2].AppendAudit(ctx, ev)
		if err != nil {
			t.Fatal(err)
		}
		if want := int64(i + 1); recs[0].Seq != want || recs[0].PrevHash != prev {
			t.Fatalf("append #%d through replica %d = seq %d after %s; want seq %d after %s", i, i/2%2, recs[0].Seq, recs[0].PrevHash, want, prev)
		}
		prev = recs[0].Hash
	}
	if v, err := portcullis.VerifyAudit(ctx, replicas[0], nil); err != nil || !v.OK() || v.Rows != 12 {
		t.Fatalf("VerifyAudit = %+v, %v; want 12 rows in one chain", v, err)
	}
}

func TestReplicasWatch(t *testing.T) {
	dsn := testDSN(t)
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	schema := freshSchema(t)
	clock := storetest.NewClock()
	a := openStore(t, dsn, schema, clock)
	b := openStore(t, dsn, schema, clock)
	ch, err := b.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	expect := func(what string, want portcullis.Change) {
		t.Helper()
		deadline := time.After(time.Second)
		for {
			select {
			case c, ok := <-ch:
				if !ok {
					t.Fatalf("%s: watch channel closed", what)
				}
				if c == want {
					return
				}
			case <-deadline:
				t.Fatalf("%s: replica B's watcher did not hear %+v within a second", what, want)
			}
		}
	}
	g, err := a.AddGrant(ctx, portcullis.Grant{Kind: portcullis.GrantSession, Tool: "t", Session: "s"})
	if err != nil {
		t.Fatal(err)
	}
	expect("AddGrant on A", portcullis.Change{Kind: portcullis.ChangeGrant, ID: g.ID})
	if err := a.PutBlock(ctx, portcullis.Block{Agent: "bot", CreatedAt: clock.Now()}); err != nil {
		t.Fatal(err)
	}
	expect("PutBlock on A", portcullis.Change{Kind: portcullis.ChangeBlock, ID: "bot"})
	if err := a.CreateApproval(ctx, portcullis.Approval{ID: "apr_w", Status: portcullis.ApprovalPending, Call: portcullis.Call{Tool: "t"}, CreatedAt: clock.Now()}); err != nil {
		t.Fatal(err)
	}
	expect("CreateApproval on A", portcullis.Change{Kind: portcullis.ChangeApproval, ID: "apr_w"})
	if _, err := a.DecideApproval(ctx, "apr_w", portcullis.ApprovalDecision{Status: portcullis.ApprovalDenied, At: clock.Now()}); err != nil {
		t.Fatal(err)
	}
	expect("DecideApproval on A", portcullis.Change{Kind: portcullis.ChangeApproval, ID: "apr_w"})
	if err := a.PutToolPin(ctx, portcullis.ToolPin{Upstream: "fs", Tool: "read", Hash: "h", Definition: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	expect("PutToolPin on A", portcullis.Change{Kind: portcullis.ChangePin, ID: "fs/read"})
	if err := a.DeleteBlock(ctx, "bot"); err != nil {
		t.Fatal(err)
	}
	expect("DeleteBlock on A", portcullis.Change{Kind: portcullis.ChangeBlock, ID: "bot"})

	// Ending the watch closes its channel.
	cancel()
	for range ch {
	}
}

func TestWatchEndsWhenStoreCloses(t *testing.T) {
	dsn := testDSN(t)
	t.Parallel()
	s := openStore(t, dsn, freshSchema(t), nil)
	ch, err := s.Watch(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case _, ok := <-ch:
		if ok {
			t.Fatal("watch delivered a change after Close; want the channel closed")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("watch channel still open 5s after Close")
	}
	if _, err := s.Watch(context.Background()); err == nil {
		t.Fatal("Watch after Close succeeded")
	}
	if _, err := s.AppendAudit(context.Background(), portcullis.AuditEvent{Kind: portcullis.AuditPolicy}); err == nil {
		t.Fatal("AppendAudit after Close succeeded")
	}
}

func TestSlowWatcherResyncs(t *testing.T) {
	dsn := testDSN(t)
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := openStore(t, dsn, freshSchema(t), nil)
	ch, err := s.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Write far more than a watcher buffers, without reading.
	const writes = 300
	for i := range writes {
		if err := s.PutBlock(ctx, portcullis.Block{Agent: fmt.Sprintf("bot%d", i), CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.After(10 * time.Second)
	got := 0
	for {
		select {
		case c := <-ch:
			if c.Kind == portcullis.ChangeResync {
				if got >= writes {
					t.Fatalf("resync after all %d changes were delivered", got)
				}
				return
			}
			got++
		case <-deadline:
			t.Fatalf("a watcher that fell %d changes behind got %d changes and no resync", writes, got)
		}
	}
}

// TestCloseDrainsAppends closes a store while appends are queued: every
// append that reported success is in the log, and the log verifies.
func TestCloseDrainsAppends(t *testing.T) {
	dsn := testDSN(t)
	t.Parallel()
	ctx := context.Background()
	schema := freshSchema(t)
	clock := storetest.NewClock()
	s := openStore(t, dsn, schema, clock)
	var mu sync.Mutex
	var acked []portcullis.AuditRecord
	var wg sync.WaitGroup
	for w := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				recs, err := s.AppendAudit(ctx, portcullis.AuditEvent{Kind: portcullis.AuditDecision, Time: clock.Now(), DecisionID: fmt.Sprintf("d%d-%d", w, i)})
				if err != nil {
					return // the store closed
				}
				mu.Lock()
				acked = append(acked, recs...)
				mu.Unlock()
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if len(acked) == 0 {
		t.Fatal("no append succeeded before Close")
	}
	reopened := openStore(t, dsn, schema, clock)
	v, err := portcullis.VerifyAudit(ctx, reopened, nil)
	if err != nil || !v.OK() {
		t.Fatalf("VerifyAudit after Close = %+v, %v", v, err)
	}
	stored := map[int64]string{}
	if err := reopened.ScanAudit(ctx, 0, func(r portcullis.AuditRecord) (bool, error) {
		stored[r.Seq] = r.Hash
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, r := range acked {
		if stored[r.Seq] != r.Hash {
			t.Fatalf("append acknowledged as row %d (%s) is not in the log after Close", r.Seq, r.Hash)
		}
	}
	t.Logf("%d appends acknowledged before Close, %d rows in the log", len(acked), len(stored))
}

// TestReplicasKeepThePendingCap: a flood of one agent's approval requests
// spread over two replicas never leaves more pending than the cap, and
// exactly one of the refusals asks for a notice.
func TestReplicasKeepThePendingCap(t *testing.T) {
	dsn := testDSN(t)
	t.Parallel()
	ctx := context.Background()
	schema := freshSchema(t)
	clock := storetest.NewClock()
	replicas := []portcullis.Store{openStore(t, dsn, schema, clock), openStore(t, dsn, schema, clock)}
	const limit, callers = 7, 64
	lim := portcullis.PendingLimit{PerAgent: limit, PerSession: limit}
	var created, notified atomic.Int32
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			apr := portcullis.Approval{
				ID: fmt.Sprintf("apr_%d", i), DecisionID: fmt.Sprintf("d%d", i), Status: portcullis.ApprovalPending, Tool: "deploy", Level: portcullis.ConfirmSingleUse,
				Call:      portcullis.Call{Tool: "deploy", Session: fmt.Sprintf("s%d", i%3), Agent: "flood", Args: map[string]any{"n": i}},
				CreatedAt: clock.Now(), ExpiresAt: clock.Now().Add(5 * time.Minute), ArgsDigest: fmt.Sprintf("sha256:%d", i),
			}
			adm, err := replicas[i%2].CreateApprovalWithin(ctx, apr, lim)
			if err != nil {
				t.Error(err)
				return
			}
			if adm.Created {
				created.Add(1)
			}
			if adm.Notify {
				notified.Add(1)
			}
		}()
	}
	wg.Wait()
	if got := created.Load(); got != limit {
		t.Errorf("%d requests of one agent over two replicas, cap %d: %d created; want exactly %d", callers, limit, got, limit)
	}
	if got := notified.Load(); got != 1 {
		t.Errorf("refusals over two replicas asked for %d notices; want exactly 1", got)
	}
	counts, err := replicas[1].PendingCounts(ctx)
	if err != nil || len(counts) != 1 || counts[0] != (portcullis.PendingCount{Agent: "flood", Pending: limit}) {
		t.Errorf("PendingCounts on the other replica = %+v, %v; want flood %d", counts, err, limit)
	}
}
