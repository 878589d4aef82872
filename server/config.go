package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/portcullis/portcullis/mcpgw"
)

// Config is the file `portcullis serve --config` reads. Relative paths
// are relative to the file; LoadConfig resolves them. See
// docs/INTEGRATIONS.md.
type Config struct {
	Policy string `yaml:"policy"`
	State  string `yaml:"state"`
	// Store is a store URL (sqlite:///path or postgres://...); several
	// gateways on one PostgreSQL share grants, approvals and blocks.
	Store  string `yaml:"store"`
	Listen string `yaml:"listen"`
	// PublicURL is how people reach this gateway (links in notifications).
	PublicURL string     `yaml:"publicURL"`
	Agents    []Agent    `yaml:"agents"`
	Upstreams []Upstream `yaml:"upstreams"`
	// ShowDenied lists tools the policy denies in tools/list too.
	ShowDenied bool   `yaml:"showDenied"`
	Notify     Notify `yaml:"notify"`
	// HTTP bounds how long a client may hold one of the gateway's
	// connections.
	HTTP HTTP `yaml:"http"`
	// Audit anchors the audit chain outside the host (witnesses).
	Audit Audit `yaml:"audit"`

	// path is the file the configuration was read from.
	path string
}

// Agent is an agent admitted to the MCP endpoint and the decision API.
type Agent struct {
	Name string `yaml:"name"`
	// One of: a file holding the token, an environment variable holding
	// it, or the token's SHA-256 in hex (so the file holds no secret).
	// A token file that does not exist is created at start (0600).
	TokenFile   string `yaml:"tokenFile"`
	TokenEnv    string `yaml:"tokenEnv"`
	TokenSHA256 string `yaml:"tokenSHA256"`
	// Autonomous makes the agent's sessions autonomous runs.
	Autonomous  bool `yaml:"autonomous"`
	UserPresent bool `yaml:"userPresent"`
}

// Upstream is an MCP server behind the gateway.
type Upstream struct {
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

// HTTP bounds how long a client may hold a connection: to send a
// request's headers, to send its body, and to keep an idle connection
// open between requests. Zero takes the default.
type HTTP struct {
	ReadHeaderTimeout time.Duration `yaml:"readHeaderTimeout"` // default 10s
	BodyTimeout       time.Duration `yaml:"bodyTimeout"`       // default 10s
	IdleTimeout       time.Duration `yaml:"idleTimeout"`       // default 30s
}

// The defaults of HTTP, and of Config.Listen.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultBodyTimeout       = 10 * time.Second
	DefaultIdleTimeout       = 30 * time.Second
	DefaultListen            = "127.0.0.1:8470"
)

// Notify names the human channels besides the gateway's terminal and
// console.
type Notify struct {
	Desktop bool `yaml:"desktop"`
	Webhook struct {
		URL    string `yaml:"url"`
		Format string `yaml:"format"`
		Human  bool   `yaml:"human"`
	} `yaml:"webhook"`
}

// Audit is the `audit` block: where the chain's head is anchored outside
// the host.
type Audit struct {
	// Witnesses receive the chain's head at every WitnessInterval and on
	// shutdown.
	Witnesses []Witness `yaml:"witnesses"`
	// WitnessInterval is how often the head is published (default 1m).
	WitnessInterval time.Duration `yaml:"witnessInterval"`
}

// Witness is one witness: exactly one of URL, File and Stderr.
type Witness struct {
	// URL is an HTTP witness: heads are POSTed to it as JSON
	// (docs/OPERATIONS.md; `portcullis witness serve` is one).
	URL string `yaml:"url"`
	// TokenFile or TokenEnv holds the HTTP witness's bearer token.
	TokenFile string `yaml:"tokenFile"`
	TokenEnv  string `yaml:"tokenEnv"`
	// File is appended one head a line (put it on another mount).
	File string `yaml:"file"`
	// Stderr writes each head as a line to standard error, for a
	// supervisor that ships its logs off the host.
	Stderr bool `yaml:"stderr"`
}

// LoadConfig reads and checks a gateway configuration strictly: unknown
// keys are errors, and so is anything the gateway could not start with
// (a missing policy file, no agent, an upstream command that cannot
// start). Relative paths are resolved against the file's directory. A
// missing file is an error that wraps fs.ErrNotExist.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	c := Config{path: path}
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := c.resolve(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &c, nil
}

// Path is the file the configuration was read from.
func (c *Config) Path() string { return c.path }

// rel resolves a path relative to the configuration file.
func (c *Config) rel(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(filepath.Dir(c.path), p)
}

