// Command notes is a small MCP server over stdio, the upstream of the
// gateway example: notes kept in memory, one tool to read, write, list and
// delete them.
package main

import (
	"context"
	"fmt"
	"log"
	"slices"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type noteArgs struct {
	Name string `json:"name" jsonschema:"the note's name"`
	Text string `json:"text,omitempty" jsonschema:"the note's text (write_note only)"`
}

type empty struct{}

func main() {
	var (
		mu    sync.Mutex
		notes = map[string]string{"welcome": "Notes behind Portcullis."}
	)
	s := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "1.0.0"}, nil)
	text := func(format string, args ...any) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
	}
	mcp.AddTool(s, &mcp.Tool{Name: "list_notes", Description: "List the notes' names.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, _ empty) (*mcp.CallToolResult, any, error) {
			mu.Lock()
			defer mu.Unlock()
			var names []string
			for n := range notes {
				names = append(names, n)
			}
			slices.Sort(names)
			return text("%v", names), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "read_note", Description: "Read a note.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, a noteArgs) (*mcp.CallToolResult, any, error) {
			mu.Lock()
			defer mu.Unlock()
			t, ok := notes[a.Name]
			if !ok {
				return nil, nil, fmt.Errorf("no note %q", a.Name)
			}
			return text("%s", t), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "write_note", Description: "Create or replace a note."},
		func(_ context.Context, _ *mcp.CallToolRequest, a noteArgs) (*mcp.CallToolResult, any, error) {
			mu.Lock()
			defer mu.Unlock()
			notes[a.Name] = a.Text
			return text("wrote %q", a.Name), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "delete_note", Description: "Delete a note.", Annotations: &mcp.ToolAnnotations{DestructiveHint: new(true)}},
		func(_ context.Context, _ *mcp.CallToolRequest, a noteArgs) (*mcp.CallToolResult, any, error) {
			mu.Lock()
			defer mu.Unlock()
			delete(notes, a.Name)
			return text("deleted %q", a.Name), nil, nil
		})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}
