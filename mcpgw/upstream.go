package mcpgw

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis/portcullis"
)

// Upstream configures one MCP server behind the gateway: a command the
// gateway starts and talks to over stdio, or a Streamable HTTP URL.
type Upstream struct {
	// Name identifies the upstream in pins, logs and the audit. Required.
	Name string
	// Prefix is put before the upstream's tool and prompt names as the
	// client sees them. Nil: none with one upstream, Name+"__" with
	// several. Tool names stay within what clients accept
	// ([A-Za-z0-9_-], at most 64 characters) when the upstream's are.
	Prefix *string
	// Command (with its arguments) starts a stdio server; Env adds
	// variables to the gateway's environment; Dir is its working directory.
	Command []string
	Env     []string
	Dir     string
	// URL is a Streamable HTTP server; Headers are sent with every request
	// (e.g. its Authorization).
	URL     string
	Headers map[string]string
	// MaxFrame bounds one line a command's upstream writes on its stdout
	// (default DefaultMaxFrame). A longer line fails only the call it
	// answers; a line that is not a JSON-RPC message is logged, counted
	// (FrameObserver) and skipped. The session goes on either way.
	MaxFrame int
	// Transport, when set, connects to the upstream instead (tests, and
	// embedding a Go server in process).
	Transport func(ctx context.Context) (mcp.Transport, error)
	// Roots, when set, answer the upstream's roots/list (file:// URIs)
	// instead of a client session's roots.
	Roots []string
	// TrustAnnotations makes the upstream's MCP tool annotations classify
	// the tools the policy does not name (readOnlyHint → READ,
	// destructiveHint → DELETE, otherwise UPDATE). By default they are the
	// server's own claims: they may make a tool stricter, never looser,
	// and an unnamed tool gets the policy's unknownTools level.
	TrustAnnotations bool
}

// UpstreamError is a fault in the list of upstreams: Index and Name say
// which (Name may be empty), Problem what is wrong with it.
type UpstreamError struct {
	Index   int
	Name    string
	Problem string
}

func (e *UpstreamError) Error() string {
	if e.Name == "" {
		return fmt.Sprintf("upstreams[%d]: %s", e.Index, e.Problem)
	}
	return fmt.Sprintf("upstreams[%d] (%s): %s", e.Index, e.Name, e.Problem)
}

// CheckUpstreams checks a list of upstreams as New does: each has a name
// no other has, and exactly one of a command, a URL and a transport. The
// error is an *UpstreamError. It is the one check of an upstream list:
// the gateway's configuration file is checked with it too.
func CheckUpstreams(ups []Upstream) error {
	seen := map[string]bool{}
	for i, u := range ups {
		n, want := 0, "command and url"
		if len(u.Command) > 0 {
			n++
		}
		if u.URL != "" {
			n++
		}
		if u.Transport != nil {
			n++
			want = "command, url and transport"
		}
		switch {
		case u.Name == "":
			return &UpstreamError{Index: i, Problem: "name is required"}
		case seen[u.Name]:
			return &UpstreamError{Index: i, Problem: fmt.Sprintf("name %q is used twice", u.Name)}
		case n != 1:
			return &UpstreamError{Index: i, Name: u.Name, Problem: "give exactly one of " + want}
		}
		seen[u.Name] = true
	}
	return nil
}

func (u *Upstream) transport(ctx context.Context, log *slog.Logger, obs Observer) (mcp.Transport, error) {
	switch {
	case u.Transport != nil:
		return u.Transport(ctx)
	case u.URL != "":
		client := http.DefaultClient
		if len(u.Headers) > 0 {
			client = &http.Client{Transport: headerTransport{base: http.DefaultTransport, headers: u.Headers}}
		}
		return &mcp.StreamableClientTransport{Endpoint: u.URL, HTTPClient: client}, nil
	default:
		// The process is not bound to ctx: it lives until the gateway
		// closes the session (or it dies and is restarted).
		cmd := exec.Command(u.Command[0], u.Command[1:]...)
		cmd.Env = append(os.Environ(), u.Env...)
		cmd.Dir = u.Dir
		cmd.Stderr = os.Stderr // the upstream's logs join ours; never stdout
		t := &commandTransport{cmd: cmd, upstream: u.Name, maxFrame: u.MaxFrame, log: log}
		if fo, ok := obs.(FrameObserver); ok {
			t.skipped = func(reason string) { fo.UpstreamFrameSkipped(u.Name, reason) }
		}
		return t, nil
	}
}

