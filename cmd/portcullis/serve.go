package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/httpapi"
	"github.com/portcullis/portcullis/httpapi/console"
	"github.com/portcullis/portcullis/internal/guard"
	"github.com/portcullis/portcullis/mcpgw"
	"github.com/portcullis/portcullis/metrics"
	"github.com/portcullis/portcullis/notify"
)

// serveConfig is the file `portcullis serve --config` reads. Relative paths
// are relative to the file. See docs/INTEGRATIONS.md.
type serveConfig struct {
	Policy string `yaml:"policy"`
	State  string `yaml:"state"`
	// Store is a store URL (sqlite:///path or postgres://...); several
	// gateways on one PostgreSQL share grants, approvals and blocks.
	Store  string `yaml:"store"`
	Listen string `yaml:"listen"`
	// PublicURL is how people reach this gateway (links in notifications).
	PublicURL string           `yaml:"publicURL"`
	Agents    []agentConfig    `yaml:"agents"`
	Upstreams []upstreamConfig `yaml:"upstreams"`
	// ShowDenied lists tools the policy denies in tools/list too.
	ShowDenied bool         `yaml:"showDenied"`
	Notify     notifyConfig `yaml:"notify"`
	// HTTP bounds how long a client may hold one of the gateway's
	// connections.
	HTTP httpConfig `yaml:"http"`
	// Audit anchors the audit chain outside the host (witnesses).
	Audit auditConfig `yaml:"audit"`

	// created lists the agent token files made at this start.
	created []string
	// rel resolves a path relative to the file.
	rel func(string) string
}

type agentConfig struct {
	Name string `yaml:"name"`
	// One of: a file holding the token, an environment variable holding
	// it, or the token's SHA-256 in hex (so the file holds no secret).
	TokenFile   string `yaml:"tokenFile"`
	TokenEnv    string `yaml:"tokenEnv"`
	TokenSHA256 string `yaml:"tokenSHA256"`
	// Autonomous makes the agent's sessions autonomous runs.
	Autonomous  bool `yaml:"autonomous"`
	UserPresent bool `yaml:"userPresent"`
}

type upstreamConfig struct {
	Name    string            `yaml:"name"`
	Command []string          `yaml:"command"`
	Env     map[string]string `yaml:"env"`
	Dir     string            `yaml:"dir"`
	URL     string            `yaml:"url"`
	Headers map[string]string `yaml:"headers"`
	// Prefix overrides the tool-name prefix (default: "<name>__" with
	// several upstreams, none with one; "" for none when tool names
	// cannot clash). When two upstreams offer the same name, the first
	// in this list serves it; the other's tool is never served.
	Prefix *string `yaml:"prefix"`
	// Roots answer the upstream's roots/list: directories (relative to
	// this file) or file:// URIs. Without them the gateway asks the client
	// session whose call the upstream serves.
	Roots []string `yaml:"roots"`
	// TrustAnnotations lets the upstream's MCP tool annotations classify
	// the tools the policy does not name (readOnlyHint → READ,
	// destructiveHint → DELETE, otherwise UPDATE). By default they are
	// the server's own claims and only make a tool stricter.
	TrustAnnotations bool `yaml:"trustAnnotations"`
}

// httpConfig bounds how long a client may hold a connection: to send a
// request's headers, to send its body, and to keep an idle connection
// open between requests. Zero takes the default.
type httpConfig struct {
	ReadHeaderTimeout time.Duration `yaml:"readHeaderTimeout"` // default 10s
	BodyTimeout       time.Duration `yaml:"bodyTimeout"`       // default 10s
	IdleTimeout       time.Duration `yaml:"idleTimeout"`       // default 30s
}

// The defaults of httpConfig.
const (
	defaultReadHeaderTimeout = 10 * time.Second
	defaultBodyTimeout       = 10 * time.Second
	defaultIdleTimeout       = 30 * time.Second
)

type notifyConfig struct {
	Desktop bool `yaml:"desktop"`
	Webhook struct {
		URL    string `yaml:"url"`
		Format string `yaml:"format"`
		Human  bool   `yaml:"human"`
	} `yaml:"webhook"`
}

