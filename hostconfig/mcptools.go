package hostconfig

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"gopkg.in/yaml.v3"
)

// Tool is what an MCP server says about one of its tools: its name, its
// annotations (the server's own claims) and the arguments that name a
// file.
type Tool struct {
	Name        string
	ReadOnly    bool  // readOnlyHint
	Destructive *bool // destructiveHint (MCP's default, when absent, is true for a tool that is not read-only)
	OpenWorld   *bool // openWorldHint
	PathArg     string
}

// ListTools starts the MCP server argv once over stdio, as an MCP client,
// and returns its tools. The server's stderr goes to stderr; it is
// stopped before ListTools returns.
func ListTools(ctx context.Context, argv []string, stderr io.Writer) ([]Tool, error) {
	if len(argv) == 0 {
		return nil, errors.New("no server command")
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stderr = stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "portcullis-init", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, nil)
	if err != nil {
		return nil, fmt.Errorf("start the MCP server %s: %w", strings.Join(argv, " "), err)
	}
	defer cs.Close()
	var out []Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("list the tools of %s: %w", strings.Join(argv, " "), err)
		}
		tool := Tool{Name: t.Name, PathArg: pathArg(t.InputSchema)}
		if a := t.Annotations; a != nil {
			tool.ReadOnly, tool.Destructive, tool.OpenWorld = a.ReadOnlyHint, a.DestructiveHint, a.OpenWorldHint
		}
		out = append(out, tool)
	}
	return out, nil
}

// pathArg is the argument of an input schema that names one file: "path"
// (or "file_path"), when the schema has it.
func pathArg(schema any) string {
	b, err := json.Marshal(schema)
	if err != nil {
		return ""
	}
	var s struct {
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
	}
	if json.Unmarshal(b, &s) != nil {
		return ""
	}
	for _, name := range []string{"path", "file_path", "filePath"} {
		if p, ok := s.Properties[name]; ok && p.Type == "string" {
			return name
		}
	}
	return ""
}

// Classified is a tool's classification for a person to review, with
// where it came from.
type Classified struct {
	Tool
	Endpoint      string // READ, CREATE, UPDATE, DELETE or EXECUTE
	Risk          string // external-write, or empty
	NotElevatable bool   // canBeElevated: false
	Why           string // where the level came from, for the comment
}

// The words of a tool's name that say what it does.
var verbs = []struct {
	endpoint string
	words    []string
}{
	{"READ", []string{"read", "get", "list", "search", "find", "view", "show", "describe", "query", "fetch", "lookup", "stat", "info", "inspect", "browse", "count", "check", "peek", "download", "tree", "ls", "cat", "grep"}},
	{"CREATE", []string{"create", "add", "new", "insert", "make", "mkdir", "upload", "post", "send", "publish", "comment", "reply", "open", "fork", "clone"}},
	{"UPDATE", []string{"update", "edit", "write", "set", "modify", "move", "rename", "patch", "put", "replace", "save", "append", "merge", "change", "apply", "push", "commit", "close", "assign", "copy", "mv", "cp"}},
	{"DELETE", []string{"delete", "remove", "rm", "drop", "destroy", "purge", "erase", "unlink", "truncate", "clear", "reset", "kill", "revoke", "wipe"}},
	{"EXECUTE", []string{"run", "exec", "execute", "eval", "shell", "command", "invoke", "spawn", "launch", "deploy", "install", "script", "terminal", "bash"}},
}

// externalWords mark a tool that reaches beyond the machine.
var externalWords = []string{"send", "email", "mail", "post", "publish", "push", "tweet", "message", "notify", "sms", "slack", "webhook"}

var endpointRank = map[string]int{"READ": 0, "CREATE": 1, "UPDATE": 2, "EXECUTE": 3, "DELETE": 4}

// nameWords splits a tool name into lower-case words: read_text_file,
// readTextFile and read-text-file all give read, text, file.
func nameWords(name string) []string {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	rs := []rune(name)
	for i, r := range rs {
		switch {
		case !unicode.IsLetter(r) && !unicode.IsDigit(r):
			flush()
		case unicode.IsUpper(r) && i > 0 && (unicode.IsLower(rs[i-1]) || (i+1 < len(rs) && unicode.IsLower(rs[i+1]) && unicode.IsUpper(rs[i-1]))):
			flush()
			cur = append(cur, r)
		default:
			cur = append(cur, r)
		}
	}
	flush()
	return words
}

