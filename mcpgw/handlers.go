package mcpgw

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis/portcullis"
)

// withCacheScope fills the cacheScope the protocol requires on list and
// read results, which the SDK fills only on results it builds itself: a
// client that checks it (Claude Code does) refuses a result without it.
// The gateway's answers depend on the session (tools the policy denies it
// are hidden), so they are "private"; a scope already set is kept.
func withCacheScope[R interface {
	mcp.Result
	GetCacheScope() string
}](r R, err error) (mcp.Result, error) {
	if err != nil {
		return nil, err
	}
	var c *mcp.Cacheable
	switch r := any(r).(type) {
	case *mcp.ListToolsResult:
		c = &r.Cacheable
	case *mcp.ListPromptsResult:
		c = &r.Cacheable
	case *mcp.ListResourcesResult:
		c = &r.Cacheable
	case *mcp.ListResourceTemplatesResult:
		c = &r.Cacheable
	case *mcp.ReadResourceResult:
		c = &r.Cacheable
	}
	if c != nil && c.CacheScope == "" {
		c.CacheScope = "private"
	}
	return r, nil
}

// receive is the gateway's receiving middleware: it answers the methods
// that concern the upstreams and leaves the protocol's own (initialize,
// ping, notifications) to the SDK.
func (g *Gateway) receive(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if err := checkParams(method, req); err != nil {
			return nil, err
		}
		switch method {
		case "initialize":
			g.bindOwner(req)
		case "tools/call":
			return g.callTool(ctx, req.(*mcp.CallToolRequest))
		case "tools/list":
			return withCacheScope(g.listTools(ctx, req.(*mcp.ListToolsRequest)))
		case "prompts/list":
			return withCacheScope(g.listPrompts(ctx, req.(*mcp.ListPromptsRequest)))
		case "prompts/get":
			return g.getPrompt(ctx, req.(*mcp.GetPromptRequest))
		case "resources/list":
			return withCacheScope(g.listResources(ctx, req.(*mcp.ListResourcesRequest)))
		case "resources/templates/list":
			return withCacheScope(g.listResourceTemplates(ctx, req.(*mcp.ListResourceTemplatesRequest)))
		case "resources/read":
			return withCacheScope(g.readResource(ctx, req.(*mcp.ReadResourceRequest)))
		case "completion/complete":
			return g.complete(ctx, req.(*mcp.CompleteRequest))
		case "logging/setLevel":
			r := req.(*mcp.ServerRequest[*mcp.SetLoggingLevelParams])
			for _, up := range g.ups {
				if ir := up.initResult(); ir == nil || ir.Capabilities == nil || ir.Capabilities.Logging == nil {
					continue
				}
				if cs, err := up.client(); err == nil {
					if err := cs.SetLoggingLevel(ctx, r.Params); err != nil {
						g.log.Debug("forward logging level", "upstream", up.cfg.Name, "err", err)
					}
				}
			}
			return next(ctx, method, req)
		}
		return next(ctx, method, req)
	}
}

// checkParams refuses a request whose method needs params that it does not
// carry, and gives the list methods, whose params are optional, empty
// ones: a client's malformed message must never reach a handler that
// reads them (it would take the whole gateway down).
func checkParams(method string, req mcp.Request) error {
	missing := false
	switch r := req.(type) {
	case *mcp.CallToolRequest:
		missing = r.Params == nil
	case *mcp.GetPromptRequest:
		missing = r.Params == nil
	case *mcp.ReadResourceRequest:
		missing = r.Params == nil
	case *mcp.CompleteRequest:
		missing = r.Params == nil
	case *mcp.SubscribeRequest:
		missing = r.Params == nil
	case *mcp.UnsubscribeRequest:
		missing = r.Params == nil
	case *mcp.ServerRequest[*mcp.SetLoggingLevelParams]:
		missing = r.Params == nil
	case *mcp.ListPromptsRequest:
		if r.Params == nil {
			r.Params = &mcp.ListPromptsParams{}
		}
	case *mcp.ListResourcesRequest:
		if r.Params == nil {
			r.Params = &mcp.ListResourcesParams{}
		}
	case *mcp.ListResourceTemplatesRequest:
		if r.Params == nil {
			r.Params = &mcp.ListResourceTemplatesParams{}
		}
	case *mcp.ListToolsRequest:
		if r.Params == nil {
			r.Params = &mcp.ListToolsParams{}
		}
	}
	if missing {
		return invalidParams(method + " without params")
	}
	return nil
}

