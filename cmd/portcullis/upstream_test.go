package main

import (
	"context"
	"fmt"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// upstreamEnv makes the test binary a small stdio MCP server, the upstream
// of the gateway processes the tests start.
const upstreamEnv = "PORTCULLIS_TEST_UPSTREAM"

func runTestUpstream() int {
	s := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "1.0.0"}, nil)
	obj := map[string]any{"type": "object"}
	reply := func(tool string) mcp.ToolHandler {
		return func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: tool + " " + string(req.Params.Arguments)}}}, nil
		}
	}
	s.AddTool(&mcp.Tool{Name: "read_note", InputSchema: obj, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, reply("read_note"))
	s.AddTool(&mcp.Tool{Name: "write_note", InputSchema: obj}, reply("write_note"))
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "test upstream:", err)
		return 1
	}
	return 0
}