type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.headers {
		r.Header.Set(k, v)
	}
	return t.base.RoundTrip(r)
}

// upstream is the gateway's connection to one upstream server.
type upstream struct {
	g   *Gateway
	cfg Upstream

	mu sync.Mutex
	cs *mcp.ClientSession
	// fc is cs's connection when the gateway frames it itself and the
	// session's protocol lets the gateway write calls of its own to it
	// (fast.go); nil otherwise.
	fc    *frameConn
	send  mcp.MethodHandler // the SDK client's sending handler
	ir    *mcp.InitializeResult
	down  error                 // why the upstream is unavailable; nil when connected
	tools map[string]*toolEntry // by upstream name
	// uris maps resource URIs the upstream listed to it.
	restarts int
	closed   bool
	// setPinned says the upstream's tool set was pinned (in the store,
	// by this process or an earlier one): a tool without a pin of its
	// own is new.
	setPinned bool

	// syncMu serializes listing the upstream's tools.
	syncMu sync.Mutex
}

// toolEntry is one upstream tool as the gateway offers it.
type toolEntry struct {
	up   *upstream
	name string // the upstream's
	// nameJSON is name as a JSON string, for the calls the gateway
	// writes to the upstream itself.
	nameJSON []byte
	exposed  string // the client's
	// shown is the definition clients see: the pinned (accepted) one, so a
	// changed description cannot reach the model before a person accepts
	// it, renamed to the exposed name.
	shown *mcp.Tool
	info  portcullis.UpstreamTool
}

var errUpstreamDown = errors.New("upstream unavailable")

func (u *upstream) client() (*mcp.ClientSession, error) {
	cs, _, err := u.framed()
	return cs, err
}

// framed is client, with the session's connection when the gateway may
// write calls of its own to it (nil otherwise).
func (u *upstream) framed() (*mcp.ClientSession, *frameConn, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.cs == nil {
		why := u.down
		if why == nil {
			why = errUpstreamDown
		}
		return nil, nil, fmt.Errorf("upstream %q is unavailable: %w", u.cfg.Name, why)
	}
	return u.cs, u.fc, nil
}

func (u *upstream) initResult() *mcp.InitializeResult {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.ir
}

func (u *upstream) prefix() string {
	if u.cfg.Prefix == nil {
		return ""
	}
	return *u.cfg.Prefix
}

// connectTimeout bounds connecting to an upstream and listing its tools.
const connectTimeout = 30 * time.Second

// connect starts (or reaches) the upstream, initializes a session and
// syncs its tools.
func (u *upstream) connect(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	t, err := u.cfg.transport(ctx, u.g.log, u.g.cfg.Observer)
	if err != nil {
		u.setDown(err)
		return err
	}
	cs, err := u.newClient().Connect(ctx, t, nil)
	if err != nil {
		u.setDown(err)
		return fmt.Errorf("connect to upstream %q: %w", u.cfg.Name, err)
	}
	u.mu.Lock()
	if u.closed {
		u.mu.Unlock()
		cs.Close()
		return errors.New("gateway closed")
	}
	u.cs, u.ir, u.down, u.fc = cs, cs.InitializeResult(), nil, nil
	if f, ok := t.(interface{ frames() *frameConn }); ok && rawCapable(u.ir) {
		u.fc = f.frames()
	}
	u.mu.Unlock()
	if err := u.syncTools(ctx); err != nil {
		u.g.log.Warn("list upstream tools", "upstream", u.cfg.Name, "err", err)
	}
	u.g.log.Info("upstream connected", "upstream", u.cfg.Name)
	return nil
}

