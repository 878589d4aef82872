package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/policy"
)

// `portcullis policy replay` re-decides the calls recorded in the audit log
// under a new policy, before anyone deploys it, and reports every decision
// whose outcome or level would change.
//
// The replay gate changes nothing: it has no store (no grant is used, no
// approval, block, run step or audit row is written), every call goes
// through Explain, and no model is called. What a recorded decision owed to
// state rather than to the policy is set aside or carried over:
//
//   - a call allowed by a grant counts as a confirmation (the grant would
//     still cover it at the same level); a stop of the retry guard counts as
//     the denial it repeated;
//   - a decision made by a danger-zone block, or one that failed closed
//     because the store or the audit log failed, is not replayed (counted);
//   - the validator's recorded verdict is replayed; a call the new policy
//     sends to the validator that did not judge it before is shown as if it
//     allowed, and flagged;
//   - an autonomous step is replayed at the step number its trace recorded;
//   - what an MCP gateway knew of an upstream tool (offered, pinned
//     annotations, changed definition) is read back from the route trace.
//
// Redacted arguments are replayed as "[redacted]" and counted: a shell
// command or a path that was redacted cannot be classified again.

// replayDecision is a decision as the replay compares it.
type replayDecision struct {
	Outcome       portcullis.Outcome `json:"outcome"`
	Level         portcullis.Level   `json:"permissionLevel"`
	Code          portcullis.Code    `json:"code,omitempty"`
	Source        portcullis.Source  `json:"source"`
	SourceElement string             `json:"sourceElement,omitempty"`
	Reason        string             `json:"reason,omitempty"`
}

// replayChange is one recorded decision that would change: one JSON line of
// `policy replay --json`.
type replayChange struct {
	Seq        int64          `json:"seq"`
	Time       time.Time      `json:"time"`
	DecisionID string         `json:"decisionId"`
	Session    string         `json:"session,omitempty"`
	Agent      string         `json:"agent,omitempty"`
	Tool       string         `json:"tool"`
	Old        replayDecision `json:"old"`
	New        replayDecision `json:"new"`
	// Kind is stricter, looser, or validator (same outcome and level, but
	// the validator would now be asked and has no recorded verdict).
	Kind string `json:"kind"`
	// Change is the transition, e.g. "confirm CONFIRM_SESSION → allow AUTO_APPROVE".
	Change string `json:"change"`
	// Redacted names the arguments the audit log kept only as "[redacted]".
	Redacted []string `json:"redacted,omitempty"`
	Notes    []string `json:"notes,omitempty"`
}

// replaySummary is the last JSON line of `policy replay --json`.
type replaySummary struct {
	Policy     string    `json:"policy"`
	PolicyHash string    `json:"policyHash"`
	Since      time.Time `json:"since,omitzero"`
	Until      time.Time `json:"until,omitzero"`
	// Scanned is how many audit rows were read; Replayed how many
	// decisions were decided again; Changed how many would change.
	Scanned  int64 `json:"scanned"`
	Replayed int64 `json:"replayed"`
	Changed  int64 `json:"changed"`
	// Stricter, Looser and Validator count the changes by kind; ByChange by
	// transition.
	Stricter  int64            `json:"stricter"`
	Looser    int64            `json:"looser"`
	Validator int64            `json:"validator"`
	ByChange  map[string]int64 `json:"byChange"`
	// NotReplayed counts the decisions set aside, by why.
	NotReplayed map[string]int64 `json:"notReplayed"`
	// Redacted counts the replayed decisions with redacted arguments;
	// RedactedArgs counts them by argument name.
	Redacted     int64            `json:"redacted"`
	RedactedArgs map[string]int64 `json:"redactedArgs"`
	// Unjudged counts the decisions the new policy sends to the validator
	// without a recorded verdict (replayed as if it allowed).
	Unjudged int64 `json:"unjudged"`
	FirstSeq int64 `json:"firstSeq,omitempty"`
	LastSeq  int64 `json:"lastSeq,omitempty"`
}

