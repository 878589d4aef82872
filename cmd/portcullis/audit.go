package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/portcullis/portcullis"
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

// parseWhen reads an RFC 3339 time, or a duration ago (Go durations, and
// whole days as "7d").
func parseWhen(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(d)
		if err == nil && n >= 0 {
			return now.Add(-time.Duration(n) * 24 * time.Hour), nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time nor a duration such as 90m, 24h or 7d", s)
	}
	return now.Add(-d), nil
}

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
	// Export pages through everything that matches.
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	total := 0
	page := q
	page.Newest = false
	for {
		page.Limit = 1000
		if q.Limit > 0 && q.Limit-total < page.Limit {
			page.Limit = q.Limit - total
		}
		if page.Limit <= 0 {
			return nil
		}
		recs, err := st.QueryAudit(ctx, page)
		if err != nil {
			return err
		}
		for _, r := range recs {
			line, err := decisionLog(r)
			if err != nil {
				return err
			}
			if err := enc.Encode(line); err != nil {
				return err
			}
		}
		total += len(recs)
		if len(recs) < page.Limit {
			return nil
		}
		page.AfterSeq = recs[len(recs)-1].Seq
	}
}

// decisionLog is one exported row, with the field names of OPA decision
// logs where they overlap (decision_id, timestamp, path, input, result,
// metrics), so existing consumers can read it.
type decisionLogLine struct {
	DecisionID string               `json:"decision_id"`
	Timestamp  string               `json:"timestamp"`
	Path       string               `json:"path"`
	Input      *portcullis.Call     `json:"input,omitempty"`
	Result     *portcullis.Decision `json:"result,omitempty"`
	Metrics    map[string]int64     `json:"metrics,omitempty"`
	Labels     map[string]string    `json:"labels"`
	Portcullis decisionLogExtra     `json:"portcullis"`
}

type decisionLogExtra struct {
	Seq        int64                       `json:"seq"`
	Kind       portcullis.AuditKind        `json:"kind"`
	Hash       string                      `json:"hash"`
	PrevHash   string                      `json:"prev_hash"`
	PolicyHash string                      `json:"policy_hash,omitempty"`
	Session    string                      `json:"session,omitempty"`
	Agent      string                      `json:"agent,omitempty"`
	Actor      string                      `json:"actor,omitempty"`
	Detail     string                      `json:"detail,omitempty"`
	Validator  *portcullis.ValidatorRecord `json:"validator,omitempty"`
}