// listTools lists the tools of every upstream as pinned, without those
// whose level is DENY for the session (unless ShowDenied).
func (g *Gateway) listTools(ctx context.Context, req *mcp.ListToolsRequest) (*mcp.ListToolsResult, error) {
	s := g.sessionOf(req.Session, req.Extra)
	g.mu.Lock()
	entries := make([]*toolEntry, 0, len(g.tools))
	for _, e := range g.tools {
		entries = append(entries, e)
	}
	g.mu.Unlock()
	slices.SortFunc(entries, func(a, b *toolEntry) int { return strings.Compare(a.exposed, b.exposed) })
	res := &mcp.ListToolsResult{Tools: make([]*mcp.Tool, 0, len(entries))}
	for _, e := range entries {
		if !g.cfg.ShowDenied {
			info := e.info
			if g.cfg.Gate.ToolLevel(portcullis.Call{Tool: e.exposed, Session: s.id, Agent: s.agent, Upstream: &info}) == portcullis.Deny {
				continue
			}
		}
		res.Tools = append(res.Tools, e.shown)
	}
	return res, nil
}

// callTool gates a tools/call the SDK decoded (see gateCall).
func (g *Gateway) callTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	s := g.sessionOf(req.Session, req.Extra)
	p := req.Params
	a := g.gateCall(ctx, s, &toolCall{name: p.Name, args: p.Arguments, meta: p.Meta, extra: req.Extra})
	if a.err != nil {
		return nil, a.err
	}
	return a.res, nil
}

// toolCall is one tools/call as the gateway reads it, whether the SDK
// decoded it or the fast path scanned it (fast.go).
type toolCall struct {
	name  string
	args  json.RawMessage // as the client sent them
	meta  mcp.Meta
	extra *mcp.RequestExtra
	// rawMeta is the client's _meta as it came, on the fast path.
	rawMeta json.RawMessage
	// fast says the call came by the fast path: when allowed, it goes to
	// an upstream framed by the gateway as a frame of its own, and its
	// result comes back as raw bytes.
	fast bool
}

// progressToken is the client's progress token, as the SDK reads it.
func (tc *toolCall) progressToken() any {
	if tc.meta == nil {
		return nil
	}
	return tc.meta["progressToken"]
}

// callAnswer is the answer to a tools/call: a result (built by the
// gateway, or an upstream's decoded), an upstream's result as the bytes
// it came as (the fast path), or a protocol error.
type callAnswer struct {
	res *mcp.CallToolResult
	raw json.RawMessage
	err error
}

func answer(res *mcp.CallToolResult) callAnswer { return callAnswer{res: res} }

// gateCall gates a tools/call and forwards it when the gate allows it: the
// one pipeline of every tools/call, whichever way it came.
func (g *Gateway) gateCall(ctx context.Context, s *session, tc *toolCall) (a callAnswer) {
	ctx, end := g.cfg.Observer.StartCall(ctx, tc.name, s.id, s.agent)
	result := "denied"
	g.mu.Lock()
	g.inflight++
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.inflight--
		g.mu.Unlock()
		if a.err != nil {
			result = "error"
		}
		end(result, a.err)
	}()
	call := portcullis.Call{Tool: tc.name, Session: s.id, Agent: s.agent, UserPresent: g.cfg.UserPresent, ContextSource: portcullis.ContextOperator,
		Client: clientRef(tc.meta, tc.extra)}
	args, err := decodeArgs(tc.args)
	if err != nil {
		// Not an object, or one two readers could read differently:
		// nothing to decide on. The call is refused and never reaches the
		// upstream.
		result = "refused"
		return answer(errorResult(fmt.Sprintf("Portcullis refused the call to %q: its arguments are not one plain JSON object (%v).", tc.name, err), nil))
	}
	call.Args = args
	if g.cfg.Autonomous {
		call.Run = &portcullis.Run{ID: s.id}
	}
	g.mu.Lock()
	e := g.tools[tc.name]
	g.mu.Unlock()
	if e != nil {
		info := e.info
		call.Upstream = &info
	} else {
		call.Upstream = &portcullis.UpstreamTool{}
	}
	d, err := g.cfg.Gate.Decide(ctx, call)
	if err != nil && d.Outcome == "" {
		d.Outcome, d.FailClosed = portcullis.OutcomeDeny, true
	}
	switch d.Outcome {
	case portcullis.OutcomeAllow:
		if e == nil {
			// The gate let through a tool no upstream offers (mode off):
			// there is nothing to forward to.
			return answer(errorResult(fmt.Sprintf("No upstream server offers a tool named %q.", tc.name), &d))
		}
		result = "forwarded"
		return g.forward(ctx, s, e, tc, call)
	case portcullis.OutcomeConfirm:
		if e == nil || d.ChallengeID == "" {
			return answer(denyResult(d))
		}
		result = "held"
		return g.hold(ctx, tc, s, e, call, d)
	default:
		return answer(denyResult(d))
	}
}