func (u *upstream) setDown(err error) {
	u.mu.Lock()
	u.down = err
	u.mu.Unlock()
}

func (u *upstream) close() error {
	u.mu.Lock()
	u.closed = true
	cs := u.cs
	u.cs, u.fc = nil, nil
	u.mu.Unlock()
	if cs != nil {
		return cs.Close()
	}
	return nil
}

// supervise restarts the upstream whenever its session ends, with
// exponential backoff (0.5 s doubling to 30 s, reset after a minute of
// health). While it is down its tools' calls get error results.
func (u *upstream) supervise(ctx context.Context) {
	backoff := 500 * time.Millisecond
	for {
		u.mu.Lock()
		cs := u.cs
		u.mu.Unlock()
		if cs != nil {
			start := time.Now()
			err := cs.Wait()
			if ctx.Err() != nil {
				return
			}
			u.mu.Lock()
			if u.cs == cs {
				u.cs, u.fc = nil, nil
				u.down = fmt.Errorf("its session ended: %v", orEOF(err))
				u.restarts++
			}
			u.mu.Unlock()
			u.g.log.Warn("upstream stopped; restarting", "upstream", u.cfg.Name, "err", err)
			u.g.cfg.Observer.UpstreamRestart(u.cfg.Name, err)
			if time.Since(start) > time.Minute {
				backoff = 500 * time.Millisecond
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		if err := u.connect(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			u.g.log.Warn("upstream restart failed", "upstream", u.cfg.Name, "err", err, "retryIn", backoff)
			backoff = min(backoff*2, 30*time.Second)
		}
	}
}

func orEOF(err error) error {
	if err == nil {
		return errors.New("connection closed")
	}
	return err
}

// newClient builds the SDK client the gateway is to this upstream. Its
// handlers pass the upstream's notifications and requests on to the
// gateway's clients.
func (u *upstream) newClient() *mcp.Client {
	g := u.g
	c := mcp.NewClient(&mcp.Implementation{Name: "portcullis", Version: g.cfg.Version}, &mcp.ClientOptions{
		Logger: g.log,
		Capabilities: &mcp.ClientCapabilities{
			RootsV2:     &mcp.RootCapabilities{ListChanged: true},
			Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}},
		},
		ToolListChangedHandler: func(ctx context.Context, _ *mcp.ToolListChangedRequest) {
			g.wg.Go(func() {
				ctx, cancel := context.WithTimeout(g.ctx, connectTimeout)
				defer cancel()
				if err := u.syncTools(ctx); err != nil {
					g.log.Warn("re-list upstream tools", "upstream", u.cfg.Name, "err", err)
				}
			})
		},
		PromptListChangedHandler: func(ctx context.Context, _ *mcp.PromptListChangedRequest) {
			g.broadcast(ctx, "notifications/prompts/list_changed", func(ss *mcp.ServerSession) mcp.Request {
				return &mcp.ServerRequest[*mcp.PromptListChangedParams]{Session: ss, Params: &mcp.PromptListChangedParams{}}
			}, nil)
		},
		ResourceListChangedHandler: func(ctx context.Context, _ *mcp.ResourceListChangedRequest) {
			g.broadcast(ctx, "notifications/resources/list_changed", func(ss *mcp.ServerSession) mcp.Request {
				return &mcp.ServerRequest[*mcp.ResourceListChangedParams]{Session: ss, Params: &mcp.ResourceListChangedParams{}}
			}, nil)
		},
		ResourceUpdatedHandler: func(ctx context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			if err := g.server.ResourceUpdated(ctx, req.Params); err != nil {
				g.log.Debug("forward resource update", "err", err)
			}
		},
		LoggingMessageHandler: func(ctx context.Context, req *mcp.LoggingMessageRequest) {
			g.broadcast(ctx, "notifications/message", func(ss *mcp.ServerSession) mcp.Request {
				return &mcp.ServerRequest[*mcp.LoggingMessageParams]{Session: ss, Params: req.Params}
			}, u)
		},
		ProgressNotificationHandler: func(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
			g.forwardProgress(ctx, req.Params)
		},
		// Requests to the client are decided and audited (upreq.go).
		CreateMessageHandler: func(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return g.upstreamSampling(ctx, u, req)
		},
		ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return g.upstreamElicit(ctx, u, req)
		},
		ElicitationCompleteHandler: func(ctx context.Context, req *mcp.ElicitationCompleteNotificationRequest) {
			if ss, err := g.ownerOf(u); err == nil {
				_ = ss.NotifyElicitationComplete(ctx, req.Params)
			}
		},
	})
	// The SDK's own sending handler, to tell the upstream that its
	// client's roots changed.
	c.AddSendingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		u.mu.Lock()
		u.send = next
		u.mu.Unlock()
		return next
	})
	// roots/list is answered by the SDK from the client's own roots; the
	// gateway decides it and answers from the configuration or its client
	// instead.
	c.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "roots/list" {
				return next(ctx, method, req)
			}
			return g.upstreamRoots(ctx, u)
		}
	})
	return c
}

