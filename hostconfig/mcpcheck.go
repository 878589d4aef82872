package hostconfig

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCPEntry is one MCP server as a client's configuration defines it.
type MCPEntry struct {
	Name    string            // the server's name in the configuration
	Scope   string            // where in the file, when a file has several scopes ("" otherwise)
	Type    string            // the transport: "" or "stdio" for a command; "http", "sse", ...
	Command string            // the program the client starts
	Args    []string          // its arguments
	Env     map[string]string // variables the client adds to its own environment
	Cwd     string            // the working directory, when the entry names one
	URL     string            // a remote server's address
}

// remote reports whether the client reaches the server over the network
// rather than starting it: nothing a stdio wrapper can front.
func (s MCPEntry) remote() bool {
	return s.Command == "" || (s.Type != "" && s.Type != "stdio")
}

// MCPProbe starts an MCP server as its client would — s's command and
// arguments, this process's environment with s.Env on top, in s.Cwd or
// else dir — does the MCP handshake (initialize, then tools/list) and
// returns the names of the tools it lists. stderr is what the process
// wrote there, for the reason when it fails.
type MCPProbe func(ctx context.Context, s MCPEntry, dir string) (tools []string, stderr string, err error)

// MCPProbeTimeout bounds one probe of an MCP server: its start, the
// handshake and the listing.
const MCPProbeTimeout = 30 * time.Second

// ProbeMCPServer is the MCPProbe of doctor: it runs the server over stdio
// with the official MCP SDK's client, for at most MCPProbeTimeout, and
// stops it before returning.
func ProbeMCPServer(ctx context.Context, s MCPEntry, dir string) ([]string, string, error) {
	ctx, cancel := context.WithTimeout(ctx, MCPProbeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.Command, s.Args...)
	cmd.Dir = dir
	if s.Cwd != "" {
		cmd.Dir = s.Cwd
	}
	cmd.Env = os.Environ()
	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		cmd.Env = append(cmd.Env, k+"="+s.Env[k])
	}
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "portcullis-doctor", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, nil)
	if err != nil {
		return nil, stderr.String(), fmt.Errorf("the MCP handshake failed: %w", err)
	}
	defer cs.Close()
	var tools []string
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, stderr.String(), fmt.Errorf("tools/list failed: %w", err)
		}
		tools = append(tools, t.Name)
	}
	return tools, stderr.String(), nil
}

// checkMCPFile reports on each MCP server of one client configuration
// file: a finding per server. A server that runs behind `portcullis mcp`
// is probed as the client would start it (with probe; nil: it is not
// started, the file is a project's); one that does not is not protected,
// unless hooked says a Portcullis hook in front of the client decides its
// tools' calls. scopes reads the file's servers.
func (e Env) checkMCPFile(ctx context.Context, c Client, file string, scopes func([]byte) ([]MCPEntry, error), dir string, hooked bool, probe MCPProbe) (out []Finding, present bool) {
	data, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false
	}
	if err != nil {
		return []Finding{{Client: c, File: file, Status: NotProtected, Why: []string{err.Error()}, Fix: "make the file readable, then: portcullis doctor"}}, true
	}
	servers, err := scopes(data)
	if err != nil {
		return []Finding{{Client: c, File: file, Status: NotProtected, Why: []string{fmt.Sprintf("not valid JSON: %v; the client may ignore the file", err)}, Fix: "fix the file by hand (a backup may be beside it, .bak)"}}, true
	}
	for _, s := range servers {
		out = append(out, e.checkMCPServer(ctx, c, file, s, dir, hooked, probe))
	}
	return out, true
}

