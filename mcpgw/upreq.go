package mcpgw

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis/portcullis"
)

// Requests an upstream sends to its client — sampling/createMessage,
// elicitation/create, roots/list — are decided by the gate like tool
// calls, as calls to the reserved names portcullis.UpstreamRequestTool
// (with UpstreamTool.Request set, which only the gateway can do), under
// the policy's upstreamRequests, and audited by the same pipeline. A
// request that needs a person is held like a tool call; a refused one is
// answered with a JSON-RPC error the upstream can read.

// UpstreamMeta is the _meta key naming the upstream an elicitation the
// gateway forwards came from.
const UpstreamMeta = "portcullis/upstream"

// codeRefused is the JSON-RPC error code of a refused upstream request
// (the MCP specification's example of a user rejecting a sampling
// request).
const codeRefused = -1

// earlyRequestWait bounds how long the stdio wrapper holds a request its
// upstream made before the one client initialized.
const earlyRequestWait = 2 * time.Minute

// clientOf is the client session an upstream's request is for, and the
// gateway's state of it. With one client (the stdio wrapper), a request
// made before that client initialized waits for it.
func (g *Gateway) clientOf(ctx context.Context, u *upstream) (*mcp.ServerSession, *session, error) {
	if g.cfg.OneClient {
		wctx, cancel := context.WithTimeout(ctx, earlyRequestWait)
		defer cancel()
		select {
		case <-g.ready:
		case <-g.ctx.Done():
			return nil, nil, errors.New("the gateway is closing")
		case <-wctx.Done():
			return nil, nil, fmt.Errorf("upstream %q asked its client for something before the client connected, and none did within %s", u.cfg.Name, earlyRequestWait)
		}
	}
	ss, err := g.ownerOf(u)
	if err != nil {
		return nil, nil, err
	}
	g.mu.Lock()
	s := g.sessions[ss]
	g.mu.Unlock()
	return ss, s, nil
}

// admit has the gate decide an upstream's request of method, with args
// describing it, for client session s (nil when no session is concerned:
// roots answered from the configuration). It returns nil when the request
// may be forwarded or answered, after holding it for a person when the
// policy says so, and otherwise the error to answer the upstream with.
func (g *Gateway) admit(ctx context.Context, u *upstream, method string, args any, s *session) error {
	raw, err := json.Marshal(args)
	if err != nil {
		return refusal(fmt.Sprintf("Portcullis refused the %s request of upstream %q: %v", method, u.cfg.Name, err))
	}
	a, err := decodeArgs(raw)
	if err != nil {
		return refusal(fmt.Sprintf("Portcullis refused the %s request of upstream %q: %v", method, u.cfg.Name, err))
	}
	call := portcullis.Call{
		Tool:        portcullis.UpstreamRequestTool(method),
		Args:        a,
		Agent:       g.cfg.Agent,
		UserPresent: g.cfg.UserPresent,
		Upstream:    &portcullis.UpstreamTool{Server: u.cfg.Name, Offered: true, Request: method},
	}
	if s != nil {
		call.Session, call.Agent = s.id, s.agent
	}
	d, err := g.cfg.Gate.Decide(ctx, call)
	if err != nil && d.Outcome == "" {
		d.Outcome, d.FailClosed = portcullis.OutcomeDeny, true
	}
	switch d.Outcome {
	case portcullis.OutcomeAllow:
		return nil
	case portcullis.OutcomeConfirm:
		if d.ChallengeID != "" {
			return g.holdRequest(ctx, u, method, call, d)
		}
	}
	g.log.Info("upstream request refused", "upstream", u.cfg.Name, "method", method, "session", call.Session, "outcome", d.Outcome, "reason", d.Reason)
	return refusal(fmt.Sprintf("Portcullis refused the %s request of upstream %q: %s", method, u.cfg.Name, d.Reason))
}

// holdRequest waits, up to Config.Wait, for a person to answer the
// approval request of an upstream's request; approved, the request is
// decided again (the approval's grant lets it through).
func (g *Gateway) holdRequest(ctx context.Context, u *upstream, method string, call portcullis.Call, d portcullis.Decision) error {
	id := d.ChallengeID
	g.log.Info("upstream request held for a person", "upstream", u.cfg.Name, "method", method, "session", call.Session, "approval", id)
	wctx, cancel := context.WithTimeout(ctx, g.cfg.Wait)
	defer cancel()
	a, err := g.cfg.Gate.AwaitApproval(wctx, id)
	switch {
	case err != nil && ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, context.DeadlineExceeded):
		return refusal(fmt.Sprintf("No person answered approval request %s for the %s request of upstream %q within %s.", id, method, u.cfg.Name, g.cfg.Wait))
	case err != nil:
		return refusal(fmt.Sprintf("Portcullis refused the %s request of upstream %q: the approval request could not be read: %v", method, u.cfg.Name, err))
	case a.Status != portcullis.ApprovalApproved:
		text := fmt.Sprintf("A person did not approve the %s request of upstream %q (approval %s is %s)", method, u.cfg.Name, id, a.Status)
		if a.DenyReason != "" {
			text += ": " + a.DenyReason
		}
		return refusal(text + ".")
	}
	d2, err := g.cfg.Gate.Decide(ctx, call)
	if err != nil || d2.Outcome != portcullis.OutcomeAllow {
		return refusal(fmt.Sprintf("Portcullis refused the %s request of upstream %q after its approval: %s", method, u.cfg.Name, d2.Reason))
	}
	return nil
}

