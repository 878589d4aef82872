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

// upstreamLogEnv names a file where the test upstream appends every call it
// receives (one JSON line, written before it answers) and, at start, its
// process id (a "pid" line); with it, the upstream also offers delete_note
// and run_shell, so a test can check that nothing the policy refuses ever
// reached it.
const upstreamLogEnv = "PORTCULLIS_TEST_UPSTREAM_LOG"

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
	if path := os.Getenv(upstreamLogEnv); path != "" {
		if code := recordCalls(s, path, reply); code != 0 {
			return code
		}
	}
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "test upstream:", err)
		return 1
	}
	return 0
}