// Why a recorded decision is not replayed.
const (
	skipBlock     = "decided by a danger-zone block (state, not policy)"
	skipFailed    = "failed closed because the store or the audit log failed"
	skipNoRequest = "no request recorded"
	skipBadRow    = "row does not decode"
)

func runPolicyReplay(ctx context.Context, o *policyReplayOptions, pos []string, stdout, stderr io.Writer) error {
	if len(pos) > 0 {
		return usageError("policy replay: unexpected argument %q (the policy goes in --policy)", pos[0])
	}
	path, err := policyPath(o.policy)
	if err != nil {
		return err
	}
	now := time.Now()
	from, err := parseWhen(o.since, now)
	if err != nil {
		return usageError("--since: %v", err)
	}
	to, err := parseWhen(o.until, now)
	if err != nil {
		return usageError("--until: %v", err)
	}
	pol, warnings, err := policy.Load(path)
	if err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	for _, w := range warnings {
		fmt.Fprintln(stderr, "warning: "+w.String())
	}
	if err := o.state.mustExist(); err != nil {
		return err
	}
	st, err := o.state.open(ctx, cliLogger(stderr))
	if err != nil {
		return err
	}
	defer st.Close()
	dir, err := o.state.dir(false)
	if err != nil {
		return err
	}
	workers := max(1, runtime.GOMAXPROCS(0))
	r := &replayRun{
		sum: replaySummary{
			Policy: path, PolicyHash: pol.Hash, Since: from, Until: to,
			ByChange: map[string]int64{}, NotReplayed: map[string]int64{}, RedactedArgs: map[string]int64{},
		},
		progress: o.progress,
		stderr:   stderr,
	}
	for range workers {
		w, err := newReplayer(pol, dir, from, to)
		if err != nil {
			return &exitError{code: 2, msg: fmt.Sprintf("%s: %v", path, err)}
		}
		r.workers = append(r.workers, w)
	}

	out := bufio.NewWriterSize(stdout, 64<<10)
	var table *tabwriter.Writer
	if o.json {
		enc := json.NewEncoder(out)
		enc.SetEscapeHTML(false)
		r.emit = func(c *replayChange) error { return enc.Encode(c) }
	} else {
		table = tabwriter.NewWriter(&trimSpaces{w: out}, 0, 4, 2, ' ', 0)
		rows := 0
		r.emit = func(c *replayChange) error {
			if rows == 0 {
				fmt.Fprintln(table, "SEQ\tTIME\tAGENT\tSESSION\tTOOL\tOLD\tNEW\tNOTES")
			}
			rows++
			fmt.Fprintf(table, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Seq, c.Time.UTC().Format(time.RFC3339), dash(c.Agent), dash(c.Session),
				c.Tool, decisionCell(c.Old), decisionCell(c.New), strings.Join(c.notes(), "; "))
			// Flush in blocks, so a long report streams rather than
			// waiting for the end of the log.
			if rows%500 == 0 {
				return table.Flush()
			}
			return nil
		}
	}

	start := int64(0)
	if !from.IsZero() {
		recs, err := st.QueryAudit(ctx, portcullis.AuditQuery{Kind: portcullis.AuditDecision, Since: from, Limit: 1})
		if err != nil {
			return err
		}
		if len(recs) == 0 {
			start = -1 // nothing since then
		} else {
			start = recs[0].Seq - 1
		}
	}
	if start >= 0 {
		if err := r.run(ctx, st, start); err != nil {
			return fmt.Errorf("replay the audit log: %w", err)
		}
	}
	if table != nil {
		if err := table.Flush(); err != nil {
			return err
		}
		if r.sum.Changed > 0 {
			fmt.Fprintln(out)
		}
		printReplaySummary(out, &r.sum)
	} else if err := json.NewEncoder(out).Encode(struct {
		Summary *replaySummary `json:"summary"`
	}{&r.sum}); err != nil {
		return err
	}
	if err := out.Flush(); err != nil {
		return err
	}
	if r.sum.Changed > 0 {
		return &exitError{code: 1}
	}
	return nil
}