// decodeArgs decodes a call's arguments, keeping numbers exact. Absent or
// null arguments are an empty object. Arguments with an object (at any
// depth) that holds a key twice are refused: the gate would decide on the
// last of the two values, and the upstream, which receives the arguments
// as they came, might read the first.
func decodeArgs(raw json.RawMessage) (map[string]any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var args map[string]any
	if err := dec.Decode(&args); err != nil {
		return nil, err
	}
	if args == nil {
		return nil, errors.New("null")
	}
	if err := uniqueKeys(raw); err != nil {
		return nil, err
	}
	return args, nil
}

// uniqueKeys reports the first key that appears twice in one object of a
// JSON value (keys compared as decoded: "id" and "\u0069d" are one key).
// raw is one valid JSON value (decodeArgs has decoded it). It reads the
// bytes itself: a key is decoded only when it has an escape or invalid
// UTF-8, and an object's keys are compared without allocating until it
// has more than a few.
func uniqueKeys(raw []byte) error {
	k := keyScan{b: raw}
	return k.value()
}

// keyScan walks a valid JSON value for uniqueKeys.
type keyScan struct {
	b []byte
	i int
}

func (k *keyScan) ws() {
	for k.i < len(k.b) {
		switch k.b[k.i] {
		case ' ', '\t', '\n', '\r':
			k.i++
		default:
			return
		}
	}
}

// str skips the string at k.i and returns its body (between the quotes)
// and whether it holds an escape.
func (k *keyScan) str() (body []byte, esc bool) {
	start := k.i + 1
	for k.i = start; k.i < len(k.b); k.i++ {
		switch k.b[k.i] {
		case '\\':
			esc = true
			k.i++
		case '"':
			body = k.b[start:k.i]
			k.i++
			return body, esc
		}
	}
	return k.b[start:], esc
}

func (k *keyScan) value() error {
	k.ws()
	if k.i >= len(k.b) {
		return nil
	}
	switch k.b[k.i] {
	case '{':
		return k.object()
	case '[':
		k.i++
		for {
			k.ws()
			if k.i >= len(k.b) || k.b[k.i] == ']' {
				k.i++
				return nil
			}
			if k.b[k.i] == ',' {
				k.i++
				continue
			}
			if err := k.value(); err != nil {
				return err
			}
		}
	case '"':
		k.str()
	default:
		for k.i < len(k.b) {
			switch k.b[k.i] {
			case ',', ']', '}', ' ', '\t', '\n', '\r':
				return nil
			}
			k.i++
		}
	}
	return nil
}

func (k *keyScan) object() error {
	k.i++
	var small [8][]byte
	keys := small[:0]
	var many map[string]struct{}
	for {
		k.ws()
		if k.i >= len(k.b) || k.b[k.i] == '}' {
			k.i++
			return nil
		}
		if k.b[k.i] == ',' {
			k.i++
			continue
		}
		quoted := k.i
		key, esc := k.str()
		if esc || !utf8.Valid(key) {
			// As encoding/json reads it: escapes resolved, invalid
			// UTF-8 replaced.
			var s string
			if err := json.Unmarshal(k.b[quoted:k.i], &s); err != nil {
				return err
			}
			key = []byte(s)
		}
		if many != nil {
			if _, dup := many[string(key)]; dup {
				return fmt.Errorf("the key %q appears twice in one object", key)
			}
			many[string(key)] = struct{}{}
		} else {
			for _, seen := range keys {
				if bytes.Equal(seen, key) {
					return fmt.Errorf("the key %q appears twice in one object", key)
				}
			}
			if keys = append(keys, key); len(keys) > 16 {
				many = make(map[string]struct{}, 2*len(keys))
				for _, seen := range keys {
					many[string(seen)] = struct{}{}
				}
			}
		}
		k.ws()
		k.i++ // the colon
		if err := k.value(); err != nil {
			return err
		}
	}
}

