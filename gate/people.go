package gate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/portcullis/portcullis"
)

// This file holds what people do through human channels (the CLI, the
// console, the approvals API): answer approval requests, revoke grants,
// accept changed tool definitions. None of it may be reachable from an
// agent-facing channel. Every action is audited with who did it.

// defaultSessionGrantTTL is how long an approval "for the session" holds.
const defaultSessionGrantTTL = 12 * time.Hour

// WithSessionGrantTTL sets how long a session grant made by approving a
// call for the session holds (default 12 hours).
func WithSessionGrantTTL(d time.Duration) Option { return func(g *Gate) { g.sessionTTL = d } }

// SessionGrantTTL is how long a session grant made by approving a call for
// the session holds.
func (g *Gate) SessionGrantTTL() time.Duration { return g.sessionTTL }

// Approve approves a pending approval request on behalf of a person (by).
// It records, in the same transaction, the grant the held call needs: a
// single-use grant bound to the call's argument digest, or with forSession a
// session grant for the tool in the call's session. Only a CONFIRM_SESSION
// call can be approved for the session. Exactly one of several concurrent
// deciders succeeds; the others get CONFLICT.
func (g *Gate) Approve(ctx context.Context, id, by string, forSession bool) (portcullis.Approval, error) {
	if g.store == nil {
		return portcullis.Approval{}, errors.New("approve: the gate has no store")
	}
	if by == "" {
		return portcullis.Approval{}, portcullis.Errorf(portcullis.CodeInvalidRequest, "approve: who approves must be named")
	}
	a, err := g.store.Approval(ctx, id)
	if err != nil {
		return portcullis.Approval{}, err
	}
	if a.Status != portcullis.ApprovalPending {
		return a, portcullis.Errorf(portcullis.CodeConflict, "approval %s is already %s", id, a.Status)
	}
	now := g.clock.Now()
	grant := portcullis.Grant{
		Kind:       portcullis.GrantSingle,
		Tool:       a.Tool,
		Session:    a.Call.Session,
		ArgsDigest: a.ArgsDigest,
		GrantedBy:  by,
		CreatedAt:  now,
		// The held call is re-decided at once; an agent that retries later
		// has as long as the request itself had.
		ExpiresAt: now.Add(g.approvalTTL),
	}
	detail := "approved " + id + " once"
	if forSession {
		if a.Level != portcullis.ConfirmSession {
			return a, portcullis.Errorf(portcullis.CodeInvalidRequest, "approval %s is for a %s call: it can only be approved once, not for the session", id, a.Level)
		}
		grant = portcullis.Grant{
			Kind:        portcullis.GrantSession,
			Tool:        a.Tool,
			Session:     a.Call.Session,
			ElementType: a.Call.ElementType,
			GrantedBy:   by,
			CreatedAt:   now,
			ExpiresAt:   now.Add(g.sessionTTL),
		}
		detail = "approved " + id + " for the session"
	}
	a, err = g.store.DecideApproval(ctx, id, portcullis.ApprovalDecision{
		Status: portcullis.ApprovalApproved, By: by, At: now, Grant: &grant,
	})
	if err != nil {
		return a, err
	}
	g.log.Info("approval approved", "approval", id, "by", by, "tool", a.Tool, "session", a.Call.Session, "forSession", forSession)
	return a, g.auditHuman(ctx, portcullis.AuditEvent{
		Kind: portcullis.AuditApproval, DecisionID: a.DecisionID, Session: a.Call.Session, Agent: a.Call.Agent,
		Tool: a.Tool, Outcome: portcullis.OutcomeAllow, Actor: by, Detail: detail,
	})
}