// ClassifyTools classifies each tool from its name and its annotations,
// for a person to review: the strictest verb in the name sets the
// endpoint; a read-only claim classifies only a tool whose name says
// nothing, and never lowers what the name says; a destructive claim makes
// the tool not elevatable; an open-world claim (or a name that sends)
// makes a tool that writes an external write. A tool nothing speaks for
// is UPDATE: a person confirms every call.
func ClassifyTools(tools []Tool) []Classified {
	out := make([]Classified, 0, len(tools))
	for _, t := range tools {
		c := Classified{Tool: t}
		words := nameWords(t.Name)
		verb := ""
		for _, v := range verbs {
			for _, w := range words {
				if slices.Contains(v.words, w) && (c.Endpoint == "" || endpointRank[v.endpoint] > endpointRank[c.Endpoint]) {
					c.Endpoint, verb = v.endpoint, w
				}
			}
		}
		var why []string
		switch {
		case verb != "":
			why = append(why, fmt.Sprintf("from its name (%q)", verb))
		case t.ReadOnly:
			c.Endpoint = "READ"
			why = append(why, "from the server's readOnlyHint (the server's own claim)")
		default:
			c.Endpoint = "UPDATE"
			why = append(why, "neither its name nor its annotations say what it does: a person confirms every call")
		}
		if verb != "" && t.ReadOnly && c.Endpoint != "READ" {
			why = append(why, "the server claims readOnlyHint, which does not lower what the name says")
		}
		if t.Destructive != nil && *t.Destructive && !t.ReadOnly {
			c.NotElevatable = true
			if c.Endpoint == "READ" {
				c.Endpoint = "UPDATE"
			}
			why = append(why, "the server says destructiveHint: not elevatable")
		}
		external := t.OpenWorld != nil && *t.OpenWorld
		for _, w := range words {
			external = external || slices.Contains(externalWords, w)
		}
		if external && c.Endpoint != "READ" {
			c.Risk = "external-write"
			why = append(why, "reaches beyond this machine (openWorldHint or its name): risk external-write")
		}
		c.Why = strings.Join(why, "; ")
		out = append(out, c)
	}
	return out
}

var plainKey = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]*$`) })

// yamlKey quotes a tool name for a YAML key when it needs quoting.
func yamlKey(name string) string {
	if plainKey().MatchString(name) && !slices.Contains([]string{"true", "false", "yes", "no", "on", "off", "null", "y", "n"}, strings.ToLower(name)) {
		return name
	}
	b, err := marshal(name)
	if err != nil {
		return `""`
	}
	return string(b)
}

// ToolsBlock is the policy lines (indented for the tools map) that
// classify an MCP server's tools, each with a comment saying where its
// level came from. Tools in skip (already in the policy) are listed in a
// comment only.
func ToolsBlock(server string, cs []Classified, skip map[string]bool) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "  # ---- MCP server %q: %d tools, classified by portcullis init ----\n", server, len(cs))
	b.WriteString("  # REVIEW each entry: this file is what the gate trusts. The levels below\n")
	b.WriteString("  # were guessed from the tools' names and the server's annotations, which are\n")
	b.WriteString("  # only the server's own claims. READ runs without asking; CREATE asks once\n")
	b.WriteString("  # per session; UPDATE, DELETE and EXECUTE ask every time.\n")
	for _, c := range cs {
		if skip[c.Name] {
			fmt.Fprintf(&b, "  # %s: already classified above; left as it is\n", c.Name)
			continue
		}
		fmt.Fprintf(&b, "  # %s: %s\n", c.Endpoint, c.Why)
		fields := []string{"endpoint: " + c.Endpoint}
		if c.PathArg != "" && c.Endpoint != "READ" {
			fields = append(fields, "pathArg: "+c.PathArg)
		}
		if c.NotElevatable {
			fields = append(fields, "canBeElevated: false")
		}
		if c.Risk != "" {
			fields = append(fields, "risk: "+c.Risk)
		}
		fmt.Fprintf(&b, "  %s: {%s}\n", yamlKey(c.Name), strings.Join(fields, ", "))
	}
	return b.Bytes()
}

// ToolNames returns the names the policy's tools map already has.
func ToolNames(policyYAML []byte) (map[string]bool, error) {
	tools, _, err := toolsNode(policyYAML)
	if err != nil || tools == nil {
		return map[string]bool{}, err
	}
	names := map[string]bool{}
	for i := 0; i+1 < len(tools.Content); i += 2 {
		names[tools.Content[i].Value] = true
	}
	return names, nil
}

// toolsNode finds the policy's top-level tools mapping and the line (1
// based) of the top-level key after it (0: none).
func toolsNode(policyYAML []byte) (*yaml.Node, int, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(policyYAML, &doc); err != nil {
		return nil, 0, err
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, 0, errors.New("the policy is not a YAML mapping")
	}
	root := doc.Content[0]
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value != "tools" {
			continue
		}
		next := 0
		if i+2 < len(root.Content) {
			next = root.Content[i+2].Line
		}
		return root.Content[i+1], next, nil
	}
	return nil, 0, nil
}

// InsertTools returns the policy with block added at the end of its tools
// map (before the next top-level key and the blank lines above it), or a
// new tools map at the end when it has none. Everything else, comments
// included, stays as written.
func InsertTools(policyYAML, block []byte) ([]byte, error) {
	tools, next, err := toolsNode(policyYAML)
	if err != nil {
		return nil, err
	}
	text := string(policyYAML)
	if text != "" && !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	if tools == nil {
		return []byte(text + "\ntools:\n" + string(block)), nil
	}
	if tools.Kind != yaml.MappingNode || tools.Style&yaml.FlowStyle != 0 {
		return nil, errors.New("the policy's tools are not a block mapping: add the MCP server's tools by hand")
	}
	lines := strings.SplitAfter(text, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	at := len(lines)
	if next > 0 {
		at = next - 1
		// Keep the next key's own comment and the blank lines above it
		// with it.
		for at > 0 && (strings.TrimSpace(lines[at-1]) == "" || strings.HasPrefix(lines[at-1], "#")) {
			at--
		}
	}
	var out strings.Builder
	for _, l := range lines[:at] {
		out.WriteString(l)
	}
	out.WriteString("\n")
	out.Write(block)
	for _, l := range lines[at:] {
		out.WriteString(l)
	}
	return []byte(out.String()), nil
}