// syncTools lists the upstream's tools, pins each on first sight, marks
// those whose definition differs from the pin (or that are new since the
// upstream's tool set was pinned), and tells clients when the list they
// see changed.
func (u *upstream) syncTools(ctx context.Context) error {
	u.syncMu.Lock()
	defer u.syncMu.Unlock()
	cs, err := u.client()
	if err != nil {
		return err
	}
	if ir := u.initResult(); ir == nil || ir.Capabilities == nil || ir.Capabilities.Tools == nil {
		u.g.install(u, map[string]*toolEntry{})
		return nil
	}
	setPinned, err := u.toolSetPinned(ctx)
	if err != nil {
		return err
	}
	fresh := map[string]*toolEntry{}
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return err
		}
		if t.Name == portcullis.ToolSetPin {
			u.g.log.Warn("upstream offers a tool whose name the gateway reserves; it is not served", "upstream", u.cfg.Name, "tool", t.Name)
			continue
		}
		e, err := u.entry(ctx, t, setPinned)
		if err != nil {
			return err
		}
		fresh[t.Name] = e
	}
	if !setPinned {
		now := u.g.cfg.Clock.Now()
		if err := u.g.cfg.Store.PutToolPin(ctx, portcullis.ToolPin{Upstream: u.cfg.Name, Tool: portcullis.ToolSetPin, Hash: portcullis.ToolSetHash,
			Definition: json.RawMessage(`{}`), FirstSeen: now, UpdatedAt: now}); err != nil {
			return fmt.Errorf("pin the tool set: %w", err)
		}
		u.mu.Lock()
		u.setPinned = true
		u.mu.Unlock()
	}
	u.g.install(u, fresh)
	return nil
}

// toolSetPinned says whether the upstream's tool set was pinned: its
// tool-set pin, or any pin of one of its tools (a store written before
// tool-set pins existed), is in the store.
func (u *upstream) toolSetPinned(ctx context.Context) (bool, error) {
	u.mu.Lock()
	done := u.setPinned
	u.mu.Unlock()
	if done {
		return true, nil
	}
	pins, err := u.g.cfg.Store.ToolPins(ctx)
	if err != nil {
		return false, fmt.Errorf("tool pins: %w", err)
	}
	for _, p := range pins {
		if p.Upstream == u.cfg.Name {
			u.mu.Lock()
			u.setPinned = true
			u.mu.Unlock()
			return true, nil
		}
	}
	return false, nil
}

// definition is the part of a tool a pin covers, as canonical JSON: its
// title, description, schemas and annotations.
func definition(t *mcp.Tool) (json.RawMessage, string, error) {
	def := struct {
		Title        string               `json:"title,omitempty"`
		Description  string               `json:"description,omitempty"`
		InputSchema  any                  `json:"inputSchema"`
		OutputSchema any                  `json:"outputSchema,omitempty"`
		Annotations  *mcp.ToolAnnotations `json:"annotations,omitempty"`
	}{t.Title, t.Description, t.InputSchema, t.OutputSchema, t.Annotations}
	b, err := json.Marshal(def)
	if err != nil {
		return nil, "", err
	}
	// Re-marshal through any so that map keys are sorted whatever order
	// the upstream sent them in.
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, "", err
	}
	if b, err = json.Marshal(v); err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(b)
	return b, hex.EncodeToString(sum[:]), nil
}

