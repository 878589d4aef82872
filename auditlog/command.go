package auditlog

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/internal/english"
)

// This file is what the audit commands do with the options a person
// gives them: which rows to show, the newest rows and new ones as they
// come, the heads kept to check against, what a verification found, what
// a prune did.

// Filter selects audit rows as a person names them (audit query and
// export): by session, agent, tool, outcome, kind, and between two times,
// each an RFC 3339 time or how long ago (ParseWhen); "" is any.
type Filter struct {
	Session, Agent, Tool, Outcome, Kind string
	Since, Until                        string
	// Limit is at most this many rows (0: the command's default).
	Limit int
	// Newest lists the newest rows first.
	Newest bool
}

// Query returns the filter as a query of the log, with the times read
// relative to now.
func (f Filter) Query(now time.Time) (portcullis.AuditQuery, error) {
	q := portcullis.AuditQuery{Session: f.Session, Agent: f.Agent, Tool: f.Tool, Kind: portcullis.AuditKind(f.Kind), Newest: f.Newest, Limit: f.Limit}
	if f.Outcome != "" {
		ok := false
		for _, o := range portcullis.Outcomes {
			ok = ok || string(o) == f.Outcome
		}
		if !ok {
			return q, fmt.Errorf("--outcome %q: want allow, confirm, deny or stop", f.Outcome)
		}
		q.Outcome = portcullis.Outcome(f.Outcome)
	}
	var err error
	if q.Since, err = ParseWhen(f.Since, now); err != nil {
		return q, fmt.Errorf("--since: %v", err)
	}
	if q.Until, err = ParseWhen(f.Until, now); err != nil {
		return q, fmt.Errorf("--until: %v", err)
	}
	return q, nil
}

// WriteQuery writes the rows q selects (at most 100 when q sets no limit)
// as WriteRecords does.
func WriteQuery(ctx context.Context, log portcullis.AuditLog, q portcullis.AuditQuery, asJSON bool, w io.Writer) error {
	if q.Limit == 0 {
		q.Limit = 100
	}
	recs, err := log.QueryAudit(ctx, q)
	if err != nil {
		return err
	}
	return WriteRecords(w, recs, asJSON)
}

// WriteRecords writes rows as their recorded JSON lines (WriteJSON) or as
// a table (WriteTable).
func WriteRecords(w io.Writer, recs []portcullis.AuditRecord, asJSON bool) error {
	if asJSON {
		return WriteJSON(w, recs)
	}
	return WriteTable(w, recs)
}

// TailOptions are what audit tail shows: the newest Lines rows, as JSON
// lines or a table, and with Follow the new rows as they are written,
// looked for every Interval.
type TailOptions struct {
	Lines        int
	Follow, JSON bool
	Interval     time.Duration
}

// WriteTail writes the newest rows and, with o.Follow, each new row (under
// the table already shown) until ctx ends.
func WriteTail(ctx context.Context, log portcullis.AuditLog, o TailOptions, w io.Writer) error {
	recs, last, err := Tail(ctx, log, o.Lines)
	if err != nil {
		return err
	}
	if err := WriteRecords(w, recs, o.JSON); err != nil {
		return err
	}
	if !o.Follow {
		return nil
	}
	return Follow(ctx, log, last, o.Interval, func(recs []portcullis.AuditRecord) error {
		if o.JSON {
			return WriteJSON(w, recs)
		}
		return WriteRows(w, recs)
	})
}

// Anchors are the heads a person kept, given as --expect SEQ:HASH, one a
// flag (a flag value: String, Set, Type).
type Anchors []portcullis.AuditAnchor

func (a *Anchors) String() string { return fmt.Sprint(len(*a)) }

// Type names the flag's value in usage.
func (a *Anchors) Type() string { return "anchor" }

// Set adds the head v (ParseAnchor).
func (a *Anchors) Set(v string) error {
	anchor, err := ParseAnchor(v, "--expect "+v)
	if err != nil {
		return err
	}
	*a = append(*a, anchor)
	return nil
}

// Progress returns a VerifyOptions.Progress that tells w how far the
// check has come.
func Progress(w io.Writer) func(rows, seq int64) {
	return func(rows, seq int64) {
		fmt.Fprintf(w, "verified %s (up to row %d)…\n", english.Count(rows, "row"), seq)
	}
}

// Write writes what the verification found: the Verification as JSON, or
// the Summary of a log that verifies; and to warn, that kept heads could
// not be checked because they are older than the pruned prefix. It
// returns a *VerifyError when the log does not verify, or when none of
// the kept heads could be checked. A chain that verifies while the store's
// lookup tables do not match it (Report.Index) is a *VerifyError too,
// after its JSON.
func (r *Report) Write(w, warn io.Writer, asJSON bool) error {
	v := r.Verification
	if asJSON {
		if err := json.NewEncoder(w).Encode(v); err != nil {
			return err
		}
	} else if r.OK() {
		fmt.Fprintln(w, r.Summary())
	}
	if !v.OK() {
		return failf("audit log does not verify: row %d: %s", v.BadSeq, v.Problem)
	}
	if r.Index != "" {
		return failf("audit log's lookup tables do not match it: %s", r.Index)
	}
	if v.Unchecked > 0 {
		fmt.Fprintf(warn, "warning: %d kept heads are older than the pruned prefix (up to row %d) and could not be checked\n", v.Unchecked, r.Checkpoint.Seq)
		if v.Anchors == 0 {
			return failf("none of the kept heads could be checked against the log: all are in its pruned prefix")
		}
	}
	return nil
}

// RetentionFor is what audit prune lets go: the rows older than maxAge
// (as ParseWhen reads it, before now) and all but the newest maxRows; or,
// when neither is given, what the policy's audit.retention keeps, which
// policy returns with the name of the policy's file.
func RetentionFor(maxAge string, maxRows int64, now time.Time, policy func() (portcullis.AuditRetention, string, error)) (Retention, error) {
	r := Retention{KeepRows: maxRows}
	var err error
	if r.Before, err = ParseWhen(maxAge, now); err != nil {
		return r, fmt.Errorf("--max-age: %v", err)
	}
	if maxAge != "" || maxRows > 0 {
		return r, nil
	}
	kept, file, err := policy()
	if err != nil {
		return r, err
	}
	if kept.MaxAge <= 0 && kept.MaxRows <= 0 {
		return r, fmt.Errorf("%s has no audit.retention; pass --max-age or --max-rows", file)
	}
	r = Retention{KeepRows: kept.MaxRows}
	if kept.MaxAge > 0 {
		r.Before = now.Add(-kept.MaxAge)
	}
	return r, nil
}

// WritePruned says what Prune did: nothing, or up to which row it pruned.
func WritePruned(w io.Writer, cp portcullis.AuditCheckpoint, pruned bool) error {
	if !pruned {
		_, err := fmt.Fprintln(w, "nothing to prune")
		return err
	}
	_, err := fmt.Fprintf(w, "pruned rows up to %d; signed checkpoint kept in their place\n", cp.Seq)
	return err
}
