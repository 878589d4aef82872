package hook

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
)

// An MCP server behind a Portcullis MCP wrapper (`portcullis mcp -- ...`)
// has every call decided, held and audited by that wrapper. A hook in
// front of the same host would decide each call a second time, under a
// name it does not know, and ask for every one. With Options.DeferMCP the
// hook answers a call of such a server's tools with an allow that says the
// wrapper decides, and decides nothing itself.
//
// Two things must hold, and both come from files the agent cannot change
// through the gate:
//   - a person named the server: DeferMCP comes from the hook's command
//     line, which lives in the host's settings (protected files: a write
//     to them is denied);
//   - every definition of a server of that name the host reads starts it
//     through `portcullis mcp`: Options.MCPServers reads them at each
//     call. No definition found, one that is not wrapped (a shadowing
//     project entry, a URL server), or a file that cannot be read: the
//     call is decided as any other, which asks. The files that define MCP
//     servers are protected too while servers are deferred (MCPConfigFiles).

// MCPServer is one definition of an MCP server in a host's configuration.
type MCPServer struct {
	// Source is where it is defined (a file, and the scope within it).
	Source string
	// Type is the transport: "" or "stdio" for a command, else "http",
	// "sse", ...
	Type    string   `json:"type"`
	Command string   `json:"command"`
	Args    []string `json:"args"`
	URL     string   `json:"url"`
}

// Wrapped reports whether the definition starts the server through a
// Portcullis MCP wrapper: a stdio command that is a program named
// portcullis whose first argument is mcp.
func (s MCPServer) Wrapped() bool {
	if s.Type != "" && s.Type != "stdio" {
		return false
	}
	return filepath.Base(s.Command) == "portcullis" && len(s.Args) > 0 && s.Args[0] == "mcp"
}

// mcpServerName is what a deferred server's name may be: a name as the
// host writes it in tool names, without the "__" that separates server
// and tool.
var (
	mcpServerName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-]+$`) })
	notInToolName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[^A-Za-z0-9_-]`) })
)

// CheckMCPServerName says why a name cannot be deferred, or nil.
func CheckMCPServerName(name string) error {
	if !mcpServerName().MatchString(name) || strings.Contains(name, "__") {
		return fmt.Errorf("MCP server name %q: want letters, digits, _ and - without \"__\", as it appears in mcp__SERVER__TOOL", name)
	}
	return nil
}

// MCPServerNames reads MCP server names as a person gives them: each
// value a comma-separated list of names (CheckMCPServerName).
func MCPServerNames(values []string) ([]string, error) {
	var out []string
	for _, v := range values {
		for _, s := range strings.Split(v, ",") {
			if err := CheckMCPServerName(s); err != nil {
				return nil, err
			}
			out = append(out, s)
		}
	}
	return out, nil
}

// claudeToolName is how Claude Code writes a server's configured name in
// its tool names: every character other than a letter, digit, _ or -
// becomes _.
func claudeToolName(name string) string {
	return notInToolName().ReplaceAllString(name, "_")
}

// ClaudeMCPServers returns every definition of an MCP server that Claude
// Code would name server in its tool names, from the scopes Claude Code
// reads: the user's and the project's local scope in claudeJSON (the
// user's ~/.claude.json, or .claude.json in $CLAUDE_CONFIG_DIR), and the
// project's .mcp.json. A file that does not exist defines nothing; one
// that cannot be read or parsed is an error.
func ClaudeMCPServers(claudeJSON, project, server string) ([]MCPServer, error) {
	var out []MCPServer
	var user struct {
		MCPServers map[string]json.RawMessage `json:"mcpServers"`
		Projects   map[string]struct {
			MCPServers map[string]json.RawMessage `json:"mcpServers"`
		} `json:"projects"`
	}
	found, err := readJSON(claudeJSON, &user)
	if err != nil {
		return nil, err
	}
	if found {
		if out, err = appendServers(out, user.MCPServers, server, claudeJSON+" (user scope)"); err != nil {
			return nil, err
		}
		if project != "" {
			for dir, p := range user.Projects {
				if filepath.Clean(dir) == filepath.Clean(project) {
					if out, err = appendServers(out, p.MCPServers, server, claudeJSON+" (local scope of "+dir+")"); err != nil {
						return nil, err
					}
				}
			}
		}
	}
	if project != "" {
		var mcp struct {
			MCPServers map[string]json.RawMessage `json:"mcpServers"`
		}
		path := filepath.Join(project, ".mcp.json")
		found, err := readJSON(path, &mcp)
		if err != nil {
			return nil, err
		}
		if found {
			if out, err = appendServers(out, mcp.MCPServers, server, path+" (project scope)"); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// ClaudeMCPConfigFiles are the files ClaudeMCPServers reads: while MCP
// servers are deferred to their wrappers they are Portcullis's own files,
// which an agent must not rewrite.
func ClaudeMCPConfigFiles(claudeJSON, project string) []string {
	out := []string{claudeJSON}
	if project != "" {
		out = append(out, filepath.Join(project, ".mcp.json"))
	}
	return out
}

func readJSON(path string, v any) (bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read MCP servers: %w", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("read MCP servers from %s: %w", path, err)
	}
	return true, nil
}

func appendServers(out []MCPServer, defs map[string]json.RawMessage, server, source string) ([]MCPServer, error) {
	for name, raw := range defs {
		if claudeToolName(name) != server {
			continue
		}
		s := MCPServer{Source: source}
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("MCP server %q in %s: %w", name, source, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// deferred reports whether an MCP action is left to the Portcullis
// wrapper in front of its server, and why not when it is not (for the
// log). Only a server named in DeferMCP, with a tool name that cannot
// belong to another server, whose every definition is wrapped.
func (h *Handler) deferred(a action) (bool, string) {
	if a.kind != kindMCP || !h.deferMCP[a.server] {
		return false, ""
	}
	if strings.Contains(a.tool, "__") {
		// mcp__A__B__C: server A's tool B__C, or server A__B's tool C.
		return false, "the tool name " + a.hostTool + " does not tell which server it belongs to"
	}
	defs, err := h.opts.MCPServers(a.server)
	if err != nil {
		return false, err.Error()
	}
	if len(defs) == 0 {
		return false, "no definition of MCP server " + a.server + " was found in the host's configuration"
	}
	for _, d := range defs {
		if !d.Wrapped() {
			return false, "MCP server " + a.server + " in " + d.Source + " is not started through `portcullis mcp`"
		}
	}
	return true, ""
}

// deferredVerdict is the answer for a call the wrapper decides.
func deferredVerdict(a action) Verdict {
	return Verdict{Behavior: Allow, Reason: "Portcullis: " + quoteTool(a.hostTool) + " is decided by the Portcullis MCP wrapper in front of server " + quoteTool(a.server)}
}