// DenyApproval denies a pending approval request on behalf of a person.
// The reason is shown to the agent.
func (g *Gate) DenyApproval(ctx context.Context, id, by, reason string) (portcullis.Approval, error) {
	if g.store == nil {
		return portcullis.Approval{}, errors.New("deny: the gate has no store")
	}
	if by == "" {
		return portcullis.Approval{}, portcullis.Errorf(portcullis.CodeInvalidRequest, "deny: who denies must be named")
	}
	a, err := g.store.DecideApproval(ctx, id, portcullis.ApprovalDecision{
		Status: portcullis.ApprovalDenied, By: by, Reason: reason, At: g.clock.Now(),
	})
	if err != nil {
		return a, err
	}
	g.log.Info("approval denied", "approval", id, "by", by, "tool", a.Tool, "session", a.Call.Session)
	detail := "denied " + id
	if reason != "" {
		detail += ": " + reason
	}
	return a, g.auditHuman(ctx, portcullis.AuditEvent{
		Kind: portcullis.AuditApproval, DecisionID: a.DecisionID, Session: a.Call.Session, Agent: a.Call.Agent,
		Tool: a.Tool, Outcome: portcullis.OutcomeDeny, Actor: by, Detail: detail,
	})
}

// RevokeGrant revokes a grant on behalf of a person.
func (g *Gate) RevokeGrant(ctx context.Context, id, by string) error {
	if g.store == nil {
		return errors.New("revoke: the gate has no store")
	}
	if err := g.store.RevokeGrant(ctx, id); err != nil {
		return err
	}
	return g.auditHuman(ctx, portcullis.AuditEvent{Kind: portcullis.AuditGrant, Actor: by, Detail: "revoked grant " + id})
}

// AcceptTool accepts the pending definition of an upstream's tool on
// behalf of a person: it becomes the pin, and calls to the tool are no
// longer held at CONFIRM_SINGLE_USE. NOT_FOUND when the tool has no pin,
// CONFLICT when its definition has no pending change.
func (g *Gate) AcceptTool(ctx context.Context, upstream, tool, by string) (portcullis.ToolPin, error) {
	if g.store == nil {
		return portcullis.ToolPin{}, errors.New("accept: the gate has no store")
	}
	p, ok, err := g.store.ToolPin(ctx, upstream, tool)
	if err != nil {
		return portcullis.ToolPin{}, err
	}
	if !ok {
		return portcullis.ToolPin{}, portcullis.Errorf(portcullis.CodeNotFound, "no pinned tool %q of upstream %q", tool, upstream)
	}
	if p.PendingHash == "" {
		return p, portcullis.Errorf(portcullis.CodeConflict, "tool %q of upstream %q has no pending change", tool, upstream)
	}
	old := p.Hash
	p.Hash, p.Definition = p.PendingHash, p.PendingDefinition
	p.PendingHash, p.PendingDefinition = "", nil
	p.UpdatedAt = g.clock.Now()
	p.AcceptedBy = by
	if err := g.store.PutToolPin(ctx, p); err != nil {
		return p, err
	}
	detail := fmt.Sprintf("accepted the changed definition of %q (upstream %q): %.12s → %.12s", tool, upstream, old, p.Hash)
	if old == portcullis.UnacceptedHash {
		detail = fmt.Sprintf("accepted the new tool %q (upstream %q): %.12s", tool, upstream, p.Hash)
	}
	return p, g.auditHuman(ctx, portcullis.AuditEvent{Kind: portcullis.AuditTool, Tool: tool, Actor: by, Detail: detail})
}

func (g *Gate) auditHuman(ctx context.Context, ev portcullis.AuditEvent) error {
	ev.Time = g.clock.Now()
	ev.PolicyHash = g.pol.Load().pol.Hash
	if _, err := g.store.AppendAudit(ctx, ev); err != nil {
		return fmt.Errorf("%s done, but its audit row was not written: %w", ev.Kind, err)
	}
	return nil
}

// awaitPoll bounds how long AwaitApproval trusts the store's change feed
// alone: it re-reads the request at least this often.
const awaitPoll = 2 * time.Second