// forwardedArgs are the arguments an allowed call is forwarded with: as
// the client sent them, but absent or null ones as the empty object the
// gate decided on.
func forwardedArgs(raw json.RawMessage) json.RawMessage {
	if t := bytes.TrimSpace(raw); len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return json.RawMessage("{}")
	}
	return raw
}

// forward sends an allowed call to its upstream and records the result's
// isError as the outcome of the run's step. A call that came by the fast
// path, without a progress token, to an upstream the gateway frames
// itself goes as a frame of the gateway's own (fast.go); any other
// through the SDK's client session.
func (g *Gateway) forward(ctx context.Context, s *session, e *toolEntry, tc *toolCall, call portcullis.Call) callAnswer {
	cs, fc, err := e.up.framed()
	if err != nil {
		g.cfg.Observer.UpstreamCall(ctx, e.up.cfg.Name, e.name, 0, false, err)
		return answer(errorResult(fmt.Sprintf("The call to %q was allowed, but %v. Try again shortly.", tc.name, err), nil))
	}
	tok := tc.progressToken()
	if !tc.fast || tok != nil {
		fc = nil
	}
	ctx, cancel := context.WithTimeout(ctx, g.cfg.CallTimeout)
	defer cancel()
	var params *mcp.CallToolParams
	if fc == nil {
		params = &mcp.CallToolParams{Name: e.name, Arguments: forwardedArgs(tc.args)}
		if len(tc.meta) > 0 {
			params.Meta = maps.Clone(tc.meta)
			// The per-request protocol keys (2026-07-28) describe the
			// client's session with the gateway; the SDK's client writes
			// its own for an upstream session that takes them.
			maps.DeleteFunc(params.Meta, func(k string, _ any) bool { return strings.HasPrefix(k, "io.modelcontextprotocol/") })
			if tok != nil {
				params.Meta["progressToken"] = g.routeProgress(s.ss, tok)
				defer g.dropProgress(params.Meta["progressToken"].(string))
			}
		}
	}
	g.mu.Lock()
	s.inflight[e.up]++
	g.mu.Unlock()
	start := time.Now()
	var res *mcp.CallToolResult
	var raw json.RawMessage
	isError := false
	if fc != nil {
		raw, res, isError, err = g.callRaw(ctx, fc, e, tc)
	} else {
		res, err = cs.CallTool(ctx, params)
		isError = err == nil && res.IsError
	}
	g.cfg.Observer.UpstreamCall(ctx, e.up.cfg.Name, e.name, time.Since(start), isError, err)
	g.mu.Lock()
	s.inflight[e.up]--
	g.mu.Unlock()
	outcome := portcullis.StepSuccess
	if err != nil || isError {
		outcome = portcullis.StepFailure
	}
	if call.Run != nil {
		if rerr := g.cfg.Gate.RecordOutcome(context.WithoutCancel(ctx), call.Run.ID, outcome); rerr != nil {
			g.log.Warn("record step outcome", "session", s.id, "err", rerr)
		}
	}
	if err != nil {
		var wire *jsonrpc.Error
		if errors.As(err, &wire) {
			return callAnswer{err: err} // the upstream's own protocol error, passed on
		}
		if ctx.Err() == context.DeadlineExceeded {
			return answer(errorResult(fmt.Sprintf("Upstream %q did not answer the call to %q within %s.", e.up.cfg.Name, tc.name, g.cfg.CallTimeout), nil))
		}
		return answer(errorResult(fmt.Sprintf("Upstream %q failed the call to %q: %v", e.up.cfg.Name, tc.name, err), nil))
	}
	if raw != nil {
		return callAnswer{raw: raw}
	}
	stripOwnMeta(res)
	return answer(res)
}

var progressSeq atomic.Uint64

// routeProgress gives a client's progress token a gateway-wide unique one
// for the upstream, so progress from a shared upstream reaches the right
// client with the client's own token.
func (g *Gateway) routeProgress(ss *mcp.ServerSession, tok any) string {
	id := "portcullis-" + strconv.FormatUint(progressSeq.Add(1), 36)
	g.mu.Lock()
	g.progress[id] = progressRoute{ss: ss, token: tok}
	g.mu.Unlock()
	return id
}

