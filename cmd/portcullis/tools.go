package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/internal/linediff"
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
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "UPSTREAM\tTOOL\tSTATE\tFIRST SEEN\tACCEPTED BY")
		for _, p := range pins {
			if p.IsToolSet() {
				continue
			}
			state := "pinned"
			switch {
			case p.Unaccepted():
				state = "NEW (held)"
			case p.PendingHash != "":
				state = "CHANGED (held)"
			case o.changed:
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.Upstream, p.Tool, state, p.FirstSeen.UTC().Format("2006-01-02 15:04"), p.AcceptedBy)
		}
		return tw.Flush()
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
	if p.Unaccepted() {
		fmt.Fprintf(stdout, "%s is a new tool of upstream %s, first offered after its tools were pinned. Its definition:\n%s\n", tool, upstream, strings.Join(indentLines(p.PendingDefinition), "\n"))
	} else {
		fmt.Fprintf(stdout, "The definition of %s (upstream %s) changed:\n%s\n", tool, upstream, definitionDiff(p.Definition, p.PendingDefinition))
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

// definitionDiff shows two canonical JSON definitions, indented, line by
// line: "-" for what was accepted, "+" for the new definition.
func definitionDiff(old, nu json.RawMessage) string {
	var out strings.Builder
	for _, l := range linediff.Diff(strings.Join(indentLines(old), "\n"), strings.Join(indentLines(nu), "\n")) {
		out.WriteString(l.Mark() + " " + l.Text + "\n")
	}
	return out.String()
}

func indentLines(raw json.RawMessage) []string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return []string{string(raw)}
	}
	return strings.Split(buf.String(), "\n")
}