// checkMCPServer reports on one server entry.
func (e Env) checkMCPServer(ctx context.Context, c Client, file string, s MCPEntry, dir string, hooked bool, probe MCPProbe) Finding {
	name := s.Name
	if s.Scope != "" {
		name += " (" + s.Scope + ")"
	}
	f := Finding{Client: c, File: file, Server: name, Status: Protected}
	hookNote := fmt.Sprintf("the Portcullis hook of %s decides its tools' calls", c)
	if s.remote() {
		where := s.URL
		if where == "" {
			where = "no command"
		}
		if hooked {
			f.Why = append(f.Why, fmt.Sprintf("remote (%s), not behind the wrapper: %s", where, hookNote))
			return f
		}
		f.worsen(NotProtected, fmt.Sprintf("remote (%s): the client calls it directly, bypassing Portcullis", where), "put it behind portcullis serve (docs/INTEGRATIONS.md)")
		return f
	}
	line, err := ShellJoin(append([]string{s.Command}, s.Args...))
	if err != nil {
		line = strings.Join(append([]string{s.Command}, s.Args...), " ")
	}
	f.Command = line
	server, prefix, ok := wrapped(s.Command, s.Args)
	switch {
	case !ok && hooked:
		f.Why = append(f.Why, "runs "+s.Command+" directly, not behind the wrapper: "+hookNote)
		return f
	case !ok:
		f.worsen(NotProtected, "runs "+s.Command+" directly, bypassing the wrapper: the client calls its tools without Portcullis", e.fixMCP(c, file, s.Name, append([]string{s.Command}, s.Args...)))
		return f
	case len(server) == 0:
		f.worsen(NotProtected, "runs the wrapper with no server after --: the client cannot start it", e.fixMCP(c, file, s.Name, nil))
		return f
	}
	fix := e.fixMCP(c, file, s.Name, server)
	e.checkBinaryAndPolicy(&f, s.Command, append([]string{s.Command}, prefix...), fix)
	f.DefaultPolicy = !slices.Contains(prefix, "--policy")
	if f.binaryMissing() {
		return f
	}
	if probe == nil {
		f.Why = append(f.Why, "behind the wrapper; not started: the project's own file names it (doctor --trust-project starts it as "+string(c)+" would)")
		return f
	}
	tools, stderr, err := probe(ctx, s, dir)
	if err != nil {
		why := fmt.Sprintf("a probe started it as %s would, and it did not answer (%v)", c, err)
		if last := lastLine(stderr); last != "" {
			why += "; its last words on stderr: " + last
		}
		if f.Fix != "" {
			fix = f.Fix // what the checks before the probe found is the cause
		}
		f.worsen(NotProtected, why+": the client runs without this server's tools", fix)
		return f
	}
	f.Why = append(f.Why, fmt.Sprintf("behind the wrapper: a probe started it as %s would and it listed %d %s through the gate", c, len(tools), plural(len(tools), "tool", "tools")))
	return f
}

// fixMCP is the command that puts a server behind the wrapper (or, for a
// hooked client, installs its hook).
func (e Env) fixMCP(c Client, file, name string, server []string) string {
	cmd := "portcullis init mcp"
	if name != "" {
		cmd += " --name " + name
	}
	if c == ClaudeDesktop || c == Cursor {
		cmd += " --client " + string(c)
		if e.fixInit(c, file) != "portcullis init "+string(c) {
			cmd += " --project --dir " + projectOf(file)
		}
	}
	if len(server) > 0 {
		if line, err := ShellJoin(server); err == nil {
			cmd += " -- " + line
		}
	} else {
		cmd += " -- SERVER..."
	}
	switch c {
	case ClaudeCode, Gemini:
		return cmd + " (and run the server as it prints), or " + e.fixInit(c, "") + " (the hook decides MCP calls too)"
	}
	return cmd
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return strings.TrimSpace(s)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// mcpServersOf reads the "mcpServers" object of a configuration file
// (Claude Desktop, Cursor, Gemini CLI and Claude Code's .mcp.json all
// keep it at the top), in name order.
func mcpServersOf(data []byte) ([]MCPEntry, error) {
	var cfg struct {
		MCPServers map[string]json.RawMessage `json:"mcpServers"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, err
	}
	return entries(cfg.MCPServers, "")
}

// expandedServersOf is mcpServersOf for a client that expands ${VAR} and
// ${VAR:-default} in a server's command, arguments, env and url when it
// starts it (Claude Code, Gemini CLI): doctor expands them from its own
// environment.
func expandedServersOf(data []byte) ([]MCPEntry, error) {
	out, err := mcpServersOf(data)
	return expandAll(out), err
}

var envRef = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}`) })

func expand(s string) string {
	return envRef().ReplaceAllStringFunc(s, func(ref string) string {
		m := envRef().FindStringSubmatch(ref)
		if v, ok := os.LookupEnv(m[1]); ok && (v != "" || m[2] == "") {
			return v
		}
		if m[2] != "" {
			return m[3]
		}
		return ref // unset, no default: the client leaves it as it is
	})
}

func expandAll(servers []MCPEntry) []MCPEntry {
	for i, s := range servers {
		s.Command, s.URL, s.Cwd = expand(s.Command), expand(s.URL), expand(s.Cwd)
		args := make([]string, len(s.Args))
		for j, a := range s.Args {
			args[j] = expand(a)
		}
		s.Args = args
		if s.Env != nil {
			env := make(map[string]string, len(s.Env))
			for k, v := range s.Env {
				env[k] = expand(v)
			}
			s.Env = env
		}
		servers[i] = s
	}
	return servers
}

// claudeJSONServers reads Claude Code's ~/.claude.json: the user scope's
// servers, and the local scope of project (when not empty).
func claudeJSONServers(project string) func([]byte) ([]MCPEntry, error) {
	return func(data []byte) ([]MCPEntry, error) {
		var cfg struct {
			MCPServers map[string]json.RawMessage `json:"mcpServers"`
			Projects   map[string]struct {
				MCPServers map[string]json.RawMessage `json:"mcpServers"`
			} `json:"projects"`
		}
		if err := json.Unmarshal(data, &cfg); err != nil {
			return nil, err
		}
		out, err := entries(cfg.MCPServers, "user scope")
		if err != nil || project == "" {
			return expandAll(out), err
		}
		for _, dir := range slices.Sorted(maps.Keys(cfg.Projects)) {
			if filepath.Clean(dir) != filepath.Clean(project) {
				continue
			}
			local, err := entries(cfg.Projects[dir].MCPServers, "local scope of "+dir)
			if err != nil {
				return nil, err
			}
			out = append(out, local...)
		}
		return expandAll(out), nil
	}
}

