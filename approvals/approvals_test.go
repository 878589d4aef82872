package approvals_test

import (
	"context"
	"errors"
	"net"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/approvals"
	"github.com/portcullis/portcullis/client"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/httpapi"
	"github.com/portcullis/portcullis/policy"
	"github.com/portcullis/portcullis/sqlite"
)

const testPolicy = `
version: 1
tools:
  list_elements:  {endpoint: READ}
  create_element: {endpoint: CREATE, defaultLevel: CONFIRM_SESSION}
  delete_element: {endpoint: DELETE, defaultLevel: CONFIRM_SINGLE_USE, canBeElevated: false}
`

const humanToken = "human-token-0123456789abcdef"

var _ approvals.Service = (*client.Client)(nil)

// world is a real gate on a real SQLite store, served by a real gateway,
// with both Services over them.
type world struct {
	gate    *gate.Gate
	store   portcullis.Store
	local   *approvals.Local
	gateway *client.Client
}

func newWorld(t *testing.T) *world {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "portcullis.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	pol, _, err := policy.Parse("policy.yaml", []byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	g, err := gate.New(pol, gate.WithStore(st))
	if err != nil {
		t.Fatal(err)
	}
	h, err := httpapi.New(httpapi.Options{
		Gate: g, Store: st, HumanToken: humanToken,
		AgentToken: func(string) (string, bool) { return "", false },
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, humanToken, client.WithActor("ana"))
	if err != nil {
		t.Fatal(err)
	}
	return &world{gate: g, store: st, local: &approvals.Local{Store: st, Gate: g, By: "ana"}, gateway: c}
}

func (w *world) services() map[string]approvals.Service {
	return map[string]approvals.Service{"local": w.local, "gateway": w.gateway}
}

// confirm decides a call that waits for a person and returns its request.
func (w *world) confirm(t *testing.T, call portcullis.Call) string {
	t.Helper()
	d, err := w.gate.Decide(context.Background(), call)
	if err != nil || d.Outcome != portcullis.OutcomeConfirm || d.ChallengeID == "" {
		t.Fatalf("Decide(%s) = %s %q, %v; want confirm with a request", call.Tool, d.Outcome, d.ChallengeID, err)
	}
	return d.ChallengeID
}

func TestServices(t *testing.T) {
	for _, name := range []string{"local", "gateway"} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			w := newWorld(t)
			s := w.services()[name]
			create := w.confirm(t, portcullis.Call{Tool: "create_element", Session: "s1", Agent: "bot"})
			del := w.confirm(t, portcullis.Call{Tool: "delete_element", Session: "s1", Agent: "bot", Args: map[string]any{"name": "x"}})

			list, err := s.Approvals(ctx, portcullis.ApprovalFilter{Status: portcullis.ApprovalPending})
			if err != nil || len(list) != 2 || list[0].ID != del || list[1].ID != create {
				t.Fatalf("Approvals = %d, %v; want [%s %s], newest first", len(list), err, del, create)
			}
			if a, err := s.Approval(ctx, create); err != nil || a.Tool != "create_element" || a.Status != portcullis.ApprovalPending {
				t.Fatalf("Approval(%s) = %+v, %v", create, a, err)
			}
			if _, err := s.Approval(ctx, "apr_nope"); portcullis.ErrorCode(err) != portcullis.CodeNotFound {
				t.Fatalf("Approval(unknown) = %v; want NOT_FOUND", err)
			}

			if _, err := s.Approve(ctx, del, true); portcullis.ErrorCode(err) != portcullis.CodeInvalidRequest {
				t.Fatalf("Approve(single-use request, for the session) = %v; want INVALID_REQUEST", err)
			}
			a, err := s.Approve(ctx, create, true)
			if err != nil || a.Status != portcullis.ApprovalApproved || !strings.HasPrefix(a.DecidedBy, "ana") {
				t.Fatalf("Approve(%s, session) = %+v, %v; want approved by ana", create, a, err)
			}
			if _, err := s.Approve(ctx, create, false); portcullis.ErrorCode(err) != portcullis.CodeConflict {
				t.Fatalf("Approve twice = %v; want CONFLICT", err)
			}
			if _, err := s.Approve(ctx, "apr_nope", false); portcullis.ErrorCode(err) != portcullis.CodeNotFound {
				t.Fatalf("Approve(unknown) = %v; want NOT_FOUND", err)
			}
			if a, err := s.Deny(ctx, del, "not today"); err != nil || a.Status != portcullis.ApprovalDenied || a.DenyReason != "not today" {
				t.Fatalf("Deny = %+v, %v; want denied with the reason", a, err)
			}

			grants, err := s.Grants(ctx, "s1")
			if err != nil || len(grants) != 1 || grants[0].Kind != portcullis.GrantSession || grants[0].Tool != "create_element" {
				t.Fatalf("Grants(s1) = %+v, %v; want the session grant of create_element", grants, err)
			}
			if other, err := s.Grants(ctx, "s2"); err != nil || len(other) != 0 {
				t.Fatalf("Grants(s2) = %+v, %v; want none", other, err)
			}
			if err := s.RevokeGrant(ctx, grants[0].ID); err != nil {
				t.Fatal(err)
			}
			if err := s.RevokeGrant(ctx, grants[0].ID); portcullis.ErrorCode(err) != portcullis.CodeNotFound {
				t.Fatalf("RevokeGrant twice = %v; want NOT_FOUND", err)
			}

			// Every answer is in the audit log with who gave it.
			recs, err := w.store.QueryAudit(ctx, portcullis.AuditQuery{Kind: portcullis.AuditApproval})
			if err != nil || len(recs) != 2 {
				t.Fatalf("approval audit rows = %d, %v; want 2", len(recs), err)
			}
			for _, r := range recs {
				if ev, err := r.Event(); err != nil || !strings.HasPrefix(ev.Actor, "ana") {
					t.Errorf("audit row %d actor = %q, %v; want ana", r.Seq, ev.Actor, err)
				}
			}
		})
	}
}

