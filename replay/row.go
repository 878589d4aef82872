package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/portcullis/portcullis"
)

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
func (r *worker) replay(ctx context.Context, rec portcullis.AuditRecord) result {
	if !mightBeDecision(rec.Body) {
		return result{}
	}
	row, err := decodeRow(rec.Body)
	if err != nil {
		return result{decision: true, skip: SkipBadRow}
	}
	if row.Kind != portcullis.AuditDecision ||
		(!r.since.IsZero() && row.Time.Before(r.since)) ||
		(!r.until.IsZero() && !row.Time.Before(r.until)) {
		return result{}
	}
	res := result{decision: true}
	old := row.Decision
	switch {
	case row.Request == nil || old == nil:
		res.skip = SkipNoRequest
		return res
	case old.Source == portcullis.SourceDangerZone:
		res.skip = SkipBlock
		return res
	}
	trace := old.trace(row.Request)
	if old.FailClosed && old.Source != portcullis.SourceValidator && !validatorFailed(trace) {
		res.skip = SkipFailed
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
		kind = KindValidator
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
	c := &Change{
		Seq: rec.Seq, Time: row.Time, DecisionID: row.DecisionID, Session: row.Session, Agent: row.Agent, Tool: row.Tool,
		Old: before, New: after, Kind: kind, Change: transition(before, after), Redacted: res.redacted, Notes: notes,
	}
	if kind == KindValidator {
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
func asReplayed(o portcullis.Outcome, l portcullis.Level, code portcullis.Code, src portcullis.Source, elem, reason string) Decision {
	return Decision{Outcome: o, Level: l, Code: code, Source: src, SourceElement: elem, Reason: reason}
}

// compared is the outcome the replay compares: a call allowed by a grant
// is the confirmation that was given (the grant would still cover the same
// level), and a stop of the retry guard is the denial it repeated.
func (d Decision) compared() portcullis.Outcome {
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
func changeKind(a, b Decision) Kind {
	switch ra, rb := outcomeRank[a.compared()], outcomeRank[b.compared()]; {
	case b.Level > a.Level:
		return KindStricter
	case b.Level < a.Level:
		return KindLooser
	case rb > ra:
		return KindStricter
	case rb < ra:
		return KindLooser
	}
	return ""
}

// transition names a change by the compared outcomes and levels, e.g.
// "confirm CONFIRM_SESSION → allow AUTO_APPROVE".
func transition(a, b Decision) string {
	return string(a.compared()) + " " + a.Level.String() + " → " + string(b.compared()) + " " + b.Level.String()
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
