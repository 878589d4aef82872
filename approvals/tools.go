package approvals

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/internal/linediff"
)

// A tool whose definition changed since its upstream's tools were pinned,
// or that first appeared after, is held until a person accepts it. This
// file is how the tools command shows the pins and the change a person is
// about to accept.

// WritePins writes the pinned tools as a table: each tool's state (pinned,
// NEW or CHANGED and held), when it was first seen and who accepted it.
// With heldOnly it leaves out the tools that are not held. The pin of an
// upstream's whole tool set is not a tool and is never shown.
func WritePins(w io.Writer, pins []portcullis.ToolPin, heldOnly bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
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
		case heldOnly:
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.Upstream, p.Tool, state, p.FirstSeen.UTC().Format("2006-01-02 15:04"), p.AcceptedBy)
	}
	return tw.Flush()
}

// WriteToolChange writes what accepting a held tool lets through: a new
// tool's definition, or a changed one's line diff, "-" for what was
// accepted and "+" for the new definition, each indented as JSON.
func WriteToolChange(w io.Writer, p portcullis.ToolPin) error {
	if p.Unaccepted() {
		_, err := fmt.Fprintf(w, "%s is a new tool of upstream %s, first offered after its tools were pinned. Its definition:\n%s\n", p.Tool, p.Upstream, indentJSON(p.PendingDefinition))
		return err
	}
	var d strings.Builder
	for _, l := range linediff.Diff(indentJSON(p.Definition), indentJSON(p.PendingDefinition)) {
		d.WriteString(l.Mark() + " " + l.Text + "\n")
	}
	_, err := fmt.Fprintf(w, "The definition of %s (upstream %s) changed:\n%s\n", p.Tool, p.Upstream, d.String())
	return err
}

// indentJSON indents a definition for reading; text that is not JSON is
// shown as it is.
func indentJSON(raw json.RawMessage) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return string(raw)
	}
	return buf.String()
}

// PinStore reads the pinned tools (every Store does).
type PinStore interface {
	ToolPins(ctx context.Context) ([]portcullis.ToolPin, error)
	ToolPin(ctx context.Context, upstream, tool string) (portcullis.ToolPin, bool, error)
}

// ListPins writes the pinned tools of pins as a table (WritePins).
func ListPins(ctx context.Context, w io.Writer, pins PinStore, heldOnly bool) error {
	ps, err := pins.ToolPins(ctx)
	if err != nil {
		return err
	}
	return WritePins(w, ps, heldOnly)
}

// ToolGate is what AcceptTool needs of the gate: accepting a held tool on
// a person's behalf, with its audit row. *gate.Gate is one.
type ToolGate interface {
	AcceptTool(ctx context.Context, upstream, tool, by string) (portcullis.ToolPin, error)
}

// AcceptTool accepts the held definition of upstream's tool as the person
// by, after writing to w what changed (WriteToolChange), and says so.
// Errors carry the codes NOT_FOUND for a tool that is not pinned and
// CONFLICT for one with no change waiting.
func AcceptTool(ctx context.Context, w io.Writer, pins PinStore, g ToolGate, upstream, tool, by string) error {
	p, ok, err := pins.ToolPin(ctx, upstream, tool)
	if err != nil {
		return err
	}
	if !ok {
		return portcullis.Errorf(portcullis.CodeNotFound, "no pinned tool %q of upstream %q (see portcullis tools)", tool, upstream)
	}
	if p.PendingHash == "" {
		return portcullis.Errorf(portcullis.CodeConflict, "tool %q of upstream %q has no pending change", tool, upstream)
	}
	if err := WriteToolChange(w, p); err != nil {
		return err
	}
	if _, err := g.AcceptTool(ctx, upstream, tool, by); err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "accepted: calls to %s are decided by the policy again\n", tool)
	return err
}