// progressLinger is how long a progress route outlives its call: the SDK
// may deliver an upstream's last notifications after the call's result.
const progressLinger = 2 * time.Second

func (g *Gateway) dropProgress(id string) {
	time.AfterFunc(progressLinger, func() {
		g.mu.Lock()
		delete(g.progress, id)
		g.mu.Unlock()
	})
}

func (g *Gateway) forwardProgress(ctx context.Context, p *mcp.ProgressNotificationParams) {
	id, _ := p.ProgressToken.(string)
	g.mu.Lock()
	r, ok := g.progress[id]
	g.mu.Unlock()
	if !ok {
		return
	}
	fwd := *p
	fwd.ProgressToken = r.token
	if err := r.ss.NotifyProgress(ctx, &fwd); err != nil {
		g.log.Debug("forward progress", "err", err)
	}
}

// DecisionMeta is the _meta key under which a refusal result carries
// Portcullis's decision. A refusal never carries structuredContent: a
// client validates that against the tool's outputSchema even when isError
// is set (the TypeScript SDK does), and a decision is no tool's output.
// Results from upstreams are stripped of every _meta key with the
// "portcullis/" prefix, so this key always comes from the gateway.
const DecisionMeta = "portcullis/decision"

// metaPrefix is the _meta namespace the gateway owns.
const metaPrefix = "portcullis/"

// errorResult is a tool result with isError set: the model reads text; a
// program reads the decision in _meta["portcullis/decision"].
func errorResult(text string, d *portcullis.Decision) *mcp.CallToolResult {
	r := &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
	if d != nil {
		if b, err := json.Marshal(d); err == nil {
			r.Meta = mcp.Meta{DecisionMeta: json.RawMessage(b)}
		}
	}
	return r
}

// stripOwnMeta removes the _meta keys in the gateway's namespace from an
// upstream's result (and its content blocks), so an upstream cannot pass
// off its words as a Portcullis decision.
func stripOwnMeta(r *mcp.CallToolResult) {
	if r == nil {
		return
	}
	r.Meta = withoutOwnKeys(r.Meta)
	for _, c := range r.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			c.Meta = withoutOwnKeys(c.Meta)
		case *mcp.ImageContent:
			c.Meta = withoutOwnKeys(c.Meta)
		case *mcp.AudioContent:
			c.Meta = withoutOwnKeys(c.Meta)
		case *mcp.ResourceLink:
			c.Meta = withoutOwnKeys(c.Meta)
		case *mcp.EmbeddedResource:
			c.Meta = withoutOwnKeys(c.Meta)
			if c.Resource != nil {
				c.Resource.Meta = withoutOwnKeys(c.Resource.Meta)
			}
		}
	}
}

func withoutOwnKeys(m mcp.Meta) mcp.Meta {
	for k := range m {
		if strings.HasPrefix(strings.ToLower(k), metaPrefix) {
			delete(m, k)
		}
	}
	return m
}

// denyResult tells the model what was refused, why, and what would
// authorize it. It never carries a verification code: decisions have none.
func denyResult(d portcullis.Decision) *mcp.CallToolResult {
	var b strings.Builder
	switch d.Outcome {
	case portcullis.OutcomeStop:
		b.WriteString("Portcullis stopped the call to ")
	case portcullis.OutcomeConfirm:
		b.WriteString("Portcullis could not ask a person to confirm the call to ")
	default:
		b.WriteString("Portcullis denied the call to ")
	}
	b.WriteString(strconv.Quote(d.Tool))
	b.WriteString(": ")
	b.WriteString(d.Reason)
	if d.Code != "" {
		b.WriteString(" [")
		b.WriteString(string(d.Code))
		b.WriteString("]")
	}
	if d.Code == portcullis.CodeDangerZone && d.ChallengeID != "" {
		b.WriteString(". The agent is blocked (challenge ")
		b.WriteString(d.ChallengeID)
		b.WriteString("): a person must clear the block out of band; retrying will not help")
	} else if d.Outcome == portcullis.OutcomeStop {
		b.WriteString(". Wait for the user before trying again")
	}
	if d.WhatWouldAuthorize != "" {
		b.WriteString(". What would authorize it: ")
		b.WriteString(d.WhatWouldAuthorize)
	}
	b.WriteString(".")
	return errorResult(b.String(), &d)
}

