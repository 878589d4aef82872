package mcpgw

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis/portcullis"
)

// progressEvery is how often a held call tells a client that sent a
// progress token that it is still waiting.
var progressEvery = 5 * time.Second

// hold keeps a call that needs a person open while the people are asked
// (the gate has already recorded the approval request and notified them):
// up to Config.Wait, with progress notifications when the client asked for
// them and, where the client supports URL-mode elicitation, a link to the
// console's approval page. Approved: the call is decided again (the grant
// the approval recorded satisfies it) and forwarded when allowed. Denied,
// expired or timed out: an error result.
func (g *Gateway) hold(ctx context.Context, tc *toolCall, s *session, e *toolEntry, call portcullis.Call, d portcullis.Decision) callAnswer {
	id := d.ChallengeID
	wctx, cancel := context.WithTimeout(ctx, g.cfg.Wait)
	defer cancel()
	g.mu.Lock()
	g.held[id] = HeldCall{ApprovalID: id, Tool: call.Tool, Agent: s.agent, Session: s.id, Since: g.cfg.Clock.Now()}
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		delete(g.held, id)
		g.mu.Unlock()
	}()
	g.log.Info("call held for a person", "tool", call.Tool, "session", s.id, "agent", s.agent, "approval", id)

	if tok := tc.progressToken(); tok != nil {
		go g.heartbeat(wctx, s.ss, tok, id)
	}
	if g.cfg.ApprovalURL != nil && supportsURLElicitation(s.ss) {
		go func() {
			// The answer is not an approval: the person approves in the
			// console, on a channel the agent cannot reach. Accept or
			// decline only says whether the link was opened.
			_, err := s.ss.Elicit(wctx, &mcp.ElicitParams{
				Mode:          "url",
				Message:       fmt.Sprintf("Portcullis holds the call to %q until a person approves it.", call.Tool),
				URL:           g.cfg.ApprovalURL(id),
				ElicitationID: id,
			})
			if err != nil && wctx.Err() == nil {
				g.log.Debug("url elicitation", "approval", id, "err", err)
			}
		}()
	}

	waitStart := time.Now()
	a, err := g.cfg.Gate.AwaitApproval(wctx, id)
	g.cfg.Observer.ApprovalWait(call.Tool, waitResult(ctx, a, err), time.Since(waitStart))
	switch {
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		return answer(errorResult(fmt.Sprintf("No person answered approval request %s for the call to %q within %s. The request stays open until %s; if a person approves it, calling again with the same arguments will pass.", id, call.Tool, g.cfg.Wait, a.ExpiresAt.UTC().Format(time.RFC3339)), &d))
	case ctx.Err() != nil:
		g.log.Info("held call cancelled by the client", "tool", call.Tool, "session", s.id, "approval", id)
		return callAnswer{err: ctx.Err()}
	case err != nil:
		d.Outcome, d.FailClosed = portcullis.OutcomeDeny, true
		d.Reason = "the approval request could not be read: " + err.Error()
		return answer(denyResult(d))
	}
	switch a.Status {
	case portcullis.ApprovalApproved:
		d2, err := g.cfg.Gate.Decide(ctx, call)
		if err != nil && d2.Outcome == "" {
			d2.Outcome, d2.FailClosed = portcullis.OutcomeDeny, true
		}
		if d2.Outcome != portcullis.OutcomeAllow {
			return answer(denyResult(d2))
		}
		return g.forward(ctx, s, e, tc, call)
	case portcullis.ApprovalDenied:
		text := fmt.Sprintf("A person denied the call to %q (approval %s)", call.Tool, id)
		if a.DenyReason != "" {
			text += ": " + a.DenyReason
		}
		d.Outcome, d.Reason = portcullis.OutcomeDeny, text
		return answer(errorResult(text+". Do not retry it unchanged.", &d))
	default:
		d.Outcome = portcullis.OutcomeDeny
		return answer(errorResult(fmt.Sprintf("Approval request %s for the call to %q %s before a person answered.", id, call.Tool, a.Status), &d))
	}
}

// HeldCall is a call held open while a person is asked.
type HeldCall struct {
	// ApprovalID is the approval request a person answers
	// (`portcullis approve ID`, `portcullis deny ID`, the console).
	ApprovalID string
	// Tool is the tool's name as the client called it.
	Tool           string
	Agent, Session string
	// Since is when the call began to wait.
	Since time.Time
}

// Held lists the calls held for a person now, the longest-waiting first.
func (g *Gateway) Held() []HeldCall {
	g.mu.Lock()
	out := make([]HeldCall, 0, len(g.held))
	for _, h := range g.held {
		out = append(out, h)
	}
	g.mu.Unlock()
	slices.SortFunc(out, func(a, b HeldCall) int { return a.Since.Compare(b.Since) })
	return out
}

func (g *Gateway) heartbeat(ctx context.Context, ss *mcp.ServerSession, tok any, id string) {
	t := time.NewTicker(progressEvery)
	defer t.Stop()
	start := time.Now()
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		waited := time.Since(start).Round(time.Second)
		err := ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
			ProgressToken: tok,
			Progress:      float64(n),
			Message:       fmt.Sprintf("waiting for a person to answer approval request %s (%s so far)", id, waited),
		})
		if err != nil {
			return
		}
	}
}

// supportsURLElicitation says whether the gateway may send the client a
// URL-mode elicitation while a call is held: the client declared the
// capability, and its protocol version still lets a server send requests
// while it serves one (2026-07-28 replaced that with multi round-trip
// input requests; such clients get progress notifications only).
func supportsURLElicitation(ss *mcp.ServerSession) bool {
	ip := ss.InitializeParams()
	return ip != nil && ip.Capabilities != nil && ip.Capabilities.Elicitation != nil && ip.Capabilities.Elicitation.URL != nil &&
		negotiated(ip.ProtocolVersion) < "2026-07-28"
}

// waitResult names how a held call's wait ended, for the Observer.
func waitResult(ctx context.Context, a portcullis.Approval, err error) string {
	switch {
	case ctx.Err() != nil:
		return "cancelled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case err != nil:
		return "error"
	case a.Status == portcullis.ApprovalApproved:
		return "approved"
	case a.Status == portcullis.ApprovalDenied:
		return "denied"
	}
	return "expired"
}