// mustExist refuses to replay a SQLite audit log that is not there, rather
// than creating an empty store and reporting that nothing would change.
func (s *stateFlags) mustExist() error {
	u, err := s.url()
	if err != nil {
		return err
	}
	if !strings.HasPrefix(u, "sqlite:") {
		return nil
	}
	path := strings.TrimPrefix(strings.TrimPrefix(u, "sqlite://"), "sqlite:")
	if _, err := os.Stat(path); err != nil {
		return &exitError{code: 2, msg: fmt.Sprintf("no audit log to replay: %v (pass --state DIR or --store URL)", err)}
	}
	return nil
}

// replayRun streams the audit log through the replay workers and gathers
// their results in log order.
type replayRun struct {
	workers  []*replayer
	emit     func(*replayChange) error
	sum      replaySummary
	progress int64 // report every this many rows; 0: never
	stderr   io.Writer
}

// replayItem is one audit row on its way through the workers.
type replayItem struct {
	n   int64 // its place in the scan, for putting results back in order
	rec portcullis.AuditRecord
	res replayResult
}

// replayResult is what a worker made of one audit row.
type replayResult struct {
	decision bool   // a decision row in the window
	skip     string // why it was not replayed; "" when it was
	redacted []string
	unjudged bool
	change   *replayChange // nil: no change
}

// maxInFlight bounds the rows read but not yet accounted, whatever the
// workers' speeds: the memory of a replay does not grow with the log.
const maxInFlight = 1024

// run scans the log after row start. One goroutine reads the log, the
// workers decode and re-decide rows (each with its own gate), and the
// results are accounted and emitted in log order. At most maxInFlight
// rows are between the reader and the accounting at any time.
func (r *replayRun) run(ctx context.Context, log portcullis.AuditLog, start int64) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	slots := make(chan struct{}, maxInFlight)
	in := make(chan replayItem, 256)
	out := make(chan replayItem, 256)
	var wg sync.WaitGroup
	for _, w := range r.workers {
		wg.Go(func() {
			for it := range in {
				it.res = w.replay(ctx, it.rec)
				select {
				case out <- it:
				case <-ctx.Done():
					return
				}
			}
		})
	}
	scanned := make(chan error, 1)
	go func() {
		defer close(in)
		n := int64(0)
		scanned <- log.ScanAudit(ctx, start, func(rec portcullis.AuditRecord) (bool, error) {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return false, ctx.Err()
			}
			select {
			case in <- replayItem{n: n, rec: rec}:
				n++
				return true, nil
			case <-ctx.Done():
				return false, ctx.Err()
			}
		})
	}()
	go func() {
		wg.Wait()
		close(out)
	}()

	pending := map[int64]replayItem{}
	next := int64(0)
	var failed error
	for it := range out {
		if failed != nil {
			continue // drain, so the workers can end
		}
		pending[it.n] = it
		for {
			p, ok := pending[next]
			if !ok {
				break
			}
			delete(pending, next)
			next++
			<-slots
			if err := r.account(&p); err != nil {
				failed = err
				cancel()
				break
			}
		}
	}
	if failed != nil {
		return failed
	}
	if err := <-scanned; err != nil {
		return err
	}
	return ctx.Err()
}

// account adds one row's result to the summary and emits its change.
func (r *replayRun) account(it *replayItem) error {
	s := &r.sum
	s.Scanned++
	if r.progress > 0 && s.Scanned%r.progress == 0 {
		fmt.Fprintf(r.stderr, "replayed %s (up to row %d), %s so far…\n", plural(s.Scanned, "row"), it.rec.Seq, plural(s.Changed+changed(it), "change"))
	}
	res := &it.res
	if !res.decision {
		return nil
	}
	if s.FirstSeq == 0 {
		s.FirstSeq = it.rec.Seq
	}
	s.LastSeq = it.rec.Seq
	if res.skip != "" {
		s.NotReplayed[res.skip]++
		return nil
	}
	s.Replayed++
	if len(res.redacted) > 0 {
		s.Redacted++
		for _, n := range res.redacted {
			s.RedactedArgs[n]++
		}
	}
	if res.unjudged {
		s.Unjudged++
	}
	c := res.change
	if c == nil {
		return nil
	}
	s.Changed++
	s.ByChange[c.Change]++
	switch c.Kind {
	case "stricter":
		s.Stricter++
	case "looser":
		s.Looser++
	default:
		s.Validator++
	}
	return r.emit(c)
}