func refusal(msg string) error { return &jsonrpc.Error{Code: codeRefused, Message: msg} }

// samplingArgs describe a sampling request for the decision, the audit
// and the person asked: who asks, with which prompt.
type samplingArgs struct {
	Upstream     string   `json:"upstream"`
	SystemPrompt string   `json:"systemPrompt,omitempty"`
	Messages     []string `json:"messages"`
	MaxTokens    int64    `json:"maxTokens"`
}

func (g *Gateway) upstreamSampling(ctx context.Context, u *upstream, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	ss, s, err := g.clientOf(ctx, u)
	if err != nil {
		return nil, err
	}
	p := req.Params
	args := samplingArgs{Upstream: u.cfg.Name, SystemPrompt: p.SystemPrompt, MaxTokens: p.MaxTokens, Messages: []string{}}
	for _, m := range p.Messages {
		if m == nil {
			continue
		}
		text := "[non-text content]"
		if tc, ok := m.Content.(*mcp.TextContent); ok {
			text = tc.Text
		}
		args.Messages = append(args.Messages, string(m.Role)+": "+text)
	}
	if err := g.admit(ctx, u, portcullis.MethodSampling, args, s); err != nil {
		return nil, err
	}
	return ss.CreateMessage(ctx, p)
}

// elicitArgs describe an elicitation for the decision and the audit.
type elicitArgs struct {
	Upstream        string `json:"upstream"`
	Mode            string `json:"mode,omitempty"`
	Message         string `json:"message"`
	URL             string `json:"url,omitempty"`
	RequestedSchema any    `json:"requestedSchema,omitempty"`
}

func (g *Gateway) upstreamElicit(ctx context.Context, u *upstream, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	ss, s, err := g.clientOf(ctx, u)
	if err != nil {
		return nil, err
	}
	p := *req.Params
	if err := g.admit(ctx, u, portcullis.MethodElicitation, elicitArgs{Upstream: u.cfg.Name, Mode: p.Mode, Message: p.Message, URL: p.URL, RequestedSchema: p.RequestedSchema}, s); err != nil {
		return nil, err
	}
	// Labelled with its upstream, so that a person never takes a server's
	// question for Portcullis's own.
	p.Message = fmt.Sprintf("[upstream %s] %s", u.cfg.Name, p.Message)
	meta := make(mcp.Meta, len(p.Meta)+1)
	maps.Copy(meta, p.Meta)
	p.Meta = withoutOwnKeys(meta)
	p.Meta[UpstreamMeta] = u.cfg.Name
	return ss.Elicit(ctx, &p)
}

// upstreamRoots answers an upstream's roots/list: from the upstream's
// configured roots when it has some, else from the client session it
// serves.
func (g *Gateway) upstreamRoots(ctx context.Context, u *upstream) (*mcp.ListRootsResult, error) {
	type rootsArgs struct {
		Upstream string   `json:"upstream"`
		Roots    []string `json:"configuredRoots,omitempty"`
	}
	if len(u.cfg.Roots) > 0 {
		if err := g.admit(ctx, u, portcullis.MethodRoots, rootsArgs{Upstream: u.cfg.Name, Roots: u.cfg.Roots}, nil); err != nil {
			return nil, err
		}
		res := &mcp.ListRootsResult{Roots: make([]*mcp.Root, 0, len(u.cfg.Roots))}
		for _, r := range u.cfg.Roots {
			res.Roots = append(res.Roots, &mcp.Root{URI: r})
		}
		return res, nil
	}
	ss, s, err := g.clientOf(ctx, u)
	if err != nil {
		return nil, err
	}
	if err := g.admit(ctx, u, portcullis.MethodRoots, rootsArgs{Upstream: u.cfg.Name}, s); err != nil {
		return nil, err
	}
	return ss.ListRoots(ctx, &mcp.ListRootsParams{})
}