// entry pins a tool (or checks it against its pin) and builds what the
// gateway offers of it. A tool first seen after the upstream's tool set
// was pinned is pinned unaccepted: a stand-in definition, and its own
// waiting for a person.
func (u *upstream) entry(ctx context.Context, t *mcp.Tool, setPinned bool) (*toolEntry, error) {
	def, hash, err := definition(t)
	if err != nil {
		return nil, fmt.Errorf("tool %q: %w", t.Name, err)
	}
	st := u.g.cfg.Store
	pin, ok, err := st.ToolPin(ctx, u.cfg.Name, t.Name)
	if err != nil {
		return nil, fmt.Errorf("tool %q: pin: %w", t.Name, err)
	}
	now := u.g.cfg.Clock.Now()
	switch {
	case !ok && setPinned:
		standIn, err := u.standIn(t.Name)
		if err != nil {
			return nil, err
		}
		pin = portcullis.ToolPin{Upstream: u.cfg.Name, Tool: t.Name, Hash: portcullis.UnacceptedHash, Definition: standIn,
			PendingHash: hash, PendingDefinition: def, FirstSeen: now, UpdatedAt: now}
		if err := st.PutToolPin(ctx, pin); err != nil {
			return nil, fmt.Errorf("tool %q: pin: %w", t.Name, err)
		}
		u.g.log.Warn("new tool offered after the upstream's tools were pinned; calls are held until a person accepts it", "upstream", u.cfg.Name, "tool", t.Name)
		if n := u.g.cfg.Notifier; n != nil {
			_ = n.Notify(ctx, portcullis.Notice{
				Kind: portcullis.NoticeToolChange, Tool: u.cfg.Name + "/" + t.Name,
				Reason: fmt.Sprintf("Upstream %q offers a new tool %q, first seen after its tools were pinned; calls to it are held at CONFIRM_SINGLE_USE until a person accepts it (portcullis tools accept %s %s)", u.cfg.Name, t.Name, u.cfg.Name, t.Name),
			})
		}
	case !ok:
		pin = portcullis.ToolPin{Upstream: u.cfg.Name, Tool: t.Name, Hash: hash, Definition: def, FirstSeen: now, UpdatedAt: now}
		if err := st.PutToolPin(ctx, pin); err != nil {
			return nil, fmt.Errorf("tool %q: pin: %w", t.Name, err)
		}
	case pin.Hash == hash:
		if pin.PendingHash != "" {
			// The upstream went back to the accepted definition.
			pin.PendingHash, pin.PendingDefinition, pin.UpdatedAt = "", nil, now
			if err := st.PutToolPin(ctx, pin); err != nil {
				return nil, fmt.Errorf("tool %q: pin: %w", t.Name, err)
			}
		}
	case pin.PendingHash != hash:
		pin.PendingHash, pin.PendingDefinition, pin.UpdatedAt = hash, def, now
		if err := st.PutToolPin(ctx, pin); err != nil {
			return nil, fmt.Errorf("tool %q: pin: %w", t.Name, err)
		}
		u.g.log.Warn("tool definition changed; calls are held until a person accepts it", "upstream", u.cfg.Name, "tool", t.Name)
		if n := u.g.cfg.Notifier; n != nil {
			_ = n.Notify(ctx, portcullis.Notice{
				Kind: portcullis.NoticeToolChange, Tool: u.cfg.Name + "/" + t.Name,
				Reason: fmt.Sprintf("The definition of tool %q of upstream %q changed; calls to it are held at CONFIRM_SINGLE_USE until a person accepts the change (portcullis tools accept %s %s)", t.Name, u.cfg.Name, u.cfg.Name, t.Name),
			})
		}
	}
	return u.entryFromPin(t.Name, pin, t)
}