func changed(it *replayItem) int64 {
	if it.res.change != nil {
		return 1
	}
	return 0
}

// replayer re-decides recorded calls, one at a time, under the new
// policy: a gate without a store, whose validator is the recorded verdict.
type replayer struct {
	g            *gate.Gate
	v            *recordedVerdict
	since, until time.Time
}

func newReplayer(pol *portcullis.Policy, stateDir string, since, until time.Time) (*replayer, error) {
	v := &recordedVerdict{}
	// Built like decide's gate (trusted: recorded active elements, grants
	// and run state apply; the same protected paths), with the recorded
	// verdicts standing in for the validator, and no store.
	opts := []gate.Option{gate.WithRequestOverrides(), gate.WithValidator(v)}
	if exe, err := os.Executable(); err == nil {
		opts = append(opts, gate.WithProtectedPaths(exe))
	}
	if stateDir != "" {
		opts = append(opts, gate.WithProtectedPaths(stateDir))
	}
	if home, err := os.UserHomeDir(); err == nil {
		opts = append(opts, gate.WithHomeDir(home))
	}
	g, err := gate.New(pol, opts...)
	if err != nil {
		return nil, err
	}
	return &replayer{g: g, v: v, since: since, until: until}, nil
}

// auditRow is the part of an audit row a replay reads. The recorded
// decision's trace is decoded only when the replay needs it.
type auditRow struct {
	Kind       portcullis.AuditKind        `json:"kind"`
	Time       time.Time                   `json:"time"`
	DecisionID string                      `json:"decisionId"`
	Session    string                      `json:"session"`
	Agent      string                      `json:"agent"`
	Tool       string                      `json:"tool"`
	Request    *portcullis.Call            `json:"request"`
	Decision   *recordedDecision           `json:"decision"`
	Validator  *portcullis.ValidatorRecord `json:"validator"`
}

// recordedDecision is the part of a recorded decision a replay compares.
type recordedDecision struct {
	Outcome         portcullis.Outcome  `json:"outcome"`
	PermissionLevel portcullis.Level    `json:"permissionLevel"`
	Code            portcullis.Code     `json:"code"`
	Reason          string              `json:"reason"`
	Source          portcullis.Source   `json:"source"`
	SourceElement   string              `json:"sourceElement"`
	FailClosed      bool                `json:"failClosed"`
	Endpoint        portcullis.Endpoint `json:"endpoint"`
	Risk            portcullis.Risk     `json:"risk"`
	Trace           json.RawMessage     `json:"trace"`
}

// trace decodes the recorded trace when the replay needs to read it: for
// the run step of an autonomous call the request does not carry, for what
// the route stage knew of an upstream tool, and to tell a validator's
// failure from the store's. The replay reads the entries' facts; a row
// written before traces carried facts has them read from its prose
// (legacyTraceFacts). Most rows need none of this, and decoding the trace
// is much of the cost of a row.
func (d *recordedDecision) trace(c *portcullis.Call) []portcullis.TraceEntry {
	// A quoted word cannot occur inside a string value (its quotes would
	// be escaped), so these find keys and facts, never a result's words.
	structured := bytes.Contains(d.Trace, []byte(`"facts":`))
	need := d.FailClosed ||
		(c.Run != nil && c.Run.Step == 0 && bytes.Contains(d.Trace, []byte(`"stage":"autonomy"`)))
	if !need && structured {
		for _, f := range upstreamFacts {
			need = need || bytes.Contains(d.Trace, f)
		}
	}
	if !need && !structured {
		need = mayHaveLegacyFacts(d.Trace)
	}
	if !need {
		return nil
	}
	var t []portcullis.TraceEntry
	if json.Unmarshal(d.Trace, &t) != nil {
		return nil
	}
	if !structured {
		legacyTraceFacts(t)
	}
	return t
}

