package memstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/memstore"
	"github.com/portcullis/portcullis/storetest"
)

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func TestGrants(t *testing.T) {
	ctx := context.Background()
	clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := memstore.New(clk)
	args := map[string]any{"path": "/tmp/x"}
	digest, err := portcullis.ArgsDigest(args)
	if err != nil {
		t.Fatal(err)
	}
	single, err := s.AddGrant(ctx, portcullis.Grant{Kind: portcullis.GrantSingle, Tool: "write_file", Session: "s", Args: args})
	if err != nil {
		t.Fatal(err)
	}
	if single.ID == "" || single.ArgsDigest != digest || !single.CreatedAt.Equal(clk.Now()) {
		t.Fatalf("AddGrant = %+v; want an id, the args digest and CreatedAt", single)
	}
	session, err := s.AddGrant(ctx, portcullis.Grant{Kind: portcullis.GrantSession, Tool: "create", Session: "s", ElementType: "persona", ExpiresAt: clk.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}

	q := func(tool, elementType, digest string, level portcullis.Level, consume bool) (portcullis.Grant, bool) {
		t.Helper()
		g, ok, err := s.UseGrant(ctx, portcullis.GrantQuery{Session: "s", Tool: tool, ElementType: elementType, ArgsDigest: digest, Level: level, Consume: consume, Now: clk.Now()})
		if err != nil {
			t.Fatal(err)
		}
		return g, ok
	}
	if _, ok := q("write_file", "", "sha256:other", portcullis.ConfirmSingleUse, true); ok {
		t.Fatal("single-use grant covered other arguments")
	}
	if g, ok := q("write_file", "", digest, portcullis.ConfirmSingleUse, false); !ok || g.ID != single.ID {
		t.Fatalf("peek = %v, %v; want the single-use grant", g, ok)
	}
	if _, ok := q("write_file", "", digest, portcullis.ConfirmSingleUse, true); !ok {
		t.Fatal("consume: grant not found")
	}
	if _, ok := q("write_file", "", digest, portcullis.ConfirmSingleUse, true); ok {
		t.Fatal("single-use grant used twice")
	}
	if _, ok := q("create", "persona", "", portcullis.ConfirmSession, true); !ok {
		t.Fatal("session grant did not cover its element type")
	}
	if _, ok := q("create", "skill", "", portcullis.ConfirmSession, true); ok {
		t.Fatal("session grant for persona covered a skill")
	}
	if _, ok := q("create", "persona", "", portcullis.ConfirmSingleUse, true); ok {
		t.Fatal("session grant satisfied CONFIRM_SINGLE_USE")
	}
	clk.add(time.Minute)
	if _, ok := q("create", "persona", "", portcullis.ConfirmSession, true); ok {
		t.Fatal("expired session grant still covers")
	}
	if err := s.RevokeGrant(ctx, session.ID); portcullis.ErrorCode(err) != portcullis.CodeNotFound {
		t.Fatalf("RevokeGrant(expired and pruned) = %v; want NOT_FOUND", err)
	}
	g, err := s.AddGrant(ctx, portcullis.Grant{Kind: portcullis.GrantSession, Tool: "t", Session: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeGrant(ctx, g.ID); err != nil {
		t.Fatalf("RevokeGrant: %v", err)
	}
	if _, ok := q("t", "", "", portcullis.ConfirmSession, false); ok {
		t.Fatal("revoked grant still covers")
	}
	if _, err := s.AddGrant(ctx, portcullis.Grant{Kind: "forever", Tool: "t"}); err == nil {
		t.Fatal("AddGrant accepted an unknown kind")
	}
}

func TestApprovals(t *testing.T) {
	ctx := context.Background()
	clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := memstore.New(clk)
	a := portcullis.Approval{ID: "apr_1", Status: portcullis.ApprovalPending, Tool: "t", CreatedAt: clk.Now(), ExpiresAt: clk.Now().Add(time.Minute)}
	if err := s.CreateApproval(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateApproval(ctx, a); err == nil {
		t.Fatal("CreateApproval accepted a duplicate id")
	}
	if err := s.CreateApproval(ctx, portcullis.Approval{}); err == nil {
		t.Fatal("CreateApproval accepted an approval without id")
	}
	got, err := s.Approval(ctx, "apr_1")
	if err != nil || got.Status != portcullis.ApprovalPending {
		t.Fatalf("Approval = %+v, %v; want pending", got, err)
	}
	clk.add(time.Minute)
	if got, _ := s.Approval(ctx, "apr_1"); got.Status != portcullis.ApprovalExpired {
		t.Fatalf("Approval after expiry = %s; want expired", got.Status)
	}
	if _, err := s.Approval(ctx, "nope"); portcullis.ErrorCode(err) != portcullis.CodeNotFound {
		t.Fatalf("Approval(nope) = %v; want NOT_FOUND", err)
	}
}

func TestCanceledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s := memstore.New(nil)
	if _, _, err := s.UseGrant(ctx, portcullis.GrantQuery{}); err == nil {
		t.Fatal("UseGrant with a canceled context succeeded")
	}
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(_ testing.TB, clock portcullis.Clock) portcullis.Store { return memstore.New(clock) })
}