func entries(defs map[string]json.RawMessage, scope string) ([]MCPEntry, error) {
	var out []MCPEntry
	for _, name := range slices.Sorted(maps.Keys(defs)) {
		var d struct {
			Type    string            `json:"type"`
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env"`
			Cwd     string            `json:"cwd"`
			URL     string            `json:"url"`
			HTTPURL string            `json:"httpUrl"` // Gemini CLI's Streamable HTTP servers
		}
		if err := json.Unmarshal(defs[name], &d); err != nil {
			return nil, fmt.Errorf("server %q: %w", name, err)
		}
		s := MCPEntry{Name: name, Scope: scope, Type: d.Type, Command: d.Command, Args: d.Args, Env: d.Env, Cwd: d.Cwd, URL: d.URL}
		if s.URL == "" {
			s.URL = d.HTTPURL
		}
		out = append(out, s)
	}
	return out, nil
}

// lockedBuffer is a bytes.Buffer the server's stderr is copied into while
// the probe may read it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len() > 64<<10 {
		return len(p), nil // enough to say why
	}
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// checkMCP reports on an MCP client's configuration files (Claude
// Desktop, Cursor): every server must run behind `portcullis mcp`, unless
// hooked (a protected Portcullis hook of the client decides every MCP
// call: Cursor's beforeMCPExecution). A file with no servers is protected;
// an installed client (home exists) with no file is not.
func (e Env) checkMCP(ctx context.Context, c Client, files []string, home, dir string, hooked bool, p Probes) []Finding {
	var out []Finding
	found := false
	for i, file := range unique(files) {
		probe := p.MCP
		if i > 0 && !p.Project {
			probe = nil // files[0] is the user's, the others a project's
		}
		fs, present := e.checkMCPFile(ctx, c, file, mcpServersOf, dir, hooked, probe)
		found = found || present
		if present && len(fs) == 0 {
			fs = []Finding{{Client: c, File: file, Status: Protected, Why: []string{"no MCP servers configured"}}}
		}
		out = append(out, fs...)
	}
	if !found && home != "" && exists(home) {
		out = append(out, Finding{Client: c, File: home, Status: NotProtected,
			Why: []string{fmt.Sprintf("%s is installed and has no MCP configuration to check", c)}, Fix: e.fixInit(c, "")})
	}
	return out
}

// checkHookedMCP reports on the MCP servers of a client that runs
// Portcullis as a hook (Claude Code: ~/.claude.json's user scope and the
// project's local scope, and the project's .mcp.json; Gemini CLI: its
// settings files). The hook decides the calls of an unwrapped server when
// one of hooks is protected.
func (e Env) checkHookedMCP(ctx context.Context, c Client, project, dir string, hooks []Finding, p Probes) []Finding {
	hooked := slices.ContainsFunc(hooks, func(f Finding) bool { return f.Status == Protected && f.Command != "" })
	type source struct {
		file    string
		parse   func([]byte) ([]MCPEntry, error)
		project bool // the project's own file
	}
	var sources []source
	switch c {
	case ClaudeCode:
		// The local scope in ~/.claude.json is the user's own (claude mcp
		// add), not the project's.
		sources = append(sources, source{filepath.Join(e.Home, ".claude.json"), claudeJSONServers(project), false})
		if project != "" {
			sources = append(sources, source{filepath.Join(project, ".mcp.json"), expandedServersOf, true})
		}
	case Gemini:
		sources = append(sources, source{filepath.Join(e.Home, ".gemini", "settings.json"), expandedServersOf, false})
		if project != "" {
			sources = append(sources, source{filepath.Join(project, ".gemini", "settings.json"), expandedServersOf, true})
		}
	}
	var out []Finding
	seen := map[string]bool{}
	for _, s := range sources {
		if seen[s.file] {
			continue
		}
		seen[s.file] = true
		probe := p.MCP
		if s.project && !p.Project {
			probe = nil
		}
		fs, _ := e.checkMCPFile(ctx, c, s.file, s.parse, dir, hooked, probe)
		for _, f := range fs {
			if f.Server == "" && hookedFileReported(hooks, s.file) {
				continue // the hook check already said the file is unreadable
			}
			out = append(out, f)
		}
	}
	return out
}

// hookedFileReported reports whether hooks has a finding about file as a
// whole (a settings file that could not be read or parsed).
func hookedFileReported(hooks []Finding, file string) bool {
	return slices.ContainsFunc(hooks, func(f Finding) bool { return f.File == file && f.Command == "" && f.Status != Protected })
}
