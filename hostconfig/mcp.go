package hostconfig

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
)

// Server is an MCP server a client starts over stdio.
type Server struct {
	Name    string
	Command string
	Args    []string
}

// Wrap is an install of Portcullis's MCP wrapper in a client that runs MCP
// servers (Claude Desktop, Cursor).
type Wrap struct {
	Client  Client
	Scope   Scope
	Project string
	// Prefix is the wrapper's words before the server's command: the
	// binary, "mcp" and its flags (WrapperPrefix builds them); "--" and
	// the server follow.
	Prefix []string
	// Add is a server to add (or replace, by name), wrapped; the other
	// servers are then left as they are (the prefix names a policy for
	// this server). Nil wraps every server already listed.
	Add *Server
}

// WrapperPrefix is the words of `portcullis mcp` before "--": exe, "mcp",
// --policy (unless empty: the built-in default policy) and --agent.
func WrapperPrefix(exe, policy, agent string) []string {
	words := []string{exe, "mcp"}
	if policy != "" {
		words = append(words, "--policy", policy)
	}
	if agent != "" {
		words = append(words, "--agent", agent)
	}
	return words
}

// wrapped returns the server a wrapper entry runs, if command and args
// are `portcullis mcp … -- SERVER…`.
func wrapped(command string, args []string) (server []string, prefix []string, ok bool) {
	if !strings.Contains(filepath.Base(command), "portcullis") || len(args) == 0 || args[0] != "mcp" {
		return nil, nil, false
	}
	for i, a := range args {
		if a == "--" {
			return args[i+1:], args[:i], true
		}
	}
	return nil, args, true
}

// WrapMCP puts every stdio server of the client's MCP configuration
// behind `portcullis mcp` — the server's own command and arguments follow
// "--", its other settings (env, ...) are kept — or, with w.Add, adds that
// one server, wrapped.
// A server already wrapped gets the new prefix (so installing again
// changes nothing). A remote server (a url, no command) cannot be wrapped
// and is reported in Notes. The previous file is kept as <file>.bak.
func (e Env) WrapMCP(w Wrap) (Installed, error) {
	if w.Client.Hooked() {
		return Installed{}, fmt.Errorf("%s runs Portcullis as a hook: install the hook instead", w.Client)
	}
	if len(w.Prefix) < 2 {
		return Installed{}, fmt.Errorf("the wrapper prefix needs the binary and mcp")
	}
	path, err := e.SettingsFile(w.Client, w.Scope, w.Project)
	if err != nil {
		return Installed{}, err
	}
	old, mode, err := readForUpdate(path)
	if err != nil {
		return Installed{}, err
	}
	doc := old
	if len(strings.TrimSpace(string(doc))) == 0 {
		doc = []byte("{}")
	}
	root, err := parseObject(doc)
	if err != nil {
		return Installed{}, fmt.Errorf("%s: not a JSON object: %w", path, err)
	}
	servers := &object{}
	if raw, ok := root.get("mcpServers"); ok {
		if servers, err = parseObject(raw); err != nil {
			return Installed{}, fmt.Errorf(`%s: "mcpServers" is not an object: %w`, path, err)
		}
	}
	var notes []string
	for _, name := range servers.keys {
		if w.Add != nil {
			break
		}
		entry, err := parseObject(servers.vals[name])
		if err != nil {
			notes = append(notes, fmt.Sprintf("server %q is not an object: left as it is", name))
			continue
		}
		var cmd string
		var args []string
		if raw, ok := entry.get("command"); !ok || json.Unmarshal(raw, &cmd) != nil || cmd == "" {
			notes = append(notes, fmt.Sprintf("server %q is remote (no command): the stdio wrapper cannot front it; put it behind `portcullis serve` (docs/INTEGRATIONS.md)", name))
			continue
		}
		if raw, ok := entry.get("args"); ok && json.Unmarshal(raw, &args) != nil {
			notes = append(notes, fmt.Sprintf("server %q has args that are not a list of strings: left as it is", name))
			continue
		}
		server := append([]string{cmd}, args...)
		if inner, _, ok := wrapped(cmd, args); ok {
			server = inner
		}
		if len(server) == 0 {
			notes = append(notes, fmt.Sprintf("server %q runs the wrapper with no server after --: left as it is", name))
			continue
		}
		if err := setWrapped(entry, w.Prefix, name, server); err != nil {
			return Installed{}, err
		}
		servers.set(name, entry.marshal())
	}
	if w.Add != nil {
		entry := &object{}
		if raw, ok := servers.get(w.Add.Name); ok {
			if e, err := parseObject(raw); err == nil {
				entry = e
			}
		}
		if err := setWrapped(entry, w.Prefix, w.Add.Name, append([]string{w.Add.Command}, w.Add.Args...)); err != nil {
			return Installed{}, err
		}
		servers.set(w.Add.Name, entry.marshal())
	}
	root.set("mcpServers", servers.marshal())
	updated, err := indent(root.marshal())
	if err != nil {
		return Installed{}, err
	}
	changed, err := writeWithBackup(path, old, updated, mode)
	if err != nil {
		return Installed{}, err
	}
	command, err := ShellJoin(w.Prefix)
	if err != nil {
		return Installed{}, err
	}
	sort.Strings(notes)
	return Installed{Files: []string{path}, Changed: changed, Command: command + " --name NAME -- SERVER...", Notes: notes}, nil
}

// setWrapped sets an entry's command and args to run server behind the
// wrapper, named name in the audit and the pins.
func setWrapped(entry *object, prefix []string, name string, server []string) error {
	args := append(append(append([]string(nil), prefix[1:]...), "--name", name, "--"), server...)
	cmd, err := marshal(prefix[0])
	if err != nil {
		return err
	}
	a, err := marshal(args)
	if err != nil {
		return err
	}
	entry.set("command", cmd)
	entry.set("args", a)
	return nil
}