// cursor pages through several upstreams' lists: the index of the
// upstream and that upstream's own cursor.
type cursor struct {
	I int    `json:"i"`
	C string `json:"c,omitempty"`
}

func decodeCursor(s string) (cursor, error) {
	if s == "" {
		return cursor{}, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return cursor{}, invalidParams("invalid cursor")
	}
	var c cursor
	if err := json.Unmarshal(b, &c); err != nil || c.I < 0 {
		return cursor{}, invalidParams("invalid cursor")
	}
	return c, nil
}

func (c cursor) String() string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

func invalidParams(msg string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: msg}
}

// page walks the upstreams offering a capability from a cursor, returning
// one upstream's page and the cursor of the next.
func (g *Gateway) page(ctx context.Context, raw string, has func(*mcp.ServerCapabilities) bool, list func(*upstream, *mcp.ClientSession, string) (string, error)) (string, error) {
	c, err := decodeCursor(raw)
	if err != nil {
		return "", err
	}
	for i := c.I; i < len(g.ups); i++ {
		up := g.ups[i]
		ir := up.initResult()
		if ir == nil || ir.Capabilities == nil || !has(ir.Capabilities) {
			continue
		}
		cs, err := up.client()
		if err != nil {
			if len(g.ups) == 1 {
				return "", err
			}
			continue // an unavailable upstream's entries are left out
		}
		in := ""
		if i == c.I {
			in = c.C
		}
		next, err := list(up, cs, in)
		if err != nil {
			return "", err
		}
		if next != "" {
			return cursor{I: i, C: next}.String(), nil
		}
		if i+1 < len(g.ups) {
			return cursor{I: i + 1}.String(), nil
		}
		return "", nil
	}
	return "", nil
}

func hasPrompts(c *mcp.ServerCapabilities) bool   { return c.Prompts != nil }
func hasResources(c *mcp.ServerCapabilities) bool { return c.Resources != nil }

func (g *Gateway) listPrompts(ctx context.Context, req *mcp.ListPromptsRequest) (*mcp.ListPromptsResult, error) {
	res := &mcp.ListPromptsResult{Prompts: []*mcp.Prompt{}}
	var from string // a client may leave out a list's params
	if req.Params != nil {
		from = req.Params.Cursor
	}
	next, err := g.page(ctx, from, hasPrompts, func(up *upstream, cs *mcp.ClientSession, c string) (string, error) {
		r, err := cs.ListPrompts(ctx, &mcp.ListPromptsParams{Cursor: c})
		if err != nil {
			return "", err
		}
		for _, p := range r.Prompts {
			cp := *p
			cp.Name = up.prefix() + p.Name
			res.Prompts = append(res.Prompts, &cp)
		}
		return r.NextCursor, nil
	})
	res.NextCursor = next
	return res, err
}

// byPrefix finds the upstream of a prefixed name (a prompt, a completion
// reference) and the upstream's own name for it.
func (g *Gateway) byPrefix(name string, has func(*mcp.ServerCapabilities) bool) (*upstream, string, error) {
	var best *upstream
	for _, up := range g.ups {
		ir := up.initResult()
		if ir == nil || ir.Capabilities == nil || !has(ir.Capabilities) {
			continue
		}
		if p := up.prefix(); strings.HasPrefix(name, p) && (best == nil || len(p) > len(best.prefix())) {
			best = up
		}
	}
	if best == nil {
		return nil, "", invalidParams(fmt.Sprintf("no upstream offers %q", name))
	}
	return best, strings.TrimPrefix(name, best.prefix()), nil
}

func (g *Gateway) getPrompt(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	up, name, err := g.byPrefix(req.Params.Name, hasPrompts)
	if err != nil {
		return nil, err
	}
	cs, err := up.client()
	if err != nil {
		return nil, err
	}
	p := *req.Params
	p.Name = name
	return cs.GetPrompt(ctx, &p)
}

