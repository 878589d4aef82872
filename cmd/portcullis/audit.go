package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/auditlog"
	"github.com/portcullis/portcullis/policy"
	"github.com/spf13/pflag"
)

// auditFilters are the query flags shared by query and export.
type auditFilters struct {
	session, agent, tool, outcome, kind string
	since, until                        string
	limit                               int
	newest                              bool
}

func (f *auditFilters) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.session, "session", "", "only this session")
	fs.StringVar(&f.agent, "agent", "", "only this agent")
	fs.StringVar(&f.tool, "tool", "", "only this tool")
	fs.StringVar(&f.outcome, "outcome", "", "only this outcome (allow, confirm, deny, stop)")
	fs.StringVar(&f.kind, "kind", "", "only this kind (decision, approval, unblock, grant, policy, tool)")
	fs.StringVar(&f.since, "since", "", "from this `time` (RFC 3339) or this long ago (90m, 24h, 7d)")
	fs.StringVar(&f.until, "until", "", "before this `time` (RFC 3339) or this long ago")
	fs.BoolVar(&f.newest, "newest", false, "newest rows first")
}

func (f *auditFilters) query(now time.Time) (portcullis.AuditQuery, error) {
	q := portcullis.AuditQuery{Session: f.session, Agent: f.agent, Tool: f.tool, Kind: portcullis.AuditKind(f.kind), Newest: f.newest, Limit: f.limit}
	if f.outcome != "" {
		ok := false
		for _, o := range portcullis.Outcomes {
			ok = ok || string(o) == f.outcome
		}
		if !ok {
			return q, usageError("--outcome %q: want allow, confirm, deny or stop", f.outcome)
		}
		q.Outcome = portcullis.Outcome(f.outcome)
	}
	var err error
	if q.Since, err = parseWhen(f.since, now); err != nil {
		return q, usageError("--since: %v", err)
	}
	if q.Until, err = parseWhen(f.until, now); err != nil {
		return q, usageError("--until: %v", err)
	}
	return q, nil
}

// parseWhen is auditlog.ParseWhen, for the commands that take times.
func parseWhen(s string, now time.Time) (time.Time, error) { return auditlog.ParseWhen(s, now) }

func runAuditQuery(ctx context.Context, o *auditQueryOptions, pos []string, stdout, stderr io.Writer, export bool) error {
	name := "audit query"
	if export {
		name = "audit export"
	}
	sf, f := &o.state, &o.filters
	var err error
	if len(pos) > 0 {
		return usageError("%s: unexpected argument %q", name, pos[0])
	}
	if export && o.format != "jsonl" {
		return usageError("--format %q: only jsonl is supported", o.format)
	}
	q, err := f.query(time.Now())
	if err != nil {
		return err
	}
	st, err := sf.open(ctx, cliLogger(stderr))
	if err != nil {
		return err
	}
	defer st.Close()
	if !export {
		if q.Limit == 0 {
			q.Limit = 100
		}
		recs, err := st.QueryAudit(ctx, q)
		if err != nil {
			return err
		}
		return printRecords(stdout, recs, o.json)
	}
	_, err = auditlog.Export(ctx, st, q, stdout)
	return err
}

func printRecords(w io.Writer, recs []portcullis.AuditRecord, asJSON bool) error {
	if asJSON {
		return auditlog.WriteJSON(w, recs)
	}
	return auditlog.WriteTable(w, recs)
}

func runAuditTail(ctx context.Context, o *auditTailOptions, pos []string, stdout, stderr io.Writer) error {
	sf := &o.state
	if len(pos) > 0 {
		return usageError("audit tail: unexpected argument %q", pos[0])
	}
	if o.lines < 0 || o.interval <= 0 {
		return usageError("audit tail: --lines (-n) must be 0 or more and --interval more than 0")
	}
	st, err := sf.open(ctx, cliLogger(stderr))
	if err != nil {
		return err
	}
	defer st.Close()
	recs, last, err := auditlog.Tail(ctx, st, o.lines)
	if err != nil {
		return err
	}
	if err := printRecords(stdout, recs, o.json); err != nil {
		return err
	}
	if !o.follow {
		return nil
	}
	return auditlog.Follow(ctx, st, last, o.interval, func(recs []portcullis.AuditRecord) error {
		if o.json {
			return printRecords(stdout, recs, true)
		}
		return auditlog.WriteRows(stdout, recs)
	})
}

