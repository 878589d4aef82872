package main

import (
	"context"
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
		return approvals.ListPins(ctx, stdout, st, o.changed)
	}
	if pos[0] != "accept" || len(pos) != 3 {
		return usageError("usage: portcullis tools accept UPSTREAM TOOL")
	}
	dir, err := sf.dir(true)
	if err != nil {
		return err
	}
	g, err := gate.New(&portcullis.Policy{Version: 1}, gate.WithStore(st), gate.WithLogger(log), gate.WithProtectedPaths(dir))
	if err != nil {
		return err
	}
	return approvals.AcceptTool(ctx, stdout, st, g, pos[1], pos[2], firstNonEmpty(o.as, os.Getenv("USER"), "cli"))
}