func decisionLog(r portcullis.AuditRecord) (decisionLogLine, error) {
	ev, err := r.Event()
	if err != nil {
		return decisionLogLine{}, err
	}
	line := decisionLogLine{
		DecisionID: ev.DecisionID,
		Timestamp:  ev.Time.UTC().Format(time.RFC3339Nano),
		Path:       "portcullis/" + string(ev.Kind),
		Input:      ev.Request,
		Result:     ev.Decision,
		Labels:     map[string]string{"app": "portcullis"},
		Portcullis: decisionLogExtra{
			Seq: r.Seq, Kind: ev.Kind, Hash: r.Hash, PrevHash: r.PrevHash, PolicyHash: ev.PolicyHash,
			Session: ev.Session, Agent: ev.Agent, Actor: ev.Actor, Detail: ev.Detail, Validator: ev.Validator,
		},
	}
	if ev.LatencyNS > 0 {
		line.Metrics = map[string]int64{"timer_portcullis_decide_ns": ev.LatencyNS}
	}
	return line, nil
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
	recs, err := st.QueryAudit(ctx, portcullis.AuditQuery{Newest: true, Limit: max(o.lines, 1)})
	if err != nil {
		return err
	}
	var last int64
	if len(recs) > 0 {
		last = recs[0].Seq
	}
	for i, j := 0, len(recs)-1; i < j; i, j = i+1, j-1 {
		recs[i], recs[j] = recs[j], recs[i]
	}
	if o.lines == 0 {
		recs = nil
	}
	if err := printRecords(stdout, recs, o.json); err != nil {
		return err
	}
	if !o.follow {
		return nil
	}
	tick := time.NewTicker(o.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		recs, err := st.QueryAudit(ctx, portcullis.AuditQuery{AfterSeq: last, Limit: 1000})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if len(recs) == 0 {
			continue
		}
		last = recs[len(recs)-1].Seq
		if o.json {
			err = printRecords(stdout, recs, true)
		} else {
			err = printRows(stdout, recs)
		}
		if err != nil {
			return err
		}
	}
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

// checkpointMAC signs a checkpoint with the state directory's audit key.
func checkpointMAC(key string, cp portcullis.AuditCheckpoint) string {
	m := hmac.New(sha256.New, []byte(key))
	fmt.Fprintf(m, "portcullis audit checkpoint\n%d\n%s\n%s", cp.Seq, cp.Hash, cp.Time.UTC().Format(time.RFC3339Nano))
	return "hmac-sha256:" + hex.EncodeToString(m.Sum(nil))
}

// progressLog reports verification progress on long logs.
type progressLog struct {
	portcullis.AuditLog
	w     io.Writer
	every int64
	n     int64
}

func (p *progressLog) ScanAudit(ctx context.Context, after int64, fn func(portcullis.AuditRecord) (bool, error)) error {
	return p.AuditLog.ScanAudit(ctx, after, func(r portcullis.AuditRecord) (bool, error) {
		p.n++
		if p.n%p.every == 0 {
			fmt.Fprintf(p.w, "verified %s (up to row %d)…\n", plural(p.n, "row"), r.Seq)
		}
		return fn(r)
	})
}

// anchorFlag collects --expect SEQ:HASH heads.
type anchorFlag []portcullis.AuditAnchor

func (a *anchorFlag) String() string { return fmt.Sprint(len(*a)) }

func (a *anchorFlag) Type() string { return "anchor" }

func (a *anchorFlag) Set(v string) error {
	seq, hash, ok := strings.Cut(v, ":")
	n, err := strconv.ParseInt(seq, 10, 64)
	if !ok || err != nil || n < 0 || !strings.HasPrefix(hash, "sha256:") {
		return fmt.Errorf("%q: want SEQ:HASH, a row's sequence number and its hash, e.g. 42:sha256:ab12… (as audit verify prints them)", v)
	}
	*a = append(*a, portcullis.AuditAnchor{Seq: n, Hash: hash, From: "--expect " + v})
	return nil
}

func runAuditVerify(ctx context.Context, o *auditVerifyOptions, pos []string, stdout, stderr io.Writer) error {
	sf := &o.state
	if len(pos) > 0 {
		return usageError("audit verify: unexpected argument %q", pos[0])
	}
	st, err := sf.open(ctx, cliLogger(stderr))
	if err != nil {
		return err
	}
	defer st.Close()
	var cp *portcullis.AuditCheckpoint
	c, ok, err := st.AuditCheckpoint(ctx)
	if err != nil {
		return err
	}
	if ok {
		dir, err := sf.dir(false)
		if err != nil {
			return err
		}
		key, err := readSecret(dir, "audit.key")
		if err != nil {
			return &exitError{code: 1, msg: fmt.Sprintf("the log was pruned up to row %d, but its checkpoint cannot be checked: %v", c.Seq, err)}
		}
		if !hmac.Equal([]byte(checkpointMAC(key, c)), []byte(c.Signature)) {
			return &exitError{code: 1, msg: fmt.Sprintf("the checkpoint of the pruned rows (up to row %d) has a bad signature: the log was tampered with", c.Seq)}
		}
		cp = &c
	}
	if len(o.witnesses) > 0 {
		dir, err := sf.dir(false)
		if err != nil {
			return err
		}
		kept, err := witnessAnchors(ctx, o.witnesses, o.witnessTokenFile, dir, stderr)
		if err != nil {
			return err
		}
		o.anchors = append(o.anchors, kept...)
	}
	v, err := portcullis.VerifyAuditAnchors(ctx, &progressLog{AuditLog: st, w: stderr, every: 100000}, cp, o.anchors)
	if err != nil {
		return err
	}
	if o.json {
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
		if len(o.anchors) > 0 {
			kept = fmt.Sprintf("; %d of %d kept heads matched", v.Anchors, len(o.anchors))
		}
		head := v.LastSeq
		if v.Rows == 0 && cp != nil {
			head = cp.Seq
		}
		fmt.Fprintf(stdout, "ok: %s verified from %s; head %d:%s (keep it to check later with --expect)%s\n", plural(v.Rows, "row"), from, head, v.HeadHash, kept)
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
	cp, pruned, err := pruneAudit(ctx, st, key, now, cutoff, o.maxRows)
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

// pruneAudit prunes what the retention settings let go: rows before cutoff
// (when set) and all but the newest maxRows (when more than 0).
func pruneAudit(ctx context.Context, st portcullis.Store, key string, now, cutoff time.Time, maxRows int64) (portcullis.AuditCheckpoint, bool, error) {
	head, err := st.QueryAudit(ctx, portcullis.AuditQuery{Newest: true, Limit: 1})
	if err != nil || len(head) == 0 {
		return portcullis.AuditCheckpoint{}, false, err
	}
	var upTo int64
	if maxRows > 0 && head[0].Seq > maxRows {
		upTo = head[0].Seq - maxRows
	}
	if !cutoff.IsZero() {
		old, err := st.QueryAudit(ctx, portcullis.AuditQuery{Until: cutoff, Newest: true, Limit: 1})
		if err != nil {
			return portcullis.AuditCheckpoint{}, false, err
		}
		if len(old) > 0 && old[0].Seq > upTo {
			upTo = old[0].Seq
		}
	}
	cur, hasCP, err := st.AuditCheckpoint(ctx)
	if err != nil {
		return portcullis.AuditCheckpoint{}, false, err
	}
	if upTo == 0 || (hasCP && upTo <= cur.Seq) {
		return portcullis.AuditCheckpoint{}, false, nil
	}
	row, err := st.QueryAudit(ctx, portcullis.AuditQuery{AfterSeq: upTo - 1, Limit: 1})
	if err != nil {
		return portcullis.AuditCheckpoint{}, false, err
	}
	if len(row) == 0 || row[0].Seq != upTo {
		return portcullis.AuditCheckpoint{}, false, fmt.Errorf("audit row %d is missing: run portcullis audit verify", upTo)
	}
	cp := portcullis.AuditCheckpoint{Seq: upTo, Hash: row[0].Hash, Time: now.UTC()}
	cp.Signature = checkpointMAC(key, cp)
	if err := st.PruneAudit(ctx, cp); err != nil {
		return portcullis.AuditCheckpoint{}, false, err
	}
	return cp, true, nil
}