// anchorFlag collects --expect SEQ:HASH heads.
type anchorFlag []portcullis.AuditAnchor

func (a *anchorFlag) String() string { return fmt.Sprint(len(*a)) }

func (a *anchorFlag) Type() string { return "anchor" }

func (a *anchorFlag) Set(v string) error {
	anchor, err := auditlog.ParseAnchor(v, "--expect "+v)
	if err != nil {
		return err
	}
	*a = append(*a, anchor)
	return nil
}

func runAuditVerify(ctx context.Context, o *auditVerifyOptions, pos []string, stdout, stderr io.Writer) error {
	sf := &o.state
	if len(pos) > 0 {
		return usageError("audit verify: unexpected argument %q", pos[0])
	}
	sources, err := witnessSources(o.witnesses, o.witnessTokenFile, stderr)
	if err != nil {
		return err
	}
	st, err := sf.open(ctx, cliLogger(stderr))
	if err != nil {
		return err
	}
	defer st.Close()
	rep, err := auditlog.Verify(ctx, st, auditlog.VerifyOptions{
		Key: func() (string, error) {
			dir, err := sf.dir(false)
			if err != nil {
				return "", err
			}
			return readSecret(dir, "audit.key")
		},
		Anchors:   o.anchors,
		Witnesses: sources,
		Progress: func(rows, seq int64) {
			fmt.Fprintf(stderr, "verified %s (up to row %d)…\n", plural(rows, "row"), seq)
		},
	})
	var ve *auditlog.VerifyError
	if errors.As(err, &ve) {
		return &exitError{code: 1, msg: ve.Reason}
	}
	if err != nil {
		return err
	}
	v, cp := rep.Verification, rep.Checkpoint
	if o.json {
		enc := json.NewEncoder(stdout)
		if err := enc.Encode(v); err != nil {
			return err
		}
	} else if v.OK() {
		fmt.Fprintln(stdout, rep.Summary())
	}
	if !v.OK() {
		return &exitError{code: 1, msg: fmt.Sprintf("audit log does not verify: row %d: %s", v.BadSeq, v.Problem)}
	}
	if v.Unchecked > 0 {
		fmt.Fprintf(stderr, "warning: %d kept heads are older than the pruned prefix (up to row %d) and could not be checked\n", v.Unchecked, cp.Seq)
		if v.Anchors == 0 {
			return &exitError{code: 1, msg: "none of the kept heads could be checked against the log: all are in its pruned prefix"}
		}
	}
	return nil
}

func runAuditPrune(ctx context.Context, o *auditPruneOptions, pos []string, stdout, stderr io.Writer) error {
	sf := &o.state
	var err error
	if len(pos) > 0 {
		return usageError("audit prune: unexpected argument %q", pos[0])
	}
	now := time.Now()
	var cutoff time.Time
	if o.maxAge != "" {
		if cutoff, err = parseWhen(o.maxAge, now); err != nil {
			return usageError("--max-age: %v", err)
		}
	}
	if o.maxAge == "" && o.maxRows <= 0 {
		path, err := policyPath(o.policy)
		if err != nil {
			return usageError("audit prune needs --max-age, --max-rows, or a policy with audit.retention (--policy FILE)")
		}
		pol, _, err := policy.Load(path)
		if err != nil {
			return &exitError{code: 2, msg: err.Error()}
		}
		r := pol.Audit.Retention
		if r.MaxAge <= 0 && r.MaxRows <= 0 {
			return usageError("%s has no audit.retention; pass --max-age or --max-rows", path)
		}
		if r.MaxAge > 0 {
			cutoff = now.Add(-r.MaxAge)
		}
		o.maxRows = r.MaxRows
	}
	st, err := sf.open(ctx, cliLogger(stderr))
	if err != nil {
		return err
	}
	defer st.Close()
	dir, err := sf.dir(true)
	if err != nil {
		return err
	}
	key, err := secretFile(dir, "audit.key")
	if err != nil {
		return fmt.Errorf("audit key: %w", err)
	}
	cp, pruned, err := auditlog.Prune(ctx, st, key, now, auditlog.Retention{Before: cutoff, KeepRows: o.maxRows})
	if err != nil {
		return err
	}
	if !pruned {
		fmt.Fprintln(stdout, "nothing to prune")
		return nil
	}
	fmt.Fprintf(stdout, "pruned rows up to %d; signed checkpoint kept in their place\n", cp.Seq)
	return nil
}
