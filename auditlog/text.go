package auditlog

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/internal/english"
)

// This file is how the audit commands show the log as text: rows as a
// table or as their recorded JSON, a kept head as a person passes it back,
// and what Verify found.

// WriteJSON writes each row's recorded body, one line of JSON each.
func WriteJSON(w io.Writer, recs []portcullis.AuditRecord) error {
	for _, r := range recs {
		if _, err := fmt.Fprintf(w, "%s\n", r.Body); err != nil {
			return err
		}
	}
	return nil
}

// WriteTable writes rows as a table under a header: sequence number, time
// (UTC), outcome (or the kind of a row that is not a decision), level,
// tool, session, agent, code and a one-line detail.
func WriteTable(w io.Writer, recs []portcullis.AuditRecord) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tTIME\tOUTCOME\tLEVEL\tTOOL\tSESSION\tAGENT\tCODE\tDETAIL")
	for _, r := range recs {
		ev, err := r.Event()
		if err != nil {
			return err
		}
		level, code, detail := "", "", ev.Detail
		if d := ev.Decision; d != nil {
			if d.PermissionLevel.Valid() {
				level = d.PermissionLevel.String()
			}
			code = string(d.Code)
			if detail == "" {
				detail = d.Reason
			}
		}
		outcome := string(ev.Outcome)
		if ev.Kind != portcullis.AuditDecision {
			outcome = string(ev.Kind)
			if ev.Actor != "" {
				detail = ev.Actor + ": " + detail
			}
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Seq, ev.Time.UTC().Format(time.RFC3339), dash(outcome), dash(level), dash(ev.Tool), dash(ev.Session), dash(ev.Agent), dash(code), oneLine(detail, 100))
	}
	return tw.Flush()
}

// WriteRows writes rows as WriteTable does, without the header: the rows
// that follow a table already shown, aligned as they would be under one.
func WriteRows(w io.Writer, recs []portcullis.AuditRecord) error {
	var b strings.Builder
	if err := WriteTable(&b, recs); err != nil {
		return err
	}
	_, rows, _ := strings.Cut(b.String(), "\n")
	_, err := io.WriteString(w, rows)
	return err
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

// ParseAnchor reads a head a person kept, SEQ:HASH as Summary prints it
// (42:sha256:ab12…); from says where it came from, for the messages of
// Verify.
func ParseAnchor(v, from string) (portcullis.AuditAnchor, error) {
	seq, hash, ok := strings.Cut(v, ":")
	n, err := strconv.ParseInt(seq, 10, 64)
	if !ok || err != nil || n < 0 || !strings.HasPrefix(hash, "sha256:") {
		return portcullis.AuditAnchor{}, fmt.Errorf("%q: want SEQ:HASH, a row's sequence number and its hash, e.g. 42:sha256:ab12… (as audit verify prints them)", v)
	}
	return portcullis.AuditAnchor{Seq: n, Hash: hash, From: from}, nil
}

// Summary says in one line what a verification that passed covered: the
// rows, where the check started, the head to keep, and how many kept
// heads matched.
func (r *Report) Summary() string {
	v := r.Verification
	from := "the start"
	if r.Checkpoint != nil {
		from = fmt.Sprintf("the signed checkpoint at row %d", r.Checkpoint.Seq)
	}
	kept := ""
	if r.Kept > 0 {
		kept = fmt.Sprintf("; %d of %d kept heads matched", v.Anchors, r.Kept)
	}
	return fmt.Sprintf("ok: %s verified from %s; head %d:%s (keep it to check later with --expect)%s", english.Count(v.Rows, "row"), from, r.Head(), v.HeadHash, kept)
}