// loadServeConfig reads and checks a serve configuration strictly: unknown
// keys are errors.
func loadServeConfig(path string) (*serveConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var c serveConfig
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	base := filepath.Dir(path)
	rel := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(base, p)
	}
	rawPolicy := c.Policy
	c.Policy, c.State = rel(c.Policy), rel(c.State)
	if _, err := c.Audit.witnesses(rel, io.Discard); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	c.rel = rel
	if c.Policy == "" {
		return nil, fmt.Errorf("%s: policy: the policy file must be named", path)
	}
	if err := checkPolicyFile(path, rawPolicy, c.Policy); err != nil {
		return nil, err
	}
	if c.Listen == "" {
		c.Listen = "127.0.0.1:8470"
	}
	if len(c.Upstreams) == 0 {
		return nil, fmt.Errorf("%s: upstreams: at least one upstream MCP server is needed", path)
	}
	for _, t := range []struct {
		key string
		d   *time.Duration
		def time.Duration
	}{
		{"http.readHeaderTimeout", &c.HTTP.ReadHeaderTimeout, defaultReadHeaderTimeout},
		{"http.bodyTimeout", &c.HTTP.BodyTimeout, defaultBodyTimeout},
		{"http.idleTimeout", &c.HTTP.IdleTimeout, defaultIdleTimeout},
	} {
		switch {
		case *t.d < 0:
			return nil, fmt.Errorf("%s: %s: want a positive duration such as 10s, got %s", path, t.key, *t.d)
		case *t.d == 0:
			*t.d = t.def
		}
	}
	seen := map[string]bool{}
	for i, u := range c.Upstreams {
		switch {
		case u.Name == "":
			return nil, fmt.Errorf("%s: upstreams[%d]: name is required", path, i)
		case seen[u.Name]:
			return nil, fmt.Errorf("%s: upstreams[%d]: name %q is used twice", path, i, u.Name)
		case (len(u.Command) > 0) == (u.URL != ""):
			return nil, fmt.Errorf("%s: upstreams[%d] (%s): give exactly one of command and url", path, i, u.Name)
		}
		seen[u.Name] = true
		c.Upstreams[i].Dir = rel(u.Dir)
		for j, r := range u.Roots {
			uri, err := rootURI(r, rel)
			if err != nil {
				return nil, fmt.Errorf("%s: upstreams[%d] (%s): roots[%d]: %v", path, i, u.Name, j, err)
			}
			c.Upstreams[i].Roots[j] = uri
		}
	}
	if len(c.Agents) == 0 {
		return nil, fmt.Errorf("%s: agents: at least one agent with a token is needed: the MCP endpoint admits no one without one", path)
	}
	names := map[string]bool{}
	for i, a := range c.Agents {
		n := 0
		for _, s := range []string{a.TokenFile, a.TokenEnv, a.TokenSHA256} {
			if s != "" {
				n++
			}
		}
		switch {
		case a.Name == "":
			return nil, fmt.Errorf("%s: agents[%d]: name is required", path, i)
		case names[a.Name]:
			return nil, fmt.Errorf("%s: agents[%d]: name %q is used twice", path, i, a.Name)
		case n != 1:
			return nil, fmt.Errorf("%s: agents[%d] (%s): give exactly one of tokenFile, tokenEnv and tokenSHA256", path, i, a.Name)
		}
		names[a.Name] = true
		c.Agents[i].TokenFile = rel(a.TokenFile)
	}
	return &c, nil
}