// upstreamFacts are the facts of a route stage that knew something of an
// upstream MCP tool, as they appear in a recorded trace.
var upstreamFacts = [][]byte{
	[]byte(`"` + portcullis.FactUpstreamMissing + `"`),
	[]byte(`"` + portcullis.FactUpstreamAnnotated + `"`),
	[]byte(`"` + portcullis.FactDefinitionChanged + `"`),
}

func decodeRow(body []byte) (auditRow, error) {
	var row auditRow
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber() // arguments keep their exact numbers, so digests match
	err := dec.Decode(&row)
	return row, err
}

// replay replays one audit row.
func (r *replayer) replay(ctx context.Context, rec portcullis.AuditRecord) replayResult {
	if !mightBeDecision(rec.Body) {
		return replayResult{}
	}
	row, err := decodeRow(rec.Body)
	if err != nil {
		return replayResult{decision: true, skip: skipBadRow}
	}
	if row.Kind != portcullis.AuditDecision ||
		(!r.since.IsZero() && row.Time.Before(r.since)) ||
		(!r.until.IsZero() && !row.Time.Before(r.until)) {
		return replayResult{}
	}
	res := replayResult{decision: true}
	old := row.Decision
	switch {
	case row.Request == nil || old == nil:
		res.skip = skipNoRequest
		return res
	case old.Source == portcullis.SourceDangerZone:
		res.skip = skipBlock
		return res
	}
	trace := old.trace(row.Request)
	if old.FailClosed && old.Source != portcullis.SourceValidator && !validatorFailed(trace) {
		res.skip = skipFailed
		return res
	}
	call, notes := replayCall(&row, trace)
	res.redacted = redactedArgs(call.Args)
	r.v.set(row.Validator)
	d, err := r.g.Explain(ctx, call)
	if err != nil {
		notes = append(notes, "not decidable under the new policy: "+err.Error())
	}
	res.unjudged = r.v.unjudged

	before := asReplayed(old.Outcome, old.PermissionLevel, old.Code, old.Source, old.SourceElement, old.Reason)
	after := asReplayed(d.Outcome, d.PermissionLevel, d.Code, d.Source, d.SourceElement, d.Reason)
	kind := changeKind(before, after)
	if kind == "" && res.unjudged {
		kind = "validator"
	}
	if kind == "" {
		return res
	}
	if res.unjudged {
		notes = append(notes, "the validator would now judge this call; it has no recorded verdict, so it is shown as if it allowed")
	}
	if call.Run != nil && call.Run.PreviousOutcome == "" {
		notes = append(notes, "the run's previous step outcome is kept in the store, not in the audit log: replayed without it")
	}
	c := &replayChange{
		Seq: rec.Seq, Time: row.Time, DecisionID: row.DecisionID, Session: row.Session, Agent: row.Agent, Tool: row.Tool,
		Old: before, New: after, Kind: kind, Change: transition(before, after), Redacted: res.redacted, Notes: notes,
	}
	if kind == "validator" {
		c.Change = string(after.compared()) + " " + after.Level.String() + ", now judged by the validator"
	}
	res.change = c
	return res
}

// mightBeDecision skips the rows of human actions without decoding them:
// a row's body is the event's canonical JSON, which starts with its kind.
func mightBeDecision(body []byte) bool {
	const kind, decision = `{"kind":"`, `{"kind":"decision"`
	if len(body) < len(decision) || string(body[:len(kind)]) != kind {
		return true // not in the canonical form: decode it to tell
	}
	return string(body[:len(decision)]) == decision
}

