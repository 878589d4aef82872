package loadgen

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/portcullis/portcullis"
)

// Report is what a run measured.
type Report struct {
	Elapsed time.Duration `json:"elapsedNs"`
	// Calls counts every call made; Answered those the gateway answered.
	Calls      int     `json:"calls"`
	Answered   int     `json:"answered"`
	Throughput float64 `json:"throughput"` // answered calls per second
	// Rows are the statistics by entry point and kind, then by kind over
	// both entry points, then "all".
	Rows     []Stats    `json:"rows"`
	Overall  Stats      `json:"overall"`
	Timeline []Snapshot `json:"timeline,omitempty"`
	// Approvals counts the requests the run approved as a person (API
	// writes, and MCP writes the gateway held).
	Approvals int64       `json:"approvals"`
	Audit     *AuditCheck `json:"audit,omitempty"`
	// Answers are every call and what it got.
	Answers []Answer `json:"-"`
}

// Stats describe the calls of one kind (or all of them).
type Stats struct {
	Via  Via    `json:"via,omitempty"`
	Kind string `json:"kind"`
	// Calls counts them; the outcome counts split the answered ones.
	Calls      int `json:"calls"`
	Allow      int `json:"allow"`
	Confirm    int `json:"confirm"`
	Deny       int `json:"deny"`
	Stop       int `json:"stop"`
	Error      int `json:"error"`  // an MCP error result without a decision
	Failed     int `json:"failed"` // no answer at all
	FailClosed int `json:"failClosed"`
	// Approved counts writes a person approved during the call.
	Approved int `json:"approved"`
	// Latency percentiles of the answered calls (a held write's includes
	// its approval).
	P50  time.Duration `json:"p50Ns"`
	P99  time.Duration `json:"p99Ns"`
	P999 time.Duration `json:"p999Ns"`
	Max  time.Duration `json:"maxNs"`
}

