package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// upstreamCall is one line of the test upstream's call log.
type upstreamCall struct {
	PID  int             `json:"pid,omitempty"`
	Tool string          `json:"tool,omitempty"`
	Args json.RawMessage `json:"args,omitempty"`
}

// recordCalls makes the test upstream append each call it receives to path
// before answering it, and adds the tools a fault run's policy refuses.
func recordCalls(s *mcp.Server, path string, reply func(string) mcp.ToolHandler) int {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, "test upstream:", err)
		return 1
	}
	write := func(c upstreamCall) error {
		b, err := json.Marshal(c)
		if err != nil {
			return err
		}
		_, err = f.Write(append(b, '\n')) // one write: lines of concurrent calls do not interleave
		return err
	}
	if err := write(upstreamCall{PID: os.Getpid()}); err != nil {
		fmt.Fprintln(os.Stderr, "test upstream:", err)
		return 1
	}
	obj := map[string]any{"type": "object"}
	s.AddTool(&mcp.Tool{Name: "delete_note", InputSchema: obj, Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true)}}, reply("delete_note"))
	s.AddTool(&mcp.Tool{Name: "run_shell", InputSchema: obj}, reply("run_shell"))
	s.AddTool(&mcp.Tool{Name: "send_note", InputSchema: obj}, reply("send_note"))
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/call" {
				p := req.(*mcp.CallToolRequest).Params
				if err := write(upstreamCall{Tool: p.Name, Args: p.Arguments}); err != nil {
					return nil, err
				}
			}
			return next(ctx, method, req)
		}
	})
	return 0
}

func ptr[T any](v T) *T { return &v }