// validatorFailed reports whether a fail-closed decision was the
// validator's (no verdict) rather than the store's.
func validatorFailed(trace []portcullis.TraceEntry) bool {
	for _, t := range trace {
		if t.Stage == "validator" && t.Has(portcullis.FactNoVerdict) {
			return true
		}
	}
	return false
}

// asReplayed is a decision as the report shows it: as recorded.
func asReplayed(o portcullis.Outcome, l portcullis.Level, code portcullis.Code, src portcullis.Source, elem, reason string) replayDecision {
	return replayDecision{Outcome: o, Level: l, Code: code, Source: src, SourceElement: elem, Reason: reason}
}

// compared is the outcome the replay compares: a call allowed by a grant
// is the confirmation that was given (the grant would still cover the same
// level), and a stop of the retry guard is the denial it repeated.
func (d replayDecision) compared() portcullis.Outcome {
	switch {
	case d.Source == portcullis.SourceSessionGrant && d.Outcome == portcullis.OutcomeAllow:
		return portcullis.OutcomeConfirm
	case d.Source == portcullis.SourceRetryGuard:
		return portcullis.OutcomeDeny
	}
	return d.Outcome
}

var outcomeRank = map[portcullis.Outcome]int{
	portcullis.OutcomeAllow: 0, portcullis.OutcomeConfirm: 1, portcullis.OutcomeDeny: 2, portcullis.OutcomeStop: 3,
}

// changeKind is "" when the outcome and the level stay, else stricter or
// looser (by level first, then by outcome).
func changeKind(a, b replayDecision) string {
	switch ra, rb := outcomeRank[a.compared()], outcomeRank[b.compared()]; {
	case b.Level > a.Level:
		return "stricter"
	case b.Level < a.Level:
		return "looser"
	case rb > ra:
		return "stricter"
	case rb < ra:
		return "looser"
	}
	return ""
}

// transition names a change by the compared outcomes and levels, e.g.
// "confirm CONFIRM_SESSION → allow AUTO_APPROVE".
func transition(a, b replayDecision) string {
	return string(a.compared()) + " " + a.Level.String() + " → " + string(b.compared()) + " " + b.Level.String()
}

// decisionCell shows a decision in the table as recorded: "deny DENY
// (ELEMENT_POLICY_VIOLATION, Lock)", "allow CONFIRM_SESSION (granted)".
func decisionCell(d replayDecision) string {
	s := string(d.Outcome) + " " + d.Level.String()
	var why []string
	if d.Code != "" && d.Code != portcullis.CodeConfirmationRequired {
		why = append(why, string(d.Code))
	}
	if d.Source == portcullis.SourceSessionGrant {
		why = append(why, "granted")
	}
	if d.SourceElement != "" {
		why = append(why, d.SourceElement)
	}
	if d.Source == portcullis.SourceMode {
		why = append(why, "mode")
	}
	if len(why) > 0 {
		s += " (" + strings.Join(why, ", ") + ")"
	}
	return s
}

func (c *replayChange) notes() []string {
	out := c.Notes
	if len(c.Redacted) > 0 {
		out = append([]string{"redacted: " + strings.Join(c.Redacted, ", ")}, out...)
	}
	return out
}

