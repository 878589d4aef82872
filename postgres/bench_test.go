package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/storetest"
)

// benchEvent is a decision row of realistic size (about 600 bytes of body).
func benchEvent(i int, session string, at time.Time) portcullis.AuditEvent {
	return portcullis.AuditEvent{
		Kind: portcullis.AuditDecision, Time: at, DecisionID: fmt.Sprintf("dec_%012d", i),
		Session: session, Agent: "deploy-bot", Tool: "write_file", Outcome: portcullis.OutcomeAllow,
		Request: &portcullis.Call{Tool: "write_file", Session: session, Agent: "deploy-bot",
			Args: map[string]any{"path": fmt.Sprintf("/srv/app/config/%d.yaml", i%997), "mode": json.Number("420")}},
		Decision: &portcullis.Decision{DecisionID: fmt.Sprintf("dec_%012d", i), Outcome: portcullis.OutcomeAllow,
			PermissionLevel: portcullis.AutoApprove, Source: portcullis.SourceElementPolicy, SourceElement: "Deploy Skill",
			Reason: "allowed by element Deploy Skill", Trace: []portcullis.TraceEntry{
				{Stage: "route", Result: "UPDATE, CONFIRM_SESSION, elevatable"},
				{Stage: "elements", Result: "allow write_* (Deploy Skill)"},
			}},
		PolicyHash: "sha256:3f1c8e2a9b7d", LatencyNS: 41000 + int64(i%1000), UserPresent: true,
	}
}

