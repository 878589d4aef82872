package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/approvals"
	"github.com/portcullis/portcullis/gate"
)

// runTools lists the pinned MCP tool definitions, and accepts a changed
// one on behalf of a person after showing what changed.
func runTools(ctx context.Context, o *toolsOptions, pos []string, stdout, stderr io.Writer) error {
	sf := &o.state
	log := cliLogger(stderr)
	st, err := sf.open(ctx, log)
	if err != nil {
		return err
	}
	defer st.Close()
	if len(pos) == 0 {
		pins, err := st.ToolPins(ctx)
		if err != nil {
			return err
		}
		return approvals.WritePins(stdout, pins, o.changed)
	}
	if pos[0] != "accept" || len(pos) != 3 {
		return usageError("usage: portcullis tools accept UPSTREAM TOOL")
	}
	upstream, tool := pos[1], pos[2]
	p, ok, err := st.ToolPin(ctx, upstream, tool)
	if err != nil {
		return err
	}
	if !ok {
		return portcullis.Errorf(portcullis.CodeNotFound, "no pinned tool %q of upstream %q (see portcullis tools)", tool, upstream)
	}
	if p.PendingHash == "" {
		return portcullis.Errorf(portcullis.CodeConflict, "tool %q of upstream %q has no pending change", tool, upstream)
	}
	if err := approvals.WriteToolChange(stdout, p); err != nil {
		return err
	}
	who := o.as
	if who == "" {
		who = os.Getenv("USER")
	}
	if who == "" {
		who = "cli"
	}
	dir, err := sf.dir(true)
	if err != nil {
		return err
	}
	g, err := gate.New(&portcullis.Policy{Version: 1}, gate.WithStore(st), gate.WithLogger(log), gate.WithProtectedPaths(dir))
	if err != nil {
		return err
	}
	if _, err := g.AcceptTool(ctx, upstream, tool, who); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "accepted: calls to %s are decided by the policy again\n", tool)
	return nil
}