// agentTokens maps the SHA-256 of each agent's token to the agent.
func (c *serveConfig) agentTokens() (map[string]agentConfig, error) {
	out := map[string]agentConfig{}
	for _, a := range c.Agents {
		var sum string
		switch {
		case a.TokenSHA256 != "":
			b, err := hex.DecodeString(a.TokenSHA256)
			if err != nil || len(b) != sha256.Size {
				return nil, fmt.Errorf("agent %q: tokenSHA256 is not a SHA-256 in hex", a.Name)
			}
			sum = strings.ToLower(a.TokenSHA256)
		case a.TokenFile != "":
			b, err := os.ReadFile(a.TokenFile)
			if errors.Is(err, os.ErrNotExist) {
				// First start: make the agent a token, readable by its
				// owner only.
				var raw [24]byte
				if _, err := rand.Read(raw[:]); err != nil {
					return nil, err
				}
				b = []byte(hex.EncodeToString(raw[:]))
				f, err := os.OpenFile(a.TokenFile, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
				if err != nil {
					return nil, fmt.Errorf("agent %q: create token file: %w", a.Name, err)
				}
				_, werr := f.Write(append(b, '\n'))
				if cerr := f.Close(); werr == nil {
					werr = cerr
				}
				if werr != nil {
					return nil, fmt.Errorf("agent %q: write token file: %w", a.Name, werr)
				}
				c.created = append(c.created, a.Name+": "+a.TokenFile)
			} else if err != nil {
				return nil, fmt.Errorf("agent %q: %w", a.Name, err)
			}
			tok := strings.TrimSpace(string(b))
			if tok == "" {
				return nil, fmt.Errorf("agent %q: token file %s is empty", a.Name, a.TokenFile)
			}
			sum = tokenHash(tok)
		default:
			v := strings.TrimSpace(os.Getenv(a.TokenEnv))
			if v == "" {
				return nil, fmt.Errorf("agent %q: $%s is empty", a.Name, a.TokenEnv)
			}
			sum = tokenHash(v)
		}
		if prev, dup := out[sum]; dup {
			return nil, fmt.Errorf("agents %q and %q have the same token", prev.Name, a.Name)
		}
		out[sum] = a
	}
	return out, nil
}

func tokenHash(tok string) string {
	s := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(s[:])
}

// runServe runs the HTTP gateway: the MCP endpoint on /mcp in front of the
// configured upstreams, for agents with tokens.
func runServe(ctx context.Context, o *serveOptions, pos []string, stdout, stderr io.Writer) error {
	of := &o.obs
	if len(pos) > 0 {
		return usageError("serve takes no arguments; unexpected %q", pos[0])
	}
	cfg, err := loadServeConfig(o.config)
	if errors.Is(err, os.ErrNotExist) {
		return configMissing(o.config, o.configGiven)
	}
	if err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	if o.listen != "" {
		cfg.Listen = o.listen
	}
	if err := checkListen(cfg.Listen); err != nil {
		return err
	}
	if err := checkUpstreamCommands(o.config, cfg.Upstreams); err != nil {
		return err
	}
	log, err := of.logger(stderr)
	if err != nil {
		return err
	}
	tuneGC()
	tokens, err := cfg.agentTokens()
	if err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	sf := stateFlags{state: cfg.State, store: cfg.Store}
	st, err := sf.open(ctx, log)
	if err != nil {
		return err
	}
	defer st.Close()
	dir, err := sf.dir(true)
	if err != nil {
		return err
	}
	m := metrics.New(metrics.Options{State: st})
	obs := &observability{metrics: m, log: log}
	flushTraces, err := obs.startTracing(ctx)
	if err != nil {
		return err
	}
	defer flushTraces()
	st = obs.store(st)

	// Human channels: the gateway's own terminal always (it shows the
	// codes of blocks, and nothing an agent reads is written there), plus
	// what the configuration asks for.
	nf := notifyFlags{desktop: cfg.Notify.Desktop, webhook: cfg.Notify.Webhook.URL, webhookFormat: orDefault(cfg.Notify.Webhook.Format, notify.FormatJSON), webhookHuman: cfg.Notify.Webhook.Human}
	extra, cleanup, err := nf.notifier(log)
	if err != nil {
		return err
	}
	defer cleanup()
	// The console is a human channel too: it shows block codes to the
	// person who logs in.
	notices := console.NewNotices(nil)
	human := notify.Multi{notify.NewWriter(stdout), notices}
	if extra != nil {
		human = append(human, extra)
	}
	// Every notice links to the console page where a person acts on it.
	// base is set once the listener is open, before anything is decided.
	var base string
	linked := notify.Linked{Next: human, Link: func(n portcullis.Notice) string {
		switch n.Kind {
		case portcullis.NoticeApproval:
			if n.ChallengeID != "" {
				return base + console.ApprovalPath(n.ChallengeID)
			}
		case portcullis.NoticeBlock:
			return base + "/blocks"
		case portcullis.NoticeToolChange:
			return base + "/tools"
		case portcullis.NoticePendingLimit:
			return base + "/approvals?agent=" + url.QueryEscape(n.Agent)
		}
		return base + "/"
	}}
	g, pol, err := loadAgentGate(cfg.Policy, stderr, append(obs.gateOptions(), gate.WithStore(st), gate.WithLogger(log), gate.WithProtectedPaths(dir, o.config), gate.WithNotifier(linked))...)
	if err != nil {
		return err
	}
	watcher := newPolicyWatcher(cfg.Policy, g, st, log, m)
	wctx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	go watcher.Run(wctx)
	metricsToken, err := secretFile(dir, "metrics.token")
	if err != nil {
		return fmt.Errorf("metrics token: %w", err)
	}
	// The people's token: the console's login token and the approvals
	// API's bearer token, 0600 in the state directory.
	humanToken, err := secretFile(dir, "admin.token")
	if err != nil {
		return fmt.Errorf("human token: %w", err)
	}

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return listenError(cfg.Listen, err)
	}
	base = cfg.PublicURL
	if base == "" {
		base = "http://" + ln.Addr().String()
	}
	ups := make([]mcpgw.Upstream, 0, len(cfg.Upstreams))
	for _, u := range cfg.Upstreams {
		var env []string
		for k, v := range u.Env {
			env = append(env, k+"="+os.ExpandEnv(v))
		}
		headers := map[string]string{}
		for k, v := range u.Headers {
			headers[k] = os.ExpandEnv(v)
		}
		ups = append(ups, mcpgw.Upstream{Name: u.Name, Prefix: u.Prefix, Command: u.Command, Env: env, Dir: u.Dir, URL: u.URL, Headers: headers, Roots: u.Roots, TrustAnnotations: u.TrustAnnotations})
	}
	gw, err := mcpgw.New(ctx, mcpgw.Config{
		Gate: g, Store: st, Upstreams: ups,
		Name: "portcullis", Version: moduleVersion(),
		Wait:        pol.Approvals.Wait,
		ShowDenied:  cfg.ShowDenied,
		Notifier:    linked,
		Logger:      log,
		ApprovalURL: func(id string) string { return base + console.ApprovalPath(id) },
		Observer:    obs.gatewayObserver(),
	})
	if err != nil {
		ln.Close()
		return err
	}
	defer gw.Close()
	agentOf := func(tok string) (string, bool) {
		a, ok := tokens[tokenHash(tok)]
		return a.Name, ok
	}
	var hosts, origins []string
	if u, err := url.Parse(base); err == nil && u.Host != "" && cfg.PublicURL != "" {
		// A public name replaces the loopback default; a gateway that
		// listens on loopback keeps answering there too (the CLI on the
		// same machine). Pages of the public URL are the gateway's own
		// origin even behind a TLS-terminating proxy.
		hosts = append(hosts, u.Host)
		if isLoopback(ln.Addr()) {
			hosts = append(hosts, guard.LoopbackHosts()...)
		}
		origins = append(origins, u.Scheme+"://"+u.Host)
	}
	// One guard for the API, the console and the MCP endpoint: the same
	// Host and Origin rules, and one count of wrong credentials per
	// client whichever entry they are tried on.
	gd, err := guard.New(guard.Options{Hosts: hosts, Origins: origins, Failures: guard.FailureOptions{
		Report: func(f guard.Failure) { m.AuthFailure(f.Entry, f.Limited) },
	}})
	if err != nil {
		ln.Close()
		return &exitError{code: 2, msg: fmt.Sprintf("%s: publicURL: %v", o.config, err)}
	}
	mcpHandler, err := gw.Handler(mcpgw.HTTPOptions{
		AgentOf: agentOf,
		Guard:   gd,
		// Listening on a public address with no publicURL, the MCP
		// endpoint answers any Host name, as before the guard.
		AllowRemoteHosts: !isLoopback(ln.Addr()) && cfg.PublicURL == "",
	})
	if err != nil {
		ln.Close()
		return err
	}
	api, err := httpapi.New(httpapi.Options{
		Gate: g, Store: st, AgentToken: agentOf, HumanToken: humanToken, Guard: gd, Logger: log,
		Ready: func(ctx context.Context) error {
			_, err := st.Blocks(ctx)
			return err
		},
	})
	if err != nil {
		ln.Close()
		return err
	}
	con, err := console.New(console.Options{
		Gate: g, Store: st, LoginToken: humanToken, Guard: gd, BaseURL: base, Notices: notices, Logger: log,
		PolicyLoadedAt: watcher.LoadedAt, PolicyProblem: watcher.Problem,
	})
	if err != nil {
		ln.Close()
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcpHandler)
	mux.Handle("/mcp/", mcpHandler)
	for _, p := range httpapi.MountPoints() {
		mux.Handle(p, api)
	}
	mux.Handle("/metrics", metricsHandler(m, metricsToken))
	mux.Handle("/", con)
	// No client holds a connection for free: headers and bodies have
	// deadlines, idle connections are closed, and every refusal closes
	// its connection (the handlers mark it). Answers have no deadline: a
	// call held for a person, a long poll and the console's live stream
	// last as long as they need.
	srv := &http.Server{
		Handler:           guard.BodyDeadline(mux, cfg.HTTP.BodyTimeout),
		ReadHeaderTimeout: cfg.HTTP.ReadHeaderTimeout,
		IdleTimeout:       cfg.HTTP.IdleTimeout,
	}
	srv.RegisterOnShutdown(func() { con.Close() }) // end the console's live streams
	ws, err := cfg.Audit.witnesses(cfg.rel, stderr)
	if err != nil {
		ln.Close()
		return &exitError{code: 2, msg: err.Error()}
	}
	stopWitnesses, err := startWitnesses(ctx, st, dir, ws, cfg.Audit.WitnessInterval, log, m)
	if err != nil {
		ln.Close()
		return err
	}
	defer stopWitnesses()
	for _, c := range cfg.created {
		fmt.Fprintf(stdout, "portcullis: created the token of agent %s (0600); clients send it as Authorization: Bearer <token>\n", c)
	}
	fmt.Fprintf(stdout, "portcullis: serving MCP on %s/mcp (%s, %s); state in %s\n", base, plural(len(ups), "upstream"), plural(len(tokens), "agent"), dir)
	fmt.Fprintf(stdout, "portcullis: console on %s/ (log in with the token in %s)\n", base, filepath.Join(dir, "admin.token"))
	fmt.Fprintf(stdout, "portcullis: metrics on %s/metrics (bearer token in %s)\n", base, filepath.Join(dir, "metrics.token"))
	for _, t := range gw.Tools() {
		if t.Changed {
			fmt.Fprintf(stdout, "portcullis: tool %s of upstream %s changed since it was pinned; calls are held until `portcullis tools accept %s %s`\n", t.Tool, t.Upstream, t.Upstream, t.Tool)
		}
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(shut)
	stopWitnesses() // the last head, once no more calls are decided
	return nil
}

func isLoopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

var _ portcullis.Notifier = notify.Multi{}

// rootURI makes a configured root a file:// URI: a URI is kept, a
// directory (made absolute by rel) is converted.
func rootURI(r string, rel func(string) string) (string, error) {
	switch {
	case r == "":
		return "", errors.New("empty root")
	case strings.HasPrefix(r, "file://"):
		return r, nil
	case strings.Contains(r, "://"):
		return "", fmt.Errorf("root %q is not a file:// URI", r)
	}
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(rel(r))}
	return u.String(), nil
}