// resolve checks the configuration, fills in defaults and makes its paths
// absolute. Errors name the key; the caller names the file.
func (c *Config) resolve() error {
	rawPolicy := c.Policy
	c.Policy, c.State = c.rel(c.Policy), c.rel(c.State)
	if _, err := c.Audit.witnesses(c.rel, io.Discard); err != nil {
		return err
	}
	if c.Policy == "" {
		return errors.New("policy: the policy file must be named")
	}
	if err := checkPolicyFile(rawPolicy, c.Policy); err != nil {
		return err
	}
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if len(c.Upstreams) == 0 {
		return errors.New("upstreams: at least one upstream MCP server is needed")
	}
	for _, t := range []struct {
		key string
		d   *time.Duration
		def time.Duration
	}{
		{"http.readHeaderTimeout", &c.HTTP.ReadHeaderTimeout, DefaultReadHeaderTimeout},
		{"http.bodyTimeout", &c.HTTP.BodyTimeout, DefaultBodyTimeout},
		{"http.idleTimeout", &c.HTTP.IdleTimeout, DefaultIdleTimeout},
	} {
		switch {
		case *t.d < 0:
			return fmt.Errorf("%s: want a positive duration such as 10s, got %s", t.key, *t.d)
		case *t.d == 0:
			*t.d = t.def
		}
	}
	for i, u := range c.Upstreams {
		c.Upstreams[i].Dir = c.rel(u.Dir)
		for j, r := range u.Roots {
			uri, err := rootURI(r, c.rel)
			if err != nil {
				return fmt.Errorf("upstreams[%d] (%s): roots[%d]: %v", i, u.Name, j, err)
			}
			c.Upstreams[i].Roots[j] = uri
		}
	}
	// One check of the upstream list: the gateway's own.
	if err := mcpgw.CheckUpstreams(c.gatewayUpstreams()); err != nil {
		return err
	}
	for i, u := range c.Upstreams {
		if len(u.Command) == 0 {
			continue
		}
		// An upstream that cannot start would never come up, however
		// often it were retried: refuse it now. One that starts and then
		// fails, and a URL that does not answer yet, are retried in the
		// background instead.
		if err := CommandStarts(u.Command[0], c.Upstreams[i].Dir); err != nil {
			return fmt.Errorf("upstreams[%d] (%s): %v", i, u.Name, err)
		}
	}
	if len(c.Agents) == 0 {
		return errors.New("agents: at least one agent with a token is needed: the MCP endpoint admits no one without one")
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
			return fmt.Errorf("agents[%d]: name is required", i)
		case names[a.Name]:
			return fmt.Errorf("agents[%d]: name %q is used twice", i, a.Name)
		case n != 1:
			return fmt.Errorf("agents[%d] (%s): give exactly one of tokenFile, tokenEnv and tokenSHA256", i, a.Name)
		}
		names[a.Name] = true
		c.Agents[i].TokenFile = c.rel(a.TokenFile)
	}
	return nil
}

// gatewayUpstreams are the configured upstreams as the MCP gateway takes
// them, with $VARIABLES in env values and headers expanded.
func (c *Config) gatewayUpstreams() []mcpgw.Upstream {
	ups := make([]mcpgw.Upstream, 0, len(c.Upstreams))
	for _, u := range c.Upstreams {
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
	return ups
}

// checkPolicyFile says, for a policy: key whose file is missing, where
// the relative path led.
func checkPolicyFile(raw, resolved string) error {
	_, err := os.Stat(resolved)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return nil // other faults are the policy loader's to report
	}
	if filepath.IsAbs(raw) {
		return fmt.Errorf("policy: the policy file %s does not exist", resolved)
	}
	return fmt.Errorf("policy: the policy file %s does not exist (%q is relative to the directory of the configuration)", resolved, raw)
}

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

// CommandStarts says why a command run from dir cannot start, if it
// cannot: not found in $PATH, or a path that is missing or not executable.
func CommandStarts(command, dir string) error {
	name := command
	hint := "it is looked up in $PATH: install it, or give its full path"
	if strings.ContainsRune(name, '/') || strings.ContainsRune(name, filepath.Separator) {
		// A path is found from the dir it runs in.
		hint = "a relative path is relative to the upstream's dir, else to where serve runs"
		if dir == "" {
			hint = "a relative path is relative to the current directory"
		}
		if !filepath.IsAbs(name) && dir != "" {
			name = filepath.Join(dir, name)
		}
	}
	if _, err := exec.LookPath(name); err != nil {
		return fmt.Errorf("the command %q cannot start: %v (%s)", command, unwrapExec(err), hint)
	}
	return nil
}

// unwrapExec drops exec's "exec: "name": " prefix, the message names it.
func unwrapExec(err error) error {
	if ee, ok := err.(*exec.Error); ok {
		return ee.Err
	}
	return err
}
