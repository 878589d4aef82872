package hook

import "github.com/portcullis/portcullis"

// resolver maps a host's tool use onto the policy's tools:
//
//  1. a policy tool (or alias) with the host tool's exact name decides it,
//     with the host's arguments (a policy written for the host, such as
//     examples/claude-code, names Bash, Write, Read, ...);
//  2. otherwise a shell command goes to the policy's shell tool (the first
//     with shellArg), a file write to its file-write tool (the first
//     non-READ tool with pathArg), a file read to its read tool (the first
//     READ tool with pathArg), each with the command or path under the
//     tool's own argument name;
//  3. an MCP tool is decided under its tool name (or its full
//     mcp__<server>__<tool> name, with MCPFullName);
//  4. anything else under the host's tool name: unclassified, it needs a
//     person every time, or is denied under unknownTools: deny.
type resolver struct {
	names              map[string]bool
	shell, write, read *portcullis.ToolPolicy
	mcp                MCPNames
}

func newResolver(p *portcullis.Policy, mcp MCPNames) *resolver {
	r := &resolver{names: map[string]bool{}, mcp: mcp}
	if p == nil {
		return r
	}
	for i := range p.Tools {
		t := &p.Tools[i]
		r.names[t.Name] = true
		for _, a := range t.Aliases {
			r.names[a] = true
		}
		switch {
		case t.ShellArg != "":
			if r.shell == nil {
				r.shell = t
			}
		case t.PathArg != "" && t.Endpoint == portcullis.Read:
			if r.read == nil {
				r.read = t
			}
		case t.PathArg != "" && (t.Endpoint == portcullis.Create || t.Endpoint == portcullis.Update):
			if r.write == nil {
				r.write = t
			}
		}
	}
	return r
}

// ShellTool returns the policy tool shell commands are decided under: the
// first tool with shellArg. ok is false when the policy has none.
func ShellTool(p *portcullis.Policy) (name, arg string, ok bool) {
	r := newResolver(p, MCPToolName)
	if r.shell == nil {
		return "", "", false
	}
	return r.shell.Name, r.shell.ShellArg, true
}

func (r *resolver) call(a action) portcullis.Call {
	if r.names[a.hostTool] {
		return portcullis.Call{Tool: a.hostTool, Args: a.args}
	}
	switch a.kind {
	case kindShell:
		if r.shell != nil {
			return portcullis.Call{Tool: r.shell.Name, Args: map[string]any{r.shell.ShellArg: a.command}}
		}
	case kindWrite:
		if r.write != nil {
			return portcullis.Call{Tool: r.write.Name, Args: moveArg(a, r.write.PathArg)}
		}
	case kindRead:
		if r.read != nil {
			return portcullis.Call{Tool: r.read.Name, Args: moveArg(a, r.read.PathArg)}
		}
	case kindMCP:
		if r.mcp == MCPToolName {
			return portcullis.Call{Tool: a.tool, Args: a.args}
		}
		return portcullis.Call{Tool: "mcp__" + a.server + "__" + a.tool, Args: a.args}
	}
	return portcullis.Call{Tool: a.hostTool, Args: a.args}
}

// moveArg returns a's arguments with the path under the policy tool's
// argument name instead of the host's.
func moveArg(a action, to string) map[string]any {
	out := make(map[string]any, len(a.args)+1)
	for k, v := range a.args {
		if k != a.pathKey {
			out[k] = v
		}
	}
	if a.path != "" {
		out[to] = a.path
	}
	return out
}