func (g *Gateway) listResources(ctx context.Context, req *mcp.ListResourcesRequest) (*mcp.ListResourcesResult, error) {
	res := &mcp.ListResourcesResult{Resources: []*mcp.Resource{}}
	var from string // a client may leave out a list's params
	if req.Params != nil {
		from = req.Params.Cursor
	}
	next, err := g.page(ctx, from, hasResources, func(up *upstream, cs *mcp.ClientSession, c string) (string, error) {
		r, err := cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: c})
		if err != nil {
			return "", err
		}
		res.Resources = append(res.Resources, r.Resources...)
		return r.NextCursor, nil
	})
	res.NextCursor = next
	return res, err
}

func (g *Gateway) listResourceTemplates(ctx context.Context, req *mcp.ListResourceTemplatesRequest) (*mcp.ListResourceTemplatesResult, error) {
	res := &mcp.ListResourceTemplatesResult{ResourceTemplates: []*mcp.ResourceTemplate{}}
	var from string // a client may leave out a list's params
	if req.Params != nil {
		from = req.Params.Cursor
	}
	next, err := g.page(ctx, from, hasResources, func(up *upstream, cs *mcp.ClientSession, c string) (string, error) {
		r, err := cs.ListResourceTemplates(ctx, &mcp.ListResourceTemplatesParams{Cursor: c})
		if err != nil {
			return "", err
		}
		res.ResourceTemplates = append(res.ResourceTemplates, r.ResourceTemplates...)
		return r.NextCursor, nil
	})
	res.NextCursor = next
	return res, err
}

// resourceUpstream picks the upstream of a resource URI: the only one that
// offers resources, or the first whose read of it succeeds is decided by
// readResource; subscriptions go to the only or first such upstream.
func (g *Gateway) resourceUpstream(uri string) (*upstream, error) {
	for _, up := range g.ups {
		if ir := up.initResult(); ir != nil && ir.Capabilities != nil && ir.Capabilities.Resources != nil {
			return up, nil
		}
	}
	return nil, invalidParams(fmt.Sprintf("no upstream offers resource %q", uri))
}

func (g *Gateway) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	var firstErr error
	for _, up := range g.ups {
		ir := up.initResult()
		if ir == nil || ir.Capabilities == nil || ir.Capabilities.Resources == nil {
			continue
		}
		cs, err := up.client()
		if err != nil {
			firstErr = cmpErr(firstErr, err)
			continue
		}
		r, err := cs.ReadResource(ctx, req.Params)
		if err == nil {
			return r, nil
		}
		firstErr = cmpErr(firstErr, err)
	}
	if firstErr == nil {
		firstErr = mcp.ResourceNotFoundError(req.Params.URI)
	}
	return nil, firstErr
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

func (g *Gateway) complete(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	p := *req.Params
	if p.Ref == nil {
		return nil, invalidParams("completion without a reference")
	}
	ref := *p.Ref
	var up *upstream
	var err error
	if ref.Type == "ref/prompt" {
		up, ref.Name, err = g.byPrefix(ref.Name, hasPrompts)
	} else {
		up, err = g.resourceUpstream(ref.URI)
	}
	if err != nil {
		return nil, err
	}
	cs, err := up.client()
	if err != nil {
		return nil, err
	}
	p.Ref = &ref
	return cs.Complete(ctx, &p)
}

// Where clients say which of their sessions and tool uses a call belongs
// to: Claude Code puts the model's tool-use ID in every tools/call's
// _meta, and sends its session ID as a header on its HTTP requests.
const (
	metaToolUseID   = "claudecode/toolUseId"
	headerSessionID = "X-Claude-Code-Session-Id"
)

// maxClientRef bounds an identifier the client sends: longer ones, or
// ones with control characters, are not kept.
const maxClientRef = 256

// clientRef is what the client says about the call in its own terms, for
// the audit row (nil when it says nothing).
func clientRef(meta mcp.Meta, extra *mcp.RequestExtra) *portcullis.ClientRef {
	var c portcullis.ClientRef
	if v, ok := meta[metaToolUseID].(string); ok {
		c.ToolUseID = cleanRef(v)
	}
	if extra != nil && extra.Header != nil {
		c.Session = cleanRef(extra.Header.Get(headerSessionID))
	}
	if c == (portcullis.ClientRef{}) {
		return nil
	}
	return &c
}

func cleanRef(v string) string {
	v = strings.TrimSpace(v)
	if len(v) > maxClientRef || strings.ContainsFunc(v, unicode.IsControl) {
		return ""
	}
	return v
}