// standIn is the definition clients see of a new tool no person has
// accepted: no description, schema or annotations of the server's reach
// the model before a person has read them.
func (u *upstream) standIn(name string) (json.RawMessage, error) {
	b, err := json.Marshal(map[string]any{
		"description": fmt.Sprintf("A tool upstream %q first offered after its tools were pinned. No person has accepted it yet: every call is held for a person until one does.", u.cfg.Name),
		"inputSchema": map[string]any{"type": "object"},
	})
	if err != nil {
		return nil, fmt.Errorf("tool %q: stand-in definition: %w", name, err)
	}
	return b, nil
}

// entryFromPin builds a tool entry from its pin: the classification and
// the definition clients see come from the accepted definition.
func (u *upstream) entryFromPin(name string, pin portcullis.ToolPin, current *mcp.Tool) (*toolEntry, error) {
	var shown mcp.Tool
	if err := json.Unmarshal(pin.Definition, &shown); err != nil {
		return nil, fmt.Errorf("tool %q: pinned definition: %w", name, err)
	}
	if shown.InputSchema == nil {
		shown.InputSchema = map[string]any{"type": "object"}
	}
	exposed := u.prefix() + name
	shown.Name = exposed
	if current != nil && !pin.Unaccepted() {
		shown.Meta, shown.Icons = current.Meta, current.Icons
	}
	info := portcullis.UpstreamTool{Server: u.cfg.Name, Offered: true, Changed: pin.PendingHash != "", New: pin.Unaccepted(), Trusted: u.cfg.TrustAnnotations}
	if a := shown.Annotations; a != nil {
		info.Annotated = true
		info.ReadOnly = a.ReadOnlyHint
		info.Destructive = a.DestructiveHint != nil && *a.DestructiveHint
		info.OpenWorld = a.OpenWorldHint != nil && *a.OpenWorldHint
	}
	nameJSON, err := json.Marshal(name)
	if err != nil {
		return nil, err
	}
	return &toolEntry{up: u, name: name, nameJSON: nameJSON, exposed: exposed, shown: &shown, info: info}, nil
}

// install replaces an upstream's tools in the gateway's table and tells
// the clients when what they see changed.
func (g *Gateway) install(u *upstream, fresh map[string]*toolEntry) {
	g.mu.Lock()
	u.mu.Lock()
	u.tools = fresh
	u.mu.Unlock()
	before := g.tools
	g.tools = g.owners()
	changed := len(before) != len(g.tools)
	for name, e := range g.tools {
		if old, ok := before[name]; !ok || old.up != e.up || old.info != e.info || !sameShown(old.shown, e.shown) {
			changed = true
		}
	}
	g.mu.Unlock()
	if changed && g.server != nil {
		g.broadcast(g.ctx, "notifications/tools/list_changed", func(ss *mcp.ServerSession) mcp.Request {
			return &mcp.ServerRequest[*mcp.ToolListChangedParams]{Session: ss, Params: &mcp.ToolListChangedParams{}}
		}, nil)
	}
}

// owners builds the table of the tools the gateway serves, by exposed
// name. Which upstream serves a name is the configuration's decision,
// never the order in which upstreams connected: the first upstream in the
// configuration that offers the name owns it, and an upstream that is
// down keeps the tools it last offered (or, if it has not connected since
// the gateway started, those pinned for it), so a call never goes to
// another upstream while the owner is down. The others' tools of that
// name are never served. Called with g.mu held.
func (g *Gateway) owners() map[string]*toolEntry {
	out := map[string]*toolEntry{}
	for _, u := range g.ups {
		u.mu.Lock()
		for _, e := range u.tools {
			prev, clash := out[e.exposed]
			if !clash {
				out[e.exposed] = e
				continue
			}
			key := e.exposed + "\x00" + u.cfg.Name
			if !g.clashes[key] {
				g.clashes[key] = true
				g.log.Warn("two upstreams offer a tool of the same name; the one first in the configuration serves it, the other's is never served",
					"tool", e.exposed, "served by", prev.up.cfg.Name, "not served", u.cfg.Name)
			}
		}
		u.mu.Unlock()
	}
	return out
}

