package gate

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/portcullis/portcullis"
)

// audit writes the decision's row durably before the decision is returned:
// a caller forwards an allowed call only after this, so no allowed call is
// ever missing from the log. When the row cannot be written an allowed call
// is denied instead (fail closed); other outcomes stand, with the failure in
// their trace.
func (e *eval) audit(ctx context.Context, start time.Time) {
	st := e.g.store
	ev := portcullis.AuditEvent{
		Kind:        portcullis.AuditDecision,
		Time:        start,
		DecisionID:  e.d.DecisionID,
		Session:     e.c.Session,
		Agent:       e.c.Agent,
		Tool:        e.d.Tool,
		Outcome:     e.d.Outcome,
		Request:     e.redacted(),
		PolicyHash:  e.pol.pol.Hash,
		UserPresent: e.c.UserPresent,
		Validator:   e.verdict,
	}
	// The row says who stated the context, as the gate went by it.
	ev.Request.ContextSource = e.contextSource()
	d := e.d
	d.Trace = slices.Clone(e.d.Trace)
	ev.Decision = &d
	ev.LatencyNS = int64(e.g.clock.Now().Sub(start))
	recs, err := st.AppendAudit(ctx, ev)
	if err != nil || len(recs) != 1 {
		if err == nil {
			err = errAuditShort
		}
		if e.d.Outcome == portcullis.OutcomeAllow {
			e.d.Shadow = nil
			e.failClosed("audit", err)
			e.d.Trace[len(e.d.Trace)-1].Facts = slices.Clone(factsNotRecorded)
			return
		}
		e.d.Trace = append(e.d.Trace, portcullis.TraceEntry{Stage: "audit", Result: "not recorded: " + err.Error(), Level: e.d.PermissionLevel, Facts: slices.Clone(factsNotRecorded)})
		return
	}
	e.d.Trace = append(e.d.Trace, portcullis.TraceEntry{Stage: "audit", Result: "recorded as row " + strconv.FormatInt(recs[0].Seq, 10), Level: e.d.PermissionLevel})
}

// factsNotRecorded marks the audit stage of a decision whose row could not
// be written.
var factsNotRecorded = []portcullis.Fact{portcullis.FactNotRecorded}

var errAuditShort = portcullis.Errorf(portcullis.CodeFailClosed, "the store did not return the audit row")

// redacted returns the request as the audit log keeps it: the values of
// the arguments named by the policy's audit.redact and the tool's redact
// replaced, in the call and in the grants it carries.
func (e *eval) redacted() *portcullis.Call {
	c := *e.c
	names := e.pol.pol.Audit.Redact
	if e.r != nil && len(e.r.redact) > 0 {
		names = slices.Concat(names, e.r.redact)
	}
	if len(names) == 0 {
		return &c
	}
	c.Args = portcullis.RedactArgs(c.Args, names)
	if len(c.Grants) > 0 {
		c.Grants = slices.Clone(c.Grants)
		for i := range c.Grants {
			c.Grants[i].Args = portcullis.RedactArgs(c.Grants[i].Args, names)
		}
	}
	return &c
}
