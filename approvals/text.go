package approvals

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/portcullis/portcullis"
)

// This file is how the people's commands show requests and grants as text:
// a table of requests, one request in full, a line for each request that
// arrives or is answered while watching, a table of grants. Times in the
// table are ages from now; answers and expiries are local times.

// WriteJSONLines writes each value as one line of JSON, HTML left as it is.
func WriteJSONLines[T any](w io.Writer, vs []T) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, v := range vs {
		if err := enc.Encode(v); err != nil {
			return err
		}
	}
	return nil
}

// WriteTable writes requests as a table, one line each, their ages counted
// to now.
func WriteTable(w io.Writer, list []portcullis.Approval, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tAGE\tAGENT\tSESSION\tLEVEL\tREQUEST")
	for _, a := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.ID, a.Status, Age(now.Sub(a.CreatedAt)), dash(a.Call.Agent), dash(a.Call.Session), a.Level, oneLine(a.Reason, 70))
	}
	return tw.Flush()
}

// WriteDetail writes one request in full, what a person needs to answer
// it, and how to answer it while it is pending.
func WriteDetail(w io.Writer, a portcullis.Approval) error {
	args, err := json.MarshalIndent(a.Call.Args, "  ", "  ")
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "approval %s: %s\n", a.ID, a.Status)
	fmt.Fprintf(w, "  request:  %s\n", a.Reason)
	fmt.Fprintf(w, "  tool:     %s (%s)\n", a.Tool, a.Level)
	fmt.Fprintf(w, "  agent:    %s\n  session:  %s\n", dash(a.Call.Agent), dash(a.Call.Session))
	fmt.Fprintf(w, "  decision: %s\n", a.DecisionID)
	fmt.Fprintf(w, "  asked:    %s\n", a.CreatedAt.Local().Format(time.RFC3339))
	if !a.ExpiresAt.IsZero() && a.Status == portcullis.ApprovalPending {
		fmt.Fprintf(w, "  expires:  %s\n", a.ExpiresAt.Local().Format(time.RFC3339))
	}
	if a.DecidedBy != "" {
		fmt.Fprintf(w, "  answered: %s by %s\n", a.DecidedAt.Local().Format(time.RFC3339), a.DecidedBy)
	}
	if a.DenyReason != "" {
		fmt.Fprintf(w, "  reason:   %s\n", a.DenyReason)
	}
	fmt.Fprintf(w, "  args:     %s\n", args)
	if a.Status == portcullis.ApprovalPending {
		session := ""
		if a.Level == portcullis.ConfirmSession {
			session = " [--session]"
		}
		fmt.Fprintf(w, "answer: portcullis approve %s%s | portcullis deny %s --reason TEXT\n", a.ID, session, a.ID)
	}
	return nil
}

// WriteRound writes what a round of Watch saw, a line for each request
// that arrived and each that was answered, stamped with now's time of day;
// the first round with nothing pending says so. As JSON it writes each
// request as a line of JSON and nothing else.
func WriteRound(w io.Writer, r Round, now time.Time, asJSON bool) error {
	if asJSON {
		if err := WriteJSONLines(w, r.Arrived); err != nil {
			return err
		}
		return WriteJSONLines(w, r.Answered)
	}
	at := now.Format(time.TimeOnly)
	for _, a := range r.Arrived {
		fmt.Fprintf(w, "%s  %s  %s  agent %s, session %s, %s\n", at, a.ID, oneLine(a.Reason, 70), dash(a.Call.Agent), dash(a.Call.Session), a.Level)
	}
	if r.First && len(r.Arrived) == 0 {
		fmt.Fprintln(w, "no pending approval requests; watching (Ctrl-C to stop)")
	}
	for _, a := range r.Answered {
		by := ""
		if a.DecidedBy != "" {
			by = " by " + a.DecidedBy
		}
		fmt.Fprintf(w, "%s  %s  %s%s\n", at, a.ID, a.Status, by)
	}
	return nil
}

// WriteAnswer writes the line that confirms a person's answer: approved
// once or for the call's session, or denied.
func WriteAnswer(w io.Writer, a portcullis.Approval, forSession bool) error {
	if a.Status == portcullis.ApprovalDenied {
		_, err := fmt.Fprintf(w, "denied %s: %s (agent %s)\n", a.ID, oneLine(a.Reason, 80), dash(a.Call.Agent))
		return err
	}
	how := "once"
	if forSession {
		how = "for session " + dash(a.Call.Session)
	}
	_, err := fmt.Fprintf(w, "approved %s %s: %s (agent %s)\n", a.ID, how, oneLine(a.Reason, 80), dash(a.Call.Agent))
	return err
}

// WriteGrants writes grants as a table, one line each.
func WriteGrants(w io.Writer, list []portcullis.Grant) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tTOOL\tSESSION\tBY\tEXPIRES")
	for _, g := range list {
		expires := "never"
		if !g.ExpiresAt.IsZero() {
			expires = g.ExpiresAt.Local().Format(time.RFC3339)
		}
		tool := g.Tool
		if g.ElementType != "" {
			tool += " (" + g.ElementType + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", g.ID, g.Kind, tool, dash(g.Session), dash(g.GrantedBy), expires)
	}
	return tw.Flush()
}

// Age is a duration as the table shows it, in its largest whole unit:
// seconds, minutes, hours, or days from two days on.
func Age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(int(d.Seconds()), 0))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine folds s onto one line, cut to max bytes with an ellipsis.
func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > max {
		return s[:max-1] + "…"
	}
	return s
}