// AwaitApproval waits until a person answers the approval request, it
// expires, or ctx ends, and returns the request as it then stands. It is
// what holds an agent's call open: when the answer is approved, deciding
// the same call again finds the grant the approval recorded.
//
// Waiters share one subscription to the store's change feed, so many held
// calls cost one feed.
func (g *Gate) AwaitApproval(ctx context.Context, id string) (portcullis.Approval, error) {
	if g.store == nil {
		return portcullis.Approval{}, errors.New("await approval: the gate has no store")
	}
	ch := g.waiters.subscribe(g, id)
	defer g.waiters.unsubscribe(id, ch)
	for {
		a, err := g.store.Approval(ctx, id)
		if err != nil {
			return a, err
		}
		if a.Status != portcullis.ApprovalPending {
			return a, nil
		}
		wait := awaitPoll
		if !a.ExpiresAt.IsZero() {
			if left := a.ExpiresAt.Sub(g.clock.Now()); left < wait {
				wait = max(left, 10*time.Millisecond)
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return a, ctx.Err()
		case <-ch:
		case <-t.C:
		}
		t.Stop()
	}
}

// approvalWaiters fans the store's change feed out to the calls waiting
// for an answer. The feed runs while anyone waits.
type approvalWaiters struct {
	mu     sync.Mutex
	subs   map[string]map[chan struct{}]struct{}
	cancel context.CancelFunc
}

func (w *approvalWaiters) subscribe(g *Gate, id string) chan struct{} {
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.subs == nil {
		w.subs = map[string]map[chan struct{}]struct{}{}
	}
	if w.subs[id] == nil {
		w.subs[id] = map[chan struct{}]struct{}{}
	}
	w.subs[id][ch] = struct{}{}
	if w.cancel == nil {
		ctx, cancel := context.WithCancel(context.Background())
		feed, err := g.store.Watch(ctx)
		if err != nil {
			// Without a feed the waiters poll.
			g.log.Warn("approval waiters: no change feed; polling", "err", err)
			cancel()
			return ch
		}
		w.cancel = cancel
		go w.run(feed)
	}
	return ch
}

func (w *approvalWaiters) unsubscribe(id string, ch chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.subs[id], ch)
	if len(w.subs[id]) == 0 {
		delete(w.subs, id)
	}
	if len(w.subs) == 0 && w.cancel != nil {
		w.cancel()
		w.cancel = nil
	}
}

func (w *approvalWaiters) run(feed <-chan portcullis.Change) {
	for c := range feed {
		w.mu.Lock()
		switch c.Kind {
		case portcullis.ChangeApproval:
			for ch := range w.subs[c.ID] {
				wake(ch)
			}
		case portcullis.ChangeResync:
			for _, m := range w.subs {
				for ch := range m {
					wake(ch)
				}
			}
		}
		w.mu.Unlock()
	}
}

func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// ToolLevel is the permission level the policy gives a tool for a call's
// session and agent before any run state, validator or grant: the route and
// elements stages only, changing nothing. The MCP gateway hides the tools
// whose level is DENY from tools/list. Under mode off or shadow nothing is
// denied, so the level is never DENY.
func (g *Gate) ToolLevel(c portcullis.Call) (level portcullis.Level) {
	e := &eval{g: g, c: &c, pol: g.pol.Load(), dry: true, explain: true}
	if !g.trusted {
		e.c = untrusted(e.c)
	}
	e.r = e.pol.upstreamRoute(&c)
	e.canonical = c.Tool
	mode := e.pol.pol.Mode
	if e.r != nil {
		e.canonical = e.r.name
		if e.r.mode != "" {
			mode = e.r.mode
		}
	}
	if mode == portcullis.ModeOff || mode == portcullis.ModeShadow {
		return portcullis.AutoApprove
	}
	defer func() {
		if recover() != nil {
			level = portcullis.Deny
		}
	}()
	if e.route() {
		return e.d.PermissionLevel
	}
	done, err := e.elements()
	if err != nil {
		return portcullis.Deny
	}
	if done {
		return e.d.PermissionLevel
	}
	return e.level
}