// knownTools fills the tables of upstreams that have not connected with
// the tools pinned for them, so that the names they offered stay theirs
// while they are down.
func (g *Gateway) knownTools(ctx context.Context) error {
	pins, err := g.cfg.Store.ToolPins(ctx)
	if err != nil {
		return fmt.Errorf("mcpgw: read tool pins: %w", err)
	}
	for _, u := range g.ups {
		known := map[string]*toolEntry{}
		for _, p := range pins {
			if p.Upstream != u.cfg.Name || p.IsToolSet() {
				continue
			}
			e, err := u.entryFromPin(p.Tool, p, nil)
			if err != nil {
				return fmt.Errorf("mcpgw: upstream %q: %w", u.cfg.Name, err)
			}
			known[p.Tool] = e
		}
		u.mu.Lock()
		u.tools = known
		u.mu.Unlock()
	}
	g.mu.Lock()
	g.tools = g.owners()
	g.mu.Unlock()
	return nil
}

func sameShown(a, b *mcp.Tool) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// watchPins follows pin changes made elsewhere (a person accepting a
// definition through the CLI or the console, another replica) and updates
// the tools they concern, from feed, the subscription New made before it
// read any pin (or err, why it failed). Whenever it has to
// subscribe again, it reloads every tool's pin: a change made while it was
// not subscribed is not lost.
func (g *Gateway) watchPins(feed <-chan portcullis.Change, err error) {
	for {
		if err != nil {
			if g.ctx.Err() != nil {
				return
			}
			g.log.Warn("watch pins", "err", err)
			select {
			case <-g.ctx.Done():
				return
			case <-time.After(2 * time.Second):
			}
		} else {
			for c := range feed {
				if c.Kind == portcullis.ChangePin || c.Kind == portcullis.ChangeResync {
					g.reloadPins(c)
				}
			}
			if g.ctx.Err() != nil {
				return
			}
		}
		if feed, err = g.cfg.Store.Watch(g.ctx); err == nil {
			g.reloadPins(portcullis.Change{Kind: portcullis.ChangeResync})
		}
	}
}

func (g *Gateway) reloadPins(c portcullis.Change) {
	ctx, cancel := context.WithTimeout(g.ctx, connectTimeout)
	defer cancel()
	for _, u := range g.ups {
		u.mu.Lock()
		entries := maps.Clone(u.tools)
		u.mu.Unlock()
		touched := false
		for name, e := range entries {
			if c.Kind == portcullis.ChangePin && c.ID != u.cfg.Name+"/"+name {
				continue
			}
			pin, ok, err := g.cfg.Store.ToolPin(ctx, u.cfg.Name, name)
			if err != nil || !ok {
				continue
			}
			ne, err := u.entryFromPin(name, pin, e.shown)
			if err != nil {
				continue
			}
			if !pin.Unaccepted() {
				ne.shown.Meta, ne.shown.Icons = e.shown.Meta, e.shown.Icons
			}
			entries[name] = ne
			touched = true
		}
		if touched {
			g.install(u, entries)
		}
	}
}

// rootsChanged tells the upstream that the roots its client offers
// changed, so it asks for them again: an upstream started before its
// client connected (the stdio wrapper starts it first) learns the
// client's roots this way.
func (u *upstream) rootsChanged(ctx context.Context) {
	u.mu.Lock()
	cs, send := u.cs, u.send
	u.mu.Unlock()
	if cs == nil || send == nil {
		return
	}
	req := &mcp.ClientRequest[*mcp.RootsListChangedParams]{Session: cs, Params: &mcp.RootsListChangedParams{}}
	if _, err := send(ctx, "notifications/roots/list_changed", req); err != nil {
		u.g.log.Debug("tell upstream its roots changed", "upstream", u.cfg.Name, "err", err)
	}
}
