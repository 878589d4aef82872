package postgres_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/storetest"
)

func TestTamperDetection(t *testing.T) {
	dsn := testDSN(t)
	t.Parallel()
	ctx := context.Background()
	admin := adminConn(t, ctx, dsn)
	clock := storetest.NewClock()
	fill := func(schema string) portcullis.Store {
		s := openStore(t, dsn, schema, clock)
		for i := 1; i <= 10; i++ {
			if _, err := s.AppendAudit(ctx, portcullis.AuditEvent{Kind: portcullis.AuditDecision, Time: clock.Now(),
				DecisionID: fmt.Sprintf("d%d", i), Session: "s", Tool: "t", Outcome: portcullis.OutcomeDeny}); err != nil {
				t.Fatal(err)
			}
		}
		if v, err := portcullis.VerifyAudit(ctx, s, nil); err != nil || !v.OK() || v.Rows != 10 {
			t.Fatalf("VerifyAudit before tampering = %+v, %v", v, err)
		}
		return s
	}

	edited := freshSchema(t)
	s := fill(edited)
	// Turn a denial into an allow behind the store's back.
	if _, err := admin.Exec(ctx, "UPDATE "+edited+".audit SET body = convert_to(replace(convert_from(body, 'UTF8'), '\"deny\"', '\"allow\"'), 'UTF8'), outcome = 'allow' WHERE seq = 5"); err != nil {
		t.Fatal(err)
	}
	v, err := portcullis.VerifyAudit(ctx, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v.OK() || v.BadSeq != 5 || !strings.Contains(v.Problem, "edited") {
		t.Fatalf("VerifyAudit after editing row 5 = %+v; want row 5 named as edited", v)
	}

	deleted := freshSchema(t)
	s = fill(deleted)
	if _, err := admin.Exec(ctx, "DELETE FROM "+deleted+".audit WHERE seq = 7"); err != nil {
		t.Fatal(err)
	}
	v, err = portcullis.VerifyAudit(ctx, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v.OK() || v.BadSeq != 7 || !strings.Contains(v.Problem, "missing") {
		t.Fatalf("VerifyAudit after deleting row 7 = %+v; want row 7 reported missing", v)
	}
}

// TestOutage cuts every connection of one store (its pool and its
// listener) from the server side, as a restart or a failover would:
// calls in flight may fail, which the gate turns into a fail-closed denial;
// calls after it succeed; the watcher reconnects and is told to resync.
// It terminates only this test's backends (found by application_name), not
// the server or other tests' connections.
func TestOutage(t *testing.T) {
	dsn := testDSN(t)
	t.Parallel()
	ctx := context.Background()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("%s is not a URL: %v", dsnEnv, err)
	}
	schema := freshSchema(t)
	app := "portcullis-outage-" + schema
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	clock := storetest.NewClock()
	s := openStore(t, u.String(), schema, clock)
	admin := adminConn(t, ctx, dsn)

	watchCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, err := s.Watch(watchCtx)
	if err != nil {
		t.Fatal(err)
	}
	g, err := s.AddGrant(ctx, portcullis.Grant{Kind: portcullis.GrantSession, Tool: "t", Session: "s"})
	if err != nil {
		t.Fatal(err)
	}
	query := portcullis.GrantQuery{Session: "s", Tool: "t", Level: portcullis.ConfirmSession, Now: clock.Now()}

	// Load in flight while the connections are cut: errors are allowed,
	// a wrong answer is not.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var calls, failed atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				got, ok, err := s.UseGrant(ctx, query)
				calls.Add(1)
				if err != nil {
					failed.Add(1)
				}
				if err == nil && (!ok || got.ID != g.ID) {
					t.Errorf("UseGrant during the outage = %q, %v, nil; want the grant or an error", got.ID, ok)
				}
				calls.Add(1)
				if _, err := s.AppendAudit(ctx, portcullis.AuditEvent{Kind: portcullis.AuditDecision, Time: clock.Now()}); err != nil {
					failed.Add(1) // in flight when the connection was cut: fail closed
				}
			}
		}()
	}
	time.Sleep(100 * time.Millisecond)
	var killed int
	if err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name = $1`, app).Scan(&killed); err != nil {
		t.Fatal(err)
	}
	if killed < 2 {
		t.Fatalf("terminated %d backends; want the pool's and the listener's", killed)
	}
	time.Sleep(100 * time.Millisecond)
	close(stop)
	wg.Wait()
	t.Logf("%d of %d calls in flight around the outage failed (fail closed)", failed.Load(), calls.Load())

	// The watcher hears that it may have missed changes.
	deadline := time.After(15 * time.Second)
	for resynced := false; !resynced; {
		select {
		case c, ok := <-ch:
			if !ok {
				t.Fatal("watch channel closed by the outage")
			}
			resynced = c.Kind == portcullis.ChangeResync
		case <-deadline:
			t.Fatal("no resync within 15s of the listener losing its connection")
		}
	}

	// Calls after the outage succeed: at most one more may still meet a
	// connection that died idle in the pool.
	failures := 0
	for i := range 20 {
		if _, ok, err := s.UseGrant(ctx, query); err != nil || !ok {
			failures++
			if failures > 1 || i > 0 {
				t.Fatalf("UseGrant #%d after the outage = %v, %v; want the grant", i, ok, err)
			}
		}
		if _, err := s.AppendAudit(ctx, portcullis.AuditEvent{Kind: portcullis.AuditDecision, Time: clock.Now()}); err != nil {
			t.Fatalf("AppendAudit #%d after the outage: %v", i, err)
		}
	}
	if v, err := portcullis.VerifyAudit(ctx, s, nil); err != nil || !v.OK() {
		t.Fatalf("VerifyAudit after the outage = %+v, %v; want the chain whole", v, err)
	}

	// And the listener hears writes again.
	if err := s.PutBlock(ctx, portcullis.Block{Agent: "bot", CreatedAt: clock.Now()}); err != nil {
		t.Fatal(err)
	}
	deadline = time.After(5 * time.Second)
	for {
		select {
		case c := <-ch:
			if c == (portcullis.Change{Kind: portcullis.ChangeBlock, ID: "bot"}) {
				return
			}
		case <-deadline:
			t.Fatal("the reconnected listener did not deliver a change within 5s")
		}
	}
}