// BenchmarkAuditAppend measures durable appends with 32 concurrent
// writers, each waiting for its row to commit before writing the next.
func BenchmarkAuditAppend(b *testing.B) {
	dsn := testDSN(b)
	s := openStore(b, dsn, freshSchema(b), nil)
	ctx := context.Background()
	const writers = 32
	at := time.Now()
	var next atomic.Int64
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			session := fmt.Sprintf("s%d", w)
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				if _, err := s.AppendAudit(ctx, benchEvent(int(i), session, at)); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

const (
	benchLogSchema   = "portcullis_bench_audit"
	benchLogRows     = 1_000_000
	benchLogSessions = 1_000
)

// BenchmarkAuditLatestSession reads the latest 100 rows of one session in
// a log of 1,000,000 rows and 1,000 sessions. The log is built once, in a
// schema of its own that is kept between runs (and rebuilt when missing
// or incomplete).
func BenchmarkAuditLatestSession(b *testing.B) {
	dsn := testDSN(b)
	ctx := context.Background()
	s := openStore(b, dsn, benchLogSchema, nil)
	ensureBenchLog(b, dsn)
	q := portcullis.AuditQuery{Session: "s424", Newest: true, Limit: 100}
	b.ResetTimer()
	for b.Loop() {
		recs, err := s.QueryAudit(ctx, q)
		if err != nil {
			b.Fatal(err)
		}
		if len(recs) != 100 {
			b.Fatalf("QueryAudit = %d rows; want 100", len(recs))
		}
	}
}

// ensureBenchLog fills the benchmark schema's log with a valid chain of
// benchLogRows rows, with COPY, unless it already holds them.
func ensureBenchLog(b *testing.B, dsn string) {
	ctx := context.Background()
	conn := adminConn(b, ctx, dsn)
	audit := pgx.Identifier{benchLogSchema, "audit"}
	var head int64
	if err := conn.QueryRow(ctx, "SELECT seq FROM "+benchLogSchema+".audit_head").Scan(&head); err != nil {
		b.Fatal(err)
	}
	var rows int64
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+audit.Sanitize()).Scan(&rows); err != nil {
		b.Fatal(err)
	}
	if head == benchLogRows && rows == benchLogRows {
		return
	}
	b.Logf("building a %d-row audit log in schema %s (kept for later runs)", benchLogRows, benchLogSchema)
	start := time.Now()
	tx, err := conn.Begin(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := tx.Rollback(ctx); err != nil && err != pgx.ErrTxClosed {
			b.Error(err)
		}
	}()
	if _, err := tx.Exec(ctx, "TRUNCATE "+audit.Sanitize()); err != nil {
		b.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	prev := portcullis.GenesisHash
	seq := int64(0)
	src := pgx.CopyFromFunc(func() ([]any, error) {
		if seq == benchLogRows {
			return nil, nil
		}
		seq++
		session := fmt.Sprintf("s%d", seq%benchLogSessions)
		ev := benchEvent(int(seq), session, t0.Add(time.Duration(seq)*time.Second))
		body, err := portcullis.EncodeAuditBody(&ev)
		if err != nil {
			return nil, err
		}
		hash := portcullis.ChainHash(prev, seq, body)
		row := []any{seq, ev.Time, string(ev.Kind), ev.DecisionID, ev.Session, ev.Agent, ev.Tool, string(ev.Outcome), body, prev, hash}
		prev = hash
		return row, nil
	})
	cols := []string{"seq", "time", "kind", "decision_id", "session", "agent", "tool", "outcome", "body", "prev_hash", "hash"}
	if _, err := tx.CopyFrom(ctx, audit, cols, src); err != nil {
		b.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "UPDATE "+benchLogSchema+".audit_head SET seq = $1, hash = $2", seq, prev); err != nil {
		b.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		b.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "VACUUM ANALYZE "+audit.Sanitize()); err != nil {
		b.Fatal(err)
	}
	b.Logf("built in %v", time.Since(start).Round(time.Millisecond))
}

// BenchmarkUseGrant measures the confirmation stage's store call: a
// session grant found; a single-use grant looked at; a single-use grant
// consumed (each op deletes one of b.N grants made beforehand); and the
// session check from 32 goroutines at once.
func BenchmarkUseGrant(b *testing.B) {
	dsn := testDSN(b)
	ctx := context.Background()
	clock := storetest.NewClock()
	s := openStore(b, dsn, freshSchema(b), clock)
	// Other sessions' grants, so the lookup is not in an empty table.
	for i := range 1000 {
		if _, err := s.AddGrant(ctx, portcullis.Grant{Kind: portcullis.GrantSession, Tool: fmt.Sprintf("tool%d", i%50), Session: fmt.Sprintf("other%d", i)}); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := s.AddGrant(ctx, portcullis.Grant{Kind: portcullis.GrantSession, Tool: "create_element", Session: "s", ElementType: "persona"}); err != nil {
		b.Fatal(err)
	}
	sessionQ := portcullis.GrantQuery{Session: "s", Tool: "create_element", ElementType: "persona", Level: portcullis.ConfirmSession, Now: clock.Now()}
	b.Run("session", func(b *testing.B) {
		for b.Loop() {
			if _, ok, err := s.UseGrant(ctx, sessionQ); err != nil || !ok {
				b.Fatalf("UseGrant = %v, %v", ok, err)
			}
		}
	})
	b.Run("session-parallel-32", func(b *testing.B) {
		b.SetParallelism(32)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, ok, err := s.UseGrant(ctx, sessionQ); err != nil || !ok {
					b.Errorf("UseGrant = %v, %v", ok, err)
					return
				}
			}
		})
	})
	args := map[string]any{"name": "x"}
	single, err := s.AddGrant(ctx, portcullis.Grant{Kind: portcullis.GrantSingle, Tool: "delete_element", Session: "s", Args: args})
	if err != nil {
		b.Fatal(err)
	}
	singleQ := portcullis.GrantQuery{Session: "s", Tool: "delete_element", ArgsDigest: single.ArgsDigest, Level: portcullis.ConfirmSingleUse, Now: clock.Now()}
	b.Run("single-peek", func(b *testing.B) {
		for b.Loop() {
			if _, ok, err := s.UseGrant(ctx, singleQ); err != nil || !ok {
				b.Fatalf("UseGrant = %v, %v", ok, err)
			}
		}
	})
	b.Run("single-consume", func(b *testing.B) {
		digest, err := portcullis.ArgsDigest(map[string]any{"name": "consumed"})
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < b.N; i++ {
			if _, err := s.AddGrant(ctx, portcullis.Grant{Kind: portcullis.GrantSingle, Tool: "drop", Session: "c", ArgsDigest: digest}); err != nil {
				b.Fatal(err)
			}
		}
		q := portcullis.GrantQuery{Session: "c", Tool: "drop", ArgsDigest: digest, Level: portcullis.ConfirmSingleUse, Consume: true, Now: clock.Now()}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, ok, err := s.UseGrant(ctx, q); err != nil || !ok {
				b.Fatalf("UseGrant(consume #%d) = %v, %v", i, ok, err)
			}
		}
	})
}