// A clock past a grant's expiry hides it from Local.Grants.
func TestLocalGrantsUseTheClock(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	id := w.confirm(t, portcullis.Call{Tool: "delete_element", Session: "s1", Args: map[string]any{"name": "x"}})
	if _, err := w.local.Approve(ctx, id, false); err != nil {
		t.Fatal(err)
	}
	grants, err := w.local.Grants(ctx, "")
	if err != nil || len(grants) != 1 || grants[0].ExpiresAt.IsZero() {
		t.Fatalf("Grants = %+v, %v; want one single-use grant that expires", grants, err)
	}
	later := &approvals.Local{Store: w.store, Gate: w.gate, By: "ana", Clock: fixed(grants[0].ExpiresAt.Add(time.Second))}
	if grants, err := later.Grants(ctx, ""); err != nil || len(grants) != 0 {
		t.Fatalf("Grants after the expiry = %+v, %v; want none", grants, err)
	}
}

type fixed time.Time

func (f fixed) Now() time.Time { return time.Time(f) }

func TestWatch(t *testing.T) {
	for _, name := range []string{"local", "gateway"} {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t)
			before := w.confirm(t, portcullis.Call{Tool: "create_element", Session: "s0", Agent: "bot"})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			rounds := make(chan approvals.Round)
			done := make(chan error, 1)
			go func() {
				done <- approvals.Watch(ctx, w.services()[name], portcullis.ApprovalFilter{Status: portcullis.ApprovalDenied, Limit: 10}, 5*time.Millisecond, func(r approvals.Round) error {
					select {
					case rounds <- r:
					case <-ctx.Done():
					}
					return nil
				})
			}()
			next := func() approvals.Round {
				select {
				case r := <-rounds:
					return r
				case err := <-done:
					t.Fatalf("Watch ended with %v", err)
				case <-time.After(20 * time.Second):
					t.Fatal("Watch reported nothing")
				}
				return approvals.Round{}
			}
			// The first look reports what already waits (pending, whatever
			// the filter's status).
			if r := next(); !r.First || len(r.Arrived) != 1 || r.Arrived[0].ID != before || len(r.Answered) != 0 {
				t.Fatalf("first round = %+v; want the waiting request %s", r, before)
			}
			a := w.confirm(t, portcullis.Call{Tool: "create_element", Session: "s1", Agent: "bot"})
			b := w.confirm(t, portcullis.Call{Tool: "create_element", Session: "s2", Agent: "bot"})
			var arrived []string
			for len(arrived) < 2 {
				r := next()
				if r.First || len(r.Answered) != 0 {
					t.Fatalf("round = %+v; want only arrivals", r)
				}
				for _, x := range r.Arrived {
					arrived = append(arrived, x.ID)
				}
			}
			if arrived[0] != a || arrived[1] != b {
				t.Fatalf("arrived %v; want [%s %s], oldest first", arrived, a, b)
			}
			if _, err := w.gate.DenyApproval(context.Background(), a, "bo", "no"); err != nil {
				t.Fatal(err)
			}
			if r := next(); len(r.Answered) != 1 || r.Answered[0].ID != a || r.Answered[0].Status != portcullis.ApprovalDenied || r.Answered[0].DecidedBy != "bo" {
				t.Fatalf("round after the denial = %+v; want %s denied by bo", r, a)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("Watch ended with %v; want nil when its context ends", err)
			}
		})
	}
}

func TestWatchErrors(t *testing.T) {
	w := newWorld(t)
	stop := errors.New("stop")
	if err := approvals.Watch(context.Background(), w.local, portcullis.ApprovalFilter{}, time.Millisecond, func(approvals.Round) error { return stop }); err != stop {
		t.Fatalf("Watch with a failing fn = %v; want its error", err)
	}
	if err := approvals.Watch(context.Background(), w.local, portcullis.ApprovalFilter{}, 0, nil); err == nil {
		t.Fatal("Watch with interval 0 succeeded; want an error")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	down, err := client.New(url, humanToken)
	if err != nil {
		t.Fatal(err)
	}
	var ue *client.UnreachableError
	err = approvals.Watch(context.Background(), down, portcullis.ApprovalFilter{}, time.Millisecond, func(approvals.Round) error { return nil })
	if !errors.As(err, &ue) || ue.Gateway != url {
		t.Fatalf("Watch of a gateway that is down = %v; want an *UnreachableError naming %s", err, url)
	}
}