// redactedArgs names the arguments the audit log kept only as "[redacted]".
func redactedArgs(args map[string]any) []string {
	var out []string
	for k, v := range args {
		if s, ok := v.(string); ok && s == portcullis.RedactedValue {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// replayCall rebuilds the call as the gate saw it from its audit row: the
// recorded request, the run step the store supplied, and what an MCP
// gateway knew of the upstream tool (neither is part of the request).
func replayCall(row *auditRow, trace []portcullis.TraceEntry) (portcullis.Call, []string) {
	c := *row.Request
	var notes []string
	for _, t := range trace {
		switch t.Stage {
		case "autonomy":
			if c.Run == nil || c.Run.Step > 0 || t.Step <= 0 || !t.Has(portcullis.FactRunStateFromStore) {
				continue
			}
			run := *c.Run
			run.Step = t.Step
			c.Run = &run
		case "route":
			if u := upstreamFromTrace(t, row.Decision.Endpoint, row.Decision.Risk); u != nil {
				c.Upstream = u
			}
		}
	}
	return c, notes
}

// upstreamFromTrace reads what the MCP gateway knew of the tool from the
// recorded route stage's facts and the decision's classification.
func upstreamFromTrace(t portcullis.TraceEntry, ep portcullis.Endpoint, risk portcullis.Risk) *portcullis.UpstreamTool {
	if t.Has(portcullis.FactUpstreamMissing) {
		return &portcullis.UpstreamTool{Offered: false}
	}
	u := &portcullis.UpstreamTool{Offered: true, Server: t.Upstream,
		Changed: t.Has(portcullis.FactDefinitionChanged),
		New:     t.Has(portcullis.FactToolNew),
	}
	known := u.Changed || u.New
	if t.Has(portcullis.FactUpstreamAnnotated) {
		// Only a trusted upstream's annotations classify a tool.
		u.Annotated, u.Trusted = true, true
		u.ReadOnly = ep == portcullis.Read
		u.Destructive = ep == portcullis.Delete
		u.OpenWorld = risk == portcullis.RiskExternalWrite
		known = true
	}
	if t.Has(portcullis.FactDestructiveHint) {
		u.Annotated, u.Destructive, known = true, true, true
	}
	if t.Has(portcullis.FactOpenWorldHint) {
		u.Annotated, u.OpenWorld, known = true, true, true
	}
	if !known {
		return nil
	}
	return u
}

// The prose of traces written before trace entries carried facts, as the
// gate wrote it then. Only legacyTraceFacts and mayHaveLegacyFacts read it.
const (
	legacyNoUpstream = "no upstream server offers a tool named "
	legacyAnnotated  = "(MCP annotations of upstream "
	legacyChanged    = "definition changed since it was pinned"
	legacyNoVerdict  = "no verdict"
)

var (
	legacyStepFromStore = regexp.MustCompile(`^(?:continue|pause|stop): .*\bstep (\d+) \(run state from the store\)`)
	legacyUpstreamOf    = regexp.MustCompile(`\(MCP annotations of upstream ("(?:[^"\\]|\\.)*"), pinned\)`)
)

// mayHaveLegacyFacts reports whether a trace without facts has the words
// of a route stage that knew something of an upstream MCP tool.
func mayHaveLegacyFacts(trace []byte) bool {
	for _, m := range []string{legacyNoUpstream, legacyAnnotated, legacyChanged} {
		if bytes.Contains(trace, []byte(m)) {
			return true
		}
	}
	return false
}

// legacyTraceFacts fills in the facts of a trace written before trace
// entries carried them, from the entries' prose: an audit log keeps its
// old rows, and they replay as they did. It is the only place that reads
// a trace's prose; a trace with facts is never read this way.
func legacyTraceFacts(trace []portcullis.TraceEntry) {
	for i := range trace {
		t := &trace[i]
		switch t.Stage {
		case "route":
			switch {
			case strings.HasPrefix(t.Result, legacyNoUpstream):
				t.Facts = append(t.Facts, portcullis.FactUpstreamMissing)
				continue
			case strings.Contains(t.Result, legacyAnnotated):
				t.Facts = append(t.Facts, portcullis.FactUpstreamAnnotated)
				if m := legacyUpstreamOf.FindStringSubmatch(t.Result); m != nil {
					if s, err := strconv.Unquote(m[1]); err == nil {
						t.Upstream = s
					}
				}
			}
			if strings.Contains(t.Result, legacyChanged) {
				t.Facts = append(t.Facts, portcullis.FactDefinitionChanged)
			}
		case "validator":
			if strings.HasPrefix(t.Result, legacyNoVerdict) {
				t.Facts = append(t.Facts, portcullis.FactNoVerdict)
			}
		case "autonomy":
			if m := legacyStepFromStore.FindStringSubmatch(t.Result); m != nil {
				if n, err := strconv.Atoi(m[1]); err == nil {
					t.Step = n
					t.Facts = append(t.Facts, portcullis.FactRunStateFromStore)
				}
			}
		}
	}
}

// trimSpaces drops the spaces at the ends of lines: the padding tabwriter
// leaves after a last column that is empty.
type trimSpaces struct {
	w      io.Writer
	spaces int
}

func (t *trimSpaces) Write(p []byte) (int, error) {
	out := make([]byte, 0, len(p))
	for _, c := range p {
		switch c {
		case ' ':
			t.spaces++
			continue
		case '\n':
			t.spaces = 0
		default:
			for ; t.spaces > 0; t.spaces-- {
				out = append(out, ' ')
			}
		}
		out = append(out, c)
	}
	if _, err := t.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// recordedVerdict stands in for the validator during a replay: it gives
// the verdict recorded with the decision, and never calls a model. Asked
// about a call with no recorded verdict, it allows (an allow never lowers
// a level) and says so.
type recordedVerdict struct {
	rec      *portcullis.ValidatorRecord
	unjudged bool
}

func (v *recordedVerdict) set(rec *portcullis.ValidatorRecord) { v.rec, v.unjudged = rec, false }

func (v *recordedVerdict) Validate(context.Context, portcullis.ValidationRequest) (portcullis.Verdict, error) {
	rec := v.rec
	switch {
	case rec == nil || (rec.Verdict != "allow" && rec.Verdict != "deny"):
		v.unjudged = true
		return portcullis.Verdict{Allow: true, Confidence: 1, Reasoning: "replay: no recorded verdict for this call"}, nil
	case rec.FailClosed:
		return portcullis.Verdict{FailClosed: true, Reasoning: "replay: the recorded validator call gave no verdict"}, nil
	}
	return portcullis.Verdict{Allow: rec.Verdict == "allow", Confidence: rec.Confidence, Provider: rec.Provider, Model: rec.Model,
		Reasoning: "replay: the recorded verdict (" + rec.Verdict + ")"}, nil
}

func printReplaySummary(w io.Writer, s *replaySummary) {
	rows := "no decisions"
	if s.FirstSeq > 0 {
		rows = fmt.Sprintf("rows %d-%d", s.FirstSeq, s.LastSeq)
	}
	fmt.Fprintf(w, "Replayed %s (%s of %s read) under %s: %d would change", plural(s.Replayed, "decision"), rows, plural(s.Scanned, "audit row"), s.Policy, s.Changed)
	if s.Changed > 0 {
		fmt.Fprintf(w, " (%d stricter, %d looser", s.Stricter, s.Looser)
		if s.Validator > 0 {
			fmt.Fprintf(w, ", %d newly judged by the validator", s.Validator)
		}
		fmt.Fprint(w, ")")
	}
	fmt.Fprintln(w)
	for _, k := range sortedByCount(s.ByChange) {
		fmt.Fprintf(w, "  %6d  %s\n", s.ByChange[k], k)
	}
	if s.Redacted > 0 {
		names := sortedByCount(s.RedactedArgs)
		for i, n := range names {
			names[i] = fmt.Sprintf("%s ×%d", n, s.RedactedArgs[n])
		}
		fmt.Fprintf(w, "%s had redacted arguments (%s): they were replayed with %q in their place, so a redacted shell command or path was not classified again\n",
			plural(s.Redacted, "decision"), strings.Join(names, ", "), portcullis.RedactedValue)
	}
	if s.Unjudged > 0 {
		fmt.Fprintf(w, "%s would now go to the validator, which has no recorded verdict for them: shown as if it allowed\n", plural(s.Unjudged, "call"))
	}
	for _, k := range sortedByCount(s.NotReplayed) {
		fmt.Fprintf(w, "%s not replayed: %s\n", plural(s.NotReplayed[k], "decision"), k)
	}
}

func sortedByCount(m map[string]int64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if m[a] != m[b] {
			if m[a] > m[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	return keys
}
