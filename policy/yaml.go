package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// decodeYAML parses data as exactly one YAML document and returns its root
// node. Problems (too large, malformed, empty, several documents) go to rep
// and the result is nil.
func decodeYAML(name string, data []byte, rep *report) *yaml.Node {
	fail := func(line int, format string, args ...any) *yaml.Node {
		rep.errs = append(rep.errs, problem{file: name, line: line, msg: fmt.Sprintf(format, args...)})
		return nil
	}
	if len(data) > MaxFileBytes {
		return fail(0, "file is %d bytes, more than the limit of %d (8 MiB)", len(data), MaxFileBytes)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := safeDecode(dec, &doc); err != nil {
		if errors.Is(err, io.EOF) {
			return fail(0, "empty file (want a mapping that starts with version: 1)")
		}
		line, msg := yamlError(data, err)
		return fail(line, "malformed YAML: %s", msg)
	}
	var extra yaml.Node
	switch err := safeDecode(dec, &extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		line, msg := yamlError(data, err)
		return fail(line, "malformed YAML: %s", msg)
	default:
		return fail(documentLine(&extra), "a second YAML document (a file holds exactly one; remove the --- separator)")
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return fail(doc.Line, "empty document (want a mapping that starts with version: 1)")
	}
	root := doc.Content[0]
	if isNull(root) {
		return fail(root.Line, "empty document (want a mapping that starts with version: 1)")
	}
	return root
}

func documentLine(doc *yaml.Node) int {
	if len(doc.Content) > 0 && doc.Content[0].Line > 0 {
		return doc.Content[0].Line
	}
	return doc.Line
}

// safeDecode decodes one document, turning a panic in the YAML library into
// an error: a malformed file must never crash the caller.
func safeDecode(dec *yaml.Decoder, n *yaml.Node) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("yaml: %v", r)
		}
	}()
	return dec.Decode(n)
}

var yamlLine = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^line (\d+): `) })

// yamlError extracts a 1-based line and a message from a yaml.v3 error.
// yaml.v3 prints parser errors with a 0-based line (scanner errors are
// right), and leaves the line out when it is the first, or when the problem
// is one of encoding (control characters, bad UTF-8) or an unknown anchor;
// those lines are found here.
func yamlError(data []byte, err error) (int, string) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if m := yamlLine().FindStringSubmatch(msg); m != nil {
		n, convErr := strconv.Atoi(m[1])
		if convErr == nil {
			line = n
		}
		msg = msg[len(m[0]):]
	}
	switch {
	case strings.HasPrefix(msg, "did not find expected"),
		strings.HasPrefix(msg, "found duplicate %"),
		strings.HasPrefix(msg, "found incompatible YAML document"),
		strings.HasPrefix(msg, "found undefined tag handle"):
		line++ // a parser error: yaml.v3 printed the 0-based line
	case strings.Contains(msg, "tab character"):
		if l := firstTabIndent(data, line); l > 0 {
			line = l
		}
	case strings.HasPrefix(msg, "unknown anchor '"):
		anchor := strings.TrimSuffix(strings.TrimPrefix(msg, "unknown anchor '"), "' referenced")
		if i := bytes.Index(data, []byte("*"+anchor)); i >= 0 {
			line = lineAt(data, i)
		}
	case line == 0:
		if i := badCharacter(data); i >= 0 {
			line = lineAt(data, i)
		}
	}
	if line == 0 {
		line = 1
	}
	return line, msg
}

// lineAt returns the 1-based line of byte offset i.
func lineAt(data []byte, i int) int { return bytes.Count(data[:i], []byte("\n")) + 1 }

// firstTabIndent returns the first line at or after line whose indentation
// holds a tab, or 0.
func firstTabIndent(data []byte, from int) int {
	for n, l := range bytes.Split(data, []byte("\n")) {
		if n+1 < from {
			continue
		}
		indent := l[:len(l)-len(bytes.TrimLeft(l, " \t"))]
		if bytes.IndexByte(indent, '\t') >= 0 {
			return n + 1
		}
	}
	return 0
}

// badCharacter returns the offset of the first byte YAML does not accept in
// a UTF-8 document (invalid UTF-8 or a control character), or -1.
func badCharacter(data []byte) int {
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		switch {
		case r == utf8.RuneError && size == 1,
			r < 0x20 && r != '\t' && r != '\n' && r != '\r',
			r >= 0x7f && r <= 0x9f && r != 0x85,
			r == 0xfffe, r == 0xffff:
			return i
		}
		i += size
	}
	return -1
}

// resolveAlias follows an alias node to its anchor, without budget (for
// looking up lines, which follows a bounded path).
func resolveAlias(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	if n == nil || n.Kind == yaml.AliasNode {
		return nullNode()
	}
	return n
}

func nullNode() *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null"} }

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// kindName describes a node for messages: "a mapping", `string "x"`, ...
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return "nothing (null)"
		case "!!bool":
			return "boolean " + clip(n.Value)
		case "!!int", "!!float":
			return "number " + clip(n.Value)
		}
		return "string " + strconv.Quote(clip(n.Value))
	case yaml.AliasNode:
		return "an alias"
	}
	return "a document"
}

// clip shortens s for a message.
func clip(s string) string {
	const max = 80
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// quote is strconv.Quote of clip(s).
func quote(s string) string { return strconv.Quote(clip(s)) }
