package gate

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/portcullis/portcullis"
)

// WriteExplanation writes the decision d of call as `portcullis explain`
// shows it to a person: the verdict first (the tool as called, and its
// canonical name when an alias resolved), the fields that say why, then
// every stage of the trace with the one that decided marked ▶.
func WriteExplanation(w io.Writer, call portcullis.Call, d portcullis.Decision) error {
	var b strings.Builder
	name := d.Tool
	if name != call.Tool {
		name = call.Tool + " (" + d.Tool + ")"
	}
	fmt.Fprintf(&b, "%s → %s, %s\n", name, strings.ToUpper(string(d.Outcome)), d.PermissionLevel)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "  %s\t%s\n", k, v)
		}
	}
	row("reason:", d.Reason)
	row("code:", string(d.Code))
	src := string(d.Source)
	if d.SourceElement != "" {
		src += " — element " + fmt.Sprintf("%q", d.SourceElement)
		if d.MatchedPolicy != "" {
			src += ", " + d.MatchedPolicy + " list"
		}
	}
	row("source:", src)
	if d.Endpoint != "" || d.Risk != "" {
		row("class:", strings.TrimSpace(string(d.Endpoint)+" "+string(d.Risk)))
	}
	for _, c := range d.ConflictingElements {
		row("overridden:", fmt.Sprintf("%q wanted %s", c.Name, c.WantedLevel))
	}
	if bs := d.Budget; bs != nil {
		row("budget:", fmt.Sprintf("%q allows %s: %s used, this call %s; reopens %s", bs.Name, bs.Allows, bs.Used, bs.Cost, bs.ReopensAt.UTC().Format(time.RFC3339)))
	}
	row("to authorize:", d.WhatWouldAuthorize)
	row("challenge:", d.ChallengeID)
	if d.FailClosed {
		row("fail-closed:", "yes: the gate could not decide, so it denied")
	}
	if s := d.Shadow; s != nil {
		row("enforce would:", fmt.Sprintf("%s, %s %s — %s", s.Outcome, s.PermissionLevel, s.Code, s.Reason))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	b.WriteString("\nStages (▶ decided):\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for i, t := range d.Trace {
		lvl := ""
		if t.Level.Valid() {
			lvl = t.Level.String()
		}
		mark := " "
		if t.Decided {
			mark = "▶"
		}
		fmt.Fprintf(tw, "%s %d.\t%s\t%s\t%s\n", mark, i+1, t.Stage, lvl, t.Result)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := io.WriteString(w, b.String())
	return err
}
