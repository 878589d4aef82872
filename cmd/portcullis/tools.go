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
	a, b := indentLines(old), indentLines(nu)
	// Longest common subsequence of lines: definitions are small.
	n, m := len(a), len(b)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out strings.Builder
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && a[i] == b[j]:
			out.WriteString("  " + a[i] + "\n")
			i, j = i+1, j+1
		case j < m && (i == n || lcs[i][j+1] >= lcs[i+1][j]):
			out.WriteString("+ " + b[j] + "\n")
			j++
		default:
			out.WriteString("- " + a[i] + "\n")
			i++
		}
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
