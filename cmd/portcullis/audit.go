package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/auditlog"
	"github.com/portcullis/portcullis/policy"
)

func runAudit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError("audit needs a subcommand: tail, query, verify, export or prune")
	}
	switch args[0] {
	case "tail":
		return runAuditTail(ctx, args[1:], stdout, stderr)
	case "query":
		return runAuditQuery(ctx, args[1:], stdout, stderr, false)
	case "export":
		return runAuditQuery(ctx, args[1:], stdout, stderr, true)
	case "verify":
		return runAuditVerify(ctx, args[1:], stdout, stderr)
	case "prune":
		return runAuditPrune(ctx, args[1:], stdout, stderr)
	}
	return usageError("unknown audit subcommand %q (want tail, query, verify, export or prune)", args[0])
}

// auditFilters are the query flags shared by query and export.
type auditFilters struct {
	session, agent, tool, outcome, kind string
	since, until                        string
	limit                               int
	newest                              bool
}

func (f *auditFilters) register(fs *flag.FlagSet) {
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

func runAuditQuery(ctx context.Context, args []string, stdout, stderr io.Writer, export bool) error {
	name := "audit query"
	help := "audit query [--session S] [--agent A] [--tool T] [--outcome O] [--kind K] [--since T] [--until T] [--limit N] [--newest] [--json]"
	if export {
		name, help = "audit export", "audit export --format jsonl [filters as for audit query]"
	}
	fs := newFlagSet(name, stderr, help)
	var sf stateFlags
	sf.register(fs)
	var f auditFilters
	f.register(fs)
	asJSON := fs.Bool("json", false, "print JSON lines instead of a table")
	format := fs.String("format", "jsonl", "export format (jsonl)")
	fs.IntVar(&f.limit, "limit", 0, "at most this many rows (query default 100; export default all)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError("%s: unexpected argument %q", name, pos[0])
	}
	if export && *format != "jsonl" {
		return usageError("--format %q: only jsonl is supported", *format)
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
		return printRecords(stdout, recs, *asJSON)
	}
	_, err = auditlog.Export(ctx, st, q, stdout)
	return err
}

func printRecords(w io.Writer, recs []portcullis.AuditRecord, asJSON bool) error {
	if asJSON {
		for _, r := range recs {
			if _, err := fmt.Fprintf(w, "%s\n", r.Body); err != nil {
				return err
			}
		}
		return nil
	}
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

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > max {
		return s[:max-1] + "…"
	}
	return s
}

func runAuditTail(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("audit tail", stderr, "audit tail [-n 20] [-f] [--json]")
	var sf stateFlags
	sf.register(fs)
	n := fs.Int("n", 20, "how many of the newest rows to show")
	follow := fs.Bool("f", false, "keep printing new rows as they are written (until interrupted)")
	asJSON := fs.Bool("json", false, "print JSON lines instead of a table")
	every := fs.Duration("interval", 500*time.Millisecond, "how often -f looks for new rows")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError("audit tail: unexpected argument %q", pos[0])
	}
	if *n < 0 || *every <= 0 {
		return usageError("audit tail: -n must be 0 or more and -interval more than 0")
	}
	st, err := sf.open(ctx, cliLogger(stderr))
	if err != nil {
		return err
	}
	defer st.Close()
	recs, last, err := auditlog.Tail(ctx, st, *n)
	if err != nil {
		return err
	}
	if err := printRecords(stdout, recs, *asJSON); err != nil {
		return err
	}
	if !*follow {
		return nil
	}
	return auditlog.Follow(ctx, st, last, *every, func(recs []portcullis.AuditRecord) error {
		if *asJSON {
			return printRecords(stdout, recs, true)
		}
		return printRows(stdout, recs)
	})
}

// printRows prints table rows without the header, for -f.
func printRows(w io.Writer, recs []portcullis.AuditRecord) error {
	var b strings.Builder
	if err := printRecords(&b, recs, false); err != nil {
		return err
	}
	_, rows, _ := strings.Cut(b.String(), "\n")
	_, err := io.WriteString(w, rows)
	return err
}

// anchorFlag collects --expect SEQ:HASH heads.
type anchorFlag []portcullis.AuditAnchor

func (a *anchorFlag) String() string { return fmt.Sprint(len(*a)) }

func (a *anchorFlag) Set(v string) error {
	seq, hash, ok := strings.Cut(v, ":")
	n, err := strconv.ParseInt(seq, 10, 64)
	if !ok || err != nil || n < 0 || !strings.HasPrefix(hash, "sha256:") {
		return fmt.Errorf("%q: want SEQ:HASH, a row's sequence number and its hash, e.g. 42:sha256:ab12… (as audit verify prints them)", v)
	}
	*a = append(*a, portcullis.AuditAnchor{Seq: n, Hash: hash, From: "--expect " + v})
	return nil
}

func runAuditVerify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("audit verify", stderr, "audit verify [--expect SEQ:HASH]... [--witness URL|FILE]... [--json]")
	var sf stateFlags
	sf.register(fs)
	asJSON := fs.Bool("json", false, "print the result as JSON")
	var anchors anchorFlag
	fs.Var(&anchors, "expect", "a head `SEQ:HASH` kept earlier (audit verify prints it): the log must still hold row SEQ with this hash (repeatable)")
	var witnesses []string
	fs.Func("witness", "check the log against every head this witness kept: an http(s) `URL` or a file (repeatable)", func(s string) error {
		witnesses = append(witnesses, s)
		return nil
	})
	witnessTokenFile := fs.String("witness-token-file", "", "the HTTP witnesses' bearer token, read from this `file`")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError("audit verify: unexpected argument %q", pos[0])
	}
	sources, err := witnessSources(witnesses, *witnessTokenFile, stderr)
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
		Anchors:   anchors,
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
	if *asJSON {
		enc := json.NewEncoder(stdout)
		if err := enc.Encode(v); err != nil {
			return err
		}
	} else if v.OK() {
		from := "the start"
		if cp != nil {
			from = fmt.Sprintf("the signed checkpoint at row %d", cp.Seq)
		}
		kept := ""
		if rep.Kept > 0 {
			kept = fmt.Sprintf("; %d of %d kept heads matched", v.Anchors, rep.Kept)
		}
		fmt.Fprintf(stdout, "ok: %s verified from %s; head %d:%s (keep it to check later with --expect)%s\n", plural(v.Rows, "row"), from, rep.Head(), v.HeadHash, kept)
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

func runAuditPrune(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("audit prune", stderr, "audit prune [--max-age 2160h|90d] [--max-rows N] [--policy FILE]")
	var sf stateFlags
	sf.register(fs)
	maxAge := fs.String("max-age", "", "prune rows older than this (a duration, or days as 90d)")
	maxRows := fs.Int64("max-rows", 0, "keep only the newest this many rows")
	policyFlag := fs.String("policy", "", "take audit.retention from this policy `file` (default $PORTCULLIS_POLICY) when neither --max-age nor --max-rows is given")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError("audit prune: unexpected argument %q", pos[0])
	}
	now := time.Now()
	var cutoff time.Time
	if *maxAge != "" {
		if cutoff, err = parseWhen(*maxAge, now); err != nil {
			return usageError("--max-age: %v", err)
		}
	}
	if *maxAge == "" && *maxRows <= 0 {
		path, err := policyPath(*policyFlag)
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
		*maxRows = r.MaxRows
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
	cp, pruned, err := auditlog.Prune(ctx, st, key, now, auditlog.Retention{Before: cutoff, KeepRows: *maxRows})
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
