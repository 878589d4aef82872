// Package auditlog works with a store's audit log from outside the gate:
// it reads the newest rows and follows new ones (Tail, Follow), exports
// rows as decision logs (Export), verifies the chain against the signed
// checkpoint of a pruned prefix and against heads kept outside the log
// (Verify), and prunes behind a signed checkpoint (Prune). It signs
// checkpoints and published heads with the audit key, and writes rows and
// what Verify found as the audit commands show them (text.go).
//
// It never writes an audit row and is never on the decision path. It
// imports only the root package; the stores, the witnesses and the key
// are handed to it.
package auditlog

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/portcullis/portcullis"
)

// ParseWhen reads a point in time: an RFC 3339 time, or how long before
// now as a Go duration (90m, 24h) or whole days (7d). "" is the zero time.
func ParseWhen(s string, now time.Time) (time.Time, error) {
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

// Tail returns the newest n rows of the log, oldest first, and the
// sequence number of the newest row (0 for an empty log), from which
// Follow continues. n is 0 or more.
func Tail(ctx context.Context, log portcullis.AuditLog, n int) ([]portcullis.AuditRecord, int64, error) {
	recs, err := log.QueryAudit(ctx, portcullis.AuditQuery{Newest: true, Limit: max(n, 1)})
	if err != nil {
		return nil, 0, err
	}
	var last int64
	if len(recs) > 0 {
		last = recs[0].Seq
	}
	slices.Reverse(recs)
	if n == 0 {
		recs = nil
	}
	return recs, last, nil
}

// followPage bounds the rows Follow reads at once.
const followPage = 1000

// Follow looks for rows after the row after every interval and hands the
// new ones to fn, in order, until ctx ends (then it returns nil) or fn or
// the log fails.
func Follow(ctx context.Context, log portcullis.AuditLog, after int64, every time.Duration, fn func([]portcullis.AuditRecord) error) error {
	if every <= 0 {
		return fmt.Errorf("auditlog: follow interval %s: want more than 0", every)
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		recs, err := log.QueryAudit(ctx, portcullis.AuditQuery{AfterSeq: after, Limit: followPage})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if len(recs) == 0 {
			continue
		}
		after = recs[len(recs)-1].Seq
		if err := fn(recs); err != nil {
			return err
		}
	}
}

// exportPage bounds the rows Export reads at once.
const exportPage = 1000

// Export writes every row that q matches to w as decision-log lines (one
// JSON object a line, see DecisionLogLine), in sequence order whatever
// q.Newest says, at most q.Limit rows when it is more than 0. It returns
// how many rows it wrote.
func Export(ctx context.Context, log portcullis.AuditLog, q portcullis.AuditQuery, w io.Writer) (int, error) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	total := 0
	page := q
	page.Newest = false
	for {
		page.Limit = exportPage
		if q.Limit > 0 && q.Limit-total < page.Limit {
			page.Limit = q.Limit - total
		}
		if page.Limit <= 0 {
			return total, nil
		}
		recs, err := log.QueryAudit(ctx, page)
		if err != nil {
			return total, err
		}
		for _, r := range recs {
			line, err := DecisionLog(r)
			if err != nil {
				return total, err
			}
			if err := enc.Encode(line); err != nil {
				return total, err
			}
			total++
		}
		if len(recs) < page.Limit {
			return total, nil
		}
		page.AfterSeq = recs[len(recs)-1].Seq
	}
}

// DecisionLogLine is one exported row, with the field names of OPA
// decision logs where they overlap (decision_id, timestamp, path, input,
// result, metrics, labels), so existing consumers can read it; what is
// Portcullis's own is under "portcullis".
type DecisionLogLine struct {
	DecisionID string               `json:"decision_id"`
	Timestamp  string               `json:"timestamp"`
	Path       string               `json:"path"`
	Input      *portcullis.Call     `json:"input,omitempty"`
	Result     *portcullis.Decision `json:"result,omitempty"`
	Metrics    map[string]int64     `json:"metrics,omitempty"`
	Labels     map[string]string    `json:"labels"`
	Portcullis DecisionLogRow       `json:"portcullis"`
}

// DecisionLogRow is what a decision-log line carries of the audit row
// beyond the decision log's own fields: where the row sits in the chain,
// and who and what it concerns.
type DecisionLogRow struct {
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

// DecisionLog returns the decision-log line of one audit row. Its path is
// "portcullis/" and the row's kind; a decision's latency is the metric
// timer_portcullis_decide_ns.
func DecisionLog(r portcullis.AuditRecord) (DecisionLogLine, error) {
	ev, err := r.Event()
	if err != nil {
		return DecisionLogLine{}, err
	}
	line := DecisionLogLine{
		DecisionID: ev.DecisionID,
		Timestamp:  ev.Time.UTC().Format(time.RFC3339Nano),
		Path:       "portcullis/" + string(ev.Kind),
		Input:      ev.Request,
		Result:     ev.Decision,
		Labels:     map[string]string{"app": "portcullis"},
		Portcullis: DecisionLogRow{
			Seq: r.Seq, Kind: ev.Kind, Hash: r.Hash, PrevHash: r.PrevHash, PolicyHash: ev.PolicyHash,
			Session: ev.Session, Agent: ev.Agent, Actor: ev.Actor, Detail: ev.Detail, Validator: ev.Validator,
		},
	}
	if ev.LatencyNS > 0 {
		line.Metrics = map[string]int64{"timer_portcullis_decide_ns": ev.LatencyNS}
	}
	return line, nil
}