func (r *Report) summarize() {
	type key struct {
		via  Via
		kind string
	}
	groups := map[key][]*Answer{}
	for i := range r.Answers {
		a := &r.Answers[i]
		kind := string(a.Kind)
		if a.Approved {
			kind += "+approval"
		}
		groups[key{a.Via, kind}] = append(groups[key{a.Via, kind}], a)
		groups[key{"", string(a.Kind)}] = append(groups[key{"", string(a.Kind)}], a)
		groups[key{"", "all"}] = append(groups[key{"", "all"}], a)
	}
	keys := make([]key, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	order := func(k key) string {
		v := "1" + string(k.via)
		if k.via == "" {
			v = "2"
		}
		if k.kind == "all" {
			v = "3"
		}
		return v + "/" + k.kind
	}
	slices.SortFunc(keys, func(a, b key) int { return strings.Compare(order(a), order(b)) })
	for _, k := range keys {
		s := stats(k.via, k.kind, groups[k])
		if k.kind == "all" {
			r.Overall = s
			continue
		}
		r.Rows = append(r.Rows, s)
	}
	r.Calls = len(r.Answers)
	r.Answered = r.Calls - r.Overall.Failed
	if r.Elapsed > 0 {
		r.Throughput = float64(r.Answered) / r.Elapsed.Seconds()
	}
}

func stats(via Via, kind string, as []*Answer) Stats {
	s := Stats{Via: via, Kind: kind, Calls: len(as)}
	lat := make([]time.Duration, 0, len(as))
	for _, a := range as {
		switch a.Outcome {
		case portcullis.OutcomeAllow:
			s.Allow++
		case portcullis.OutcomeConfirm:
			s.Confirm++
		case portcullis.OutcomeDeny:
			s.Deny++
		case portcullis.OutcomeStop:
			s.Stop++
		case OutcomeError:
			s.Error++
		default:
			s.Failed++
		}
		if a.FailClosed {
			s.FailClosed++
		}
		if a.Approved {
			s.Approved++
		}
		if a.Answered() {
			lat = append(lat, a.Latency)
		}
	}
	slices.Sort(lat)
	s.P50, s.P99, s.P999 = quantile(lat, 0.50), quantile(lat, 0.99), quantile(lat, 0.999)
	if len(lat) > 0 {
		s.Max = lat[len(lat)-1]
	}
	return s
}

// quantile is the nearest-rank quantile of sorted durations.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// AuditCheck is the audit log's account of a run.
type AuditCheck struct {
	// Decisions counts the decisions answered with an ID (every API
	// answer, and every MCP refusal); Found those with an audit row.
	Decisions int `json:"decisions"`
	Found     int `json:"found"`
	// Missing lists answered decisions without a row (at most 20).
	Missing      []string `json:"missing,omitempty"`
	MissingCount int      `json:"missingCount"`
	// Unrecorded counts refusals whose own trace says their row could
	// not be written (the store was down): the gateway told the caller,
	// and nothing was allowed on them.
	Unrecorded int `json:"unrecorded"`
	// MCPAllowed counts MCP calls forwarded (their results carry no
	// decision ID); ShortSessions lists sessions with fewer allow rows
	// than forwarded calls.
	MCPAllowed    int      `json:"mcpAllowed"`
	ShortSessions []string `json:"shortSessions,omitempty"`
	// Rows is the log's length, Verified whether its hash chain holds
	// (and, on SQLite, whether its lookup tables match it).
	Rows     int64  `json:"rows"`
	Verified bool   `json:"verified"`
	Problem  string `json:"problem,omitempty"`
}

// Complete says every answered decision has its row (or declared it had
// none, refusals only) and the chain verifies.
func (c *AuditCheck) Complete() bool {
	return c.MissingCount == 0 && len(c.ShortSessions) == 0 && c.Verified
}

// unrecorded says a decision's trace records that its audit row was not
// written (a refusal, or an allow that became a fail-closed deny).
func unrecorded(d portcullis.Decision) bool {
	return slices.ContainsFunc(d.Trace, func(t portcullis.TraceEntry) bool { return t.Has(portcullis.FactNotRecorded) })
}

// CheckAudit reads the gateway's audit log and checks the run against it:
// every decision answered by ID has its row, every session has at least as
// many allow rows as MCP calls forwarded, and the hash chain verifies.
func (r *Report) CheckAudit(ctx context.Context, log portcullis.AuditLog) (*AuditCheck, error) {
	c := &AuditCheck{}
	want := map[string]bool{}
	mcpAllowed := map[string]int{}
	for _, a := range r.Answers {
		for _, d := range a.Decisions {
			if d.DecisionID == "" {
				continue
			}
			if unrecorded(d) {
				if d.Outcome == portcullis.OutcomeAllow {
					// Never expected: an allow without its row would be
					// a broken promise. Count it as missing.
					want[d.DecisionID] = true
					continue
				}
				c.Unrecorded++
				continue
			}
			want[d.DecisionID] = true
		}
		if a.Via == MCP && a.Outcome == portcullis.OutcomeAllow {
			mcpAllowed[a.Session]++
			c.MCPAllowed++
		}
	}
	c.Decisions = len(want) + c.Unrecorded
	allowRows := map[string]int{}
	err := log.ScanAudit(ctx, 0, func(rec portcullis.AuditRecord) (bool, error) {
		ev, err := rec.Event()
		if err != nil {
			return false, err
		}
		if ev.Kind != portcullis.AuditDecision {
			return true, nil
		}
		if want[ev.DecisionID] {
			c.Found++
			delete(want, ev.DecisionID)
		}
		if ev.Outcome == portcullis.OutcomeAllow && mcpAllowed[ev.Session] > 0 {
			allowRows[ev.Session]++
		}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the audit log: %w", err)
	}
	c.MissingCount = len(want)
	for id := range want {
		if len(c.Missing) < 20 {
			c.Missing = append(c.Missing, id)
		}
	}
	slices.Sort(c.Missing)
	for s, n := range mcpAllowed {
		if allowRows[s] < n {
			c.ShortSessions = append(c.ShortSessions, fmt.Sprintf("%s: %d forwarded, %d allow rows", s, n, allowRows[s]))
		}
	}
	slices.Sort(c.ShortSessions)
	cp, pruned, err := log.AuditCheckpoint(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the audit checkpoint: %w", err)
	}
	var from *portcullis.AuditCheckpoint
	if pruned {
		from = &cp
	}
	v, err := portcullis.VerifyAudit(ctx, log, from)
	if err != nil {
		return nil, fmt.Errorf("verify the audit log: %w", err)
	}
	c.Rows, c.Verified, c.Problem = v.Rows, v.OK(), v.Problem
	// A store whose lookups are tables of its own (SQLite) checks them
	// against the log, as `portcullis audit verify` does: a row the
	// tables miss is hidden from every filtered query.
	if ic, ok := log.(interface {
		CheckAuditIndex(context.Context) (string, error)
	}); ok && c.Verified {
		problem, err := ic.CheckAuditIndex(ctx)
		if err != nil {
			return nil, fmt.Errorf("check the audit log's lookup tables: %w", err)
		}
		if problem != "" {
			c.Verified, c.Problem = false, "the audit log's lookup tables do not match it: "+problem
		}
	}
	r.Audit = c
	return c, nil
}

// WriteTable prints the report as a table.
func (r *Report) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "%d calls in %s, %d answered: %.0f calls/s; %d requests approved as a person\n\n", r.Calls, r.Elapsed.Round(time.Millisecond), r.Answered, r.Throughput, r.Approvals)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "via\tkind\tcalls\tallow\tconfirm\tdeny\tstop\terror\tfailed\tfailClosed\tp50\tp99\tp99.9\tmax\t")
	row := func(s Stats) {
		via := string(s.Via)
		if via == "" {
			via = "both"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t\n", via, s.Kind, s.Calls, s.Allow, s.Confirm, s.Deny, s.Stop, s.Error, s.Failed, s.FailClosed, ms(s.P50), ms(s.P99), ms(s.P999), ms(s.Max))
	}
	for _, s := range r.Rows {
		row(s)
	}
	row(r.Overall)
	if err := tw.Flush(); err != nil {
		return err
	}
	if c := r.Audit; c != nil {
		state := "complete"
		if !c.Complete() {
			state = "INCOMPLETE"
		}
		fmt.Fprintf(w, "\naudit: %s — %d of %d answered decisions have their row", state, c.Found, c.Decisions-c.Unrecorded)
		if c.Unrecorded > 0 {
			fmt.Fprintf(w, " (%d refusals said their row could not be written)", c.Unrecorded)
		}
		fmt.Fprintf(w, "; %d MCP calls forwarded", c.MCPAllowed)
		if len(c.ShortSessions) > 0 {
			fmt.Fprintf(w, ", %d sessions with fewer allow rows", len(c.ShortSessions))
		}
		verified := "the chain verifies"
		if !c.Verified {
			verified = "THE CHAIN DOES NOT VERIFY: " + c.Problem
		}
		fmt.Fprintf(w, "; %d rows, %s\n", c.Rows, verified)
		for _, id := range c.Missing {
			fmt.Fprintf(w, "  missing: %s\n", id)
		}
		for _, s := range c.ShortSessions {
			fmt.Fprintf(w, "  short: %s\n", s)
		}
	}
	return nil
}

// ms formats a latency in milliseconds.
func ms(d time.Duration) string {
	return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
}
