package console

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/portcullis/portcullis"
)

// How much the list pages show.
const (
	listLimit        = 200
	previewChars     = 240
	auditPageSize    = 50
	auditBatch       = 500
	auditSearchMax   = 5000
	maxPolicyBytes   = 1 << 20
	decisionLookback = 10 * time.Minute
)

// card is a pending request as the pending list shows it: every field
// ready to print (agent text made visible, times formatted), so the page
// costs the template as little as possible.
type card struct {
	ID, Path, Tool, Summary, Agent, Session, Args  string
	Level, LevelClass                              string
	Asked, AskedAgo, Expires, ExpiresIn, ExpiresAt string
	Decide                                         decideView
}

// decideView is the data of the "decide" template: one pending request's
// answer forms.
type decideView struct {
	CSRF, Path, Return string
	ForSession         bool
}

type pendingView struct {
	Items []card
}

// pendingCount is the list's length, unless the list was cut at listLimit.
func (v pendingView) pendingCount() int {
	if len(v.Items) >= listLimit {
		return -1
	}
	return len(v.Items)
}

func (c *Console) card(a portcullis.Approval, csrf string) card {
	now := c.clock.Now()
	p := ApprovalPath(a.ID)
	k := card{
		ID: a.ID, Path: p, Tool: visible(a.Tool, false), Summary: visible(a.Reason, false),
		Agent: visible(a.Call.Agent, false), Session: visible(a.Call.Session, false),
		Args:  visible(c.argsPreview(a), false),
		Level: a.Level.String(), LevelClass: levelClass(a.Level),
		Asked: fmtTime(a.CreatedAt), AskedAgo: ago(now, a.CreatedAt),
		Expires: fmtTime(a.ExpiresAt), ExpiresIn: until(now, a.ExpiresAt),
		Decide: decideView{CSRF: csrf, Path: p, Return: "/approvals", ForSession: a.Level == portcullis.ConfirmSession},
	}
	if !a.ExpiresAt.IsZero() {
		k.ExpiresAt = a.ExpiresAt.UTC().Format(time.RFC3339)
	}
	return k
}

func (c *Console) pendingPage(w http.ResponseWriter, r *http.Request, s *session) {
	as, err := c.store.Approvals(r.Context(), portcullis.ApprovalFilter{Status: portcullis.ApprovalPending, Limit: listLimit})
	if err != nil {
		c.fail(w, r, "Listing pending approvals", err)
		return
	}
	v := pendingView{Items: make([]card, len(as))}
	for i, a := range as {
		v.Items[i] = c.card(a, s.csrf)
	}
	c.render(w, r, s, http.StatusOK, pageInfo{name: "pending", title: "Pending approvals", live: "approval"}, v)
}

func (c *Console) argsPreview(a portcullis.Approval) string {
	if len(a.Call.Args) == 0 {
		return ""
	}
	b, err := marshal(portcullis.RedactArgs(a.Call.Args, c.redactNames(a.Tool)), false)
	if err != nil {
		return "(arguments cannot be shown: " + err.Error() + ")"
	}
	return short(previewChars, string(b))
}

// redactNames are the argument names whose values the policy keeps out of
// the audit log; the console does not show them either.
func (c *Console) redactNames(tool string) []string {
	p := c.gate.Policy()
	if p == nil {
		return nil
	}
	names := p.Audit.Redact
	for i := range p.Tools {
		if p.Tools[i].Name == tool {
			names = append(slices.Clip(names), p.Tools[i].Redact...)
		}
	}
	return names
}

func marshal(v any, indent bool) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if indent {
		enc.SetIndent("", "  ")
	}
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

type decidedView struct {
	Status string
	Items  []portcullis.Approval
}

func (c *Console) decidedPage(w http.ResponseWriter, r *http.Request, s *session) {
	status := portcullis.ApprovalStatus(r.URL.Query().Get("status"))
	switch status {
	case "", portcullis.ApprovalApproved, portcullis.ApprovalDenied, portcullis.ApprovalExpired:
	default:
		c.refuse(w, r, http.StatusBadRequest, "Unknown status: want approved, denied or expired.")
		return
	}
	as, err := c.store.Approvals(r.Context(), portcullis.ApprovalFilter{Status: status, Limit: listLimit})
	if err != nil {
		c.fail(w, r, "Listing decided approvals", err)
		return
	}
	v := decidedView{Status: string(status)}
	for _, a := range as {
		if a.Status == portcullis.ApprovalPending {
			continue
		}
		v.Items = append(v.Items, a)
	}
	c.render(w, r, s, http.StatusOK, pageInfo{name: "decided", title: "Decided approvals", live: "approval"}, v)
}

// approvalView is one approval request with what the audit log knows of
// the decision that made it.
type approvalView struct {
	A        portcullis.Approval
	Args     string
	Redacted []string
	// Seq and Decision are the decision's audit row, when found; Validator
	// its validator call.
	Seq        int64
	Decision   *portcullis.Decision
	Validator  *portcullis.ValidatorRecord
	PolicyHash string
	// History is what people did about it (audit rows).
	History []auditItem
	Decide  decideView
}

func (c *Console) approvalPage(w http.ResponseWriter, r *http.Request, s *session) {
	ctx := r.Context()
	a, err := c.store.Approval(ctx, r.PathValue("id"))
	if err != nil {
		c.fail(w, r, "Reading the approval", err)
		return
	}
	v := approvalView{A: a, Decide: decideView{CSRF: s.csrf, Path: ApprovalPath(a.ID), Return: ApprovalPath(a.ID), ForSession: a.Level == portcullis.ConfirmSession}}
	names := c.redactNames(a.Tool)
	for _, n := range names {
		if _, ok := a.Call.Args[n]; ok {
			v.Redacted = append(v.Redacted, n)
		}
	}
	args := a.Call.Args
	if args == nil {
		args = map[string]any{}
	}
	b, err := marshal(portcullis.RedactArgs(args, names), true)
	if err != nil {
		v.Args = "(arguments cannot be shown: " + err.Error() + ")"
	} else {
		v.Args = string(b)
	}
	rec, ev, err := c.decisionRow(ctx, a)
	if err != nil {
		c.fail(w, r, "Reading the audit log", err)
		return
	}
	if ev != nil {
		v.Seq, v.Decision, v.Validator, v.PolicyHash = rec.Seq, ev.Decision, ev.Validator, ev.PolicyHash
	}
	if v.History, err = c.history(ctx, a); err != nil {
		c.fail(w, r, "Reading the audit log", err)
		return
	}
	c.render(w, r, s, http.StatusOK, pageInfo{name: "approval", title: "Approval " + a.ID, live: "approval"}, v)
}

// decisionRow finds the audit row of the decision that made an approval
// request: a decision of the same session, agent and tool shortly before
// the request, with its decision ID.
func (c *Console) decisionRow(ctx context.Context, a portcullis.Approval) (*portcullis.AuditRecord, *portcullis.AuditEvent, error) {
	if a.DecisionID == "" {
		return nil, nil, nil
	}
	q := portcullis.AuditQuery{
		Kind: portcullis.AuditDecision, Session: a.Call.Session, Agent: a.Call.Agent, Tool: a.Tool,
		Since: a.CreatedAt.Add(-decisionLookback), Until: a.CreatedAt.Add(time.Minute), Newest: true, Limit: auditBatch,
	}
	recs, err := c.store.QueryAudit(ctx, q)
	if err != nil {
		return nil, nil, err
	}
	id := []byte(a.DecisionID)
	for i := range recs {
		if !bytes.Contains(recs[i].Body, id) {
			continue
		}
		ev, err := recs[i].Event()
		if err != nil {
			return nil, nil, err
		}
		if ev.DecisionID == a.DecisionID {
			return &recs[i], &ev, nil
		}
	}
	return nil, nil, nil
}

// history lists what people did about an approval request.
func (c *Console) history(ctx context.Context, a portcullis.Approval) ([]auditItem, error) {
	if a.DecisionID == "" {
		return nil, nil
	}
	recs, err := c.store.QueryAudit(ctx, portcullis.AuditQuery{
		Kind: portcullis.AuditApproval, Session: a.Call.Session, Agent: a.Call.Agent, Tool: a.Tool,
		Since: a.CreatedAt.Add(-time.Minute), Limit: auditBatch,
	})
	if err != nil {
		return nil, err
	}
	var out []auditItem
	for _, rec := range recs {
		ev, err := rec.Event()
		if err != nil {
			return nil, err
		}
		if ev.DecisionID == a.DecisionID {
			out = append(out, newAuditItem(rec.Seq, ev))
		}
	}
	return out, nil
}

// blockItem is a block with what the console knows of its code.
type blockItem struct {
	portcullis.Block
	Code        string
	CodeExpires time.Time
	CodeExpired bool
}

type blocksView struct {
	Items []blockItem
}

func (c *Console) blocksPage(w http.ResponseWriter, r *http.Request, s *session) {
	bs, err := c.store.Blocks(r.Context())
	if err != nil {
		c.fail(w, r, "Listing blocks", err)
		return
	}
	v := blocksView{Items: make([]blockItem, len(bs))}
	for i, b := range bs {
		it := blockItem{Block: b}
		if k, ok, expired := c.notices.code(b.ChallengeID); ok {
			it.Code, it.CodeExpires = k.Code, k.Expires
		} else {
			it.CodeExpired = expired
		}
		v.Items[i] = it
	}
	c.render(w, r, s, http.StatusOK, pageInfo{name: "blocks", title: "Blocked agents", live: "block"}, v)
}

type grantsView struct {
	Items []portcullis.Grant
}

func (c *Console) grantsPage(w http.ResponseWriter, r *http.Request, s *session) {
	gs, err := c.store.Grants(r.Context(), r.URL.Query().Get("session"), c.clock.Now())
	if err != nil {
		c.fail(w, r, "Listing grants", err)
		return
	}
	c.render(w, r, s, http.StatusOK, pageInfo{name: "grants", title: "Grants", live: "grant"}, grantsView{Items: gs})
}

// auditItem is an audit row as the log page shows it.
type auditItem struct {
	Seq     int64
	Ev      portcullis.AuditEvent
	Summary string
}

func newAuditItem(seq int64, ev portcullis.AuditEvent) auditItem {
	it := auditItem{Seq: seq, Ev: ev}
	switch {
	case ev.Kind == portcullis.AuditDecision && ev.Decision != nil:
		it.Summary = ev.Decision.Reason
	case ev.Actor != "":
		it.Summary = ev.Actor + ": " + ev.Detail
	default:
		it.Summary = ev.Detail
	}
	return it
}

type auditFilter struct {
	Session, Agent, Tool, Outcome, Kind, Q string
}

func (f auditFilter) values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"session": f.Session, "agent": f.Agent, "tool": f.Tool, "outcome": f.Outcome, "kind": f.Kind, "q": f.Q} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

type auditView struct {
	Filter   auditFilter
	Rows     []auditItem
	Older    string
	Newer    string
	Scanned  int
	Limited  bool // the search stopped at auditSearchMax rows
	Outcomes []string
	Kinds    []string
}

var (
	auditOutcomes = []string{"allow", "confirm", "deny", "stop"}
	auditKinds    = []string{"decision", "approval", "unblock", "grant", "policy", "tool"}
)

// auditPage shows the audit log, newest first, filtered by the store
// (session, agent, tool, outcome, kind) and searched here (q, in each
// row's text), a page at a time. A search reads at most auditSearchMax rows
// per page and offers to go on.
func (c *Console) auditPage(w http.ResponseWriter, r *http.Request, s *session) {
	qv := r.URL.Query()
	f := auditFilter{
		Session: strings.TrimSpace(qv.Get("session")), Agent: strings.TrimSpace(qv.Get("agent")),
		Tool: strings.TrimSpace(qv.Get("tool")), Outcome: qv.Get("outcome"), Kind: qv.Get("kind"),
		Q: strings.TrimSpace(qv.Get("q")),
	}
	if f.Outcome != "" && !slices.Contains(auditOutcomes, f.Outcome) {
		c.refuse(w, r, http.StatusBadRequest, "Unknown outcome: want allow, confirm, deny or stop.")
		return
	}
	if f.Kind != "" && !slices.Contains(auditKinds, f.Kind) {
		c.refuse(w, r, http.StatusBadRequest, "Unknown kind: want "+strings.Join(auditKinds, ", ")+".")
		return
	}
	before, err1 := seqParam(qv.Get("before"))
	after, err2 := seqParam(qv.Get("after"))
	if err := errors.Join(err1, err2); err != nil {
		c.refuse(w, r, http.StatusBadRequest, "Paging: "+err.Error()+".")
		return
	}
	base := portcullis.AuditQuery{
		Session: f.Session, Agent: f.Agent, Tool: f.Tool,
		Outcome: portcullis.Outcome(f.Outcome), Kind: portcullis.AuditKind(f.Kind),
	}
	needle := []byte(strings.ToLower(f.Q))
	forward := after > 0
	cursor := before
	if forward {
		cursor = after
	}
	v := auditView{Filter: f, Outcomes: auditOutcomes, Kinds: auditKinds}
	more := false
scan:
	for {
		q := base
		q.Limit = auditPageSize + 1
		if len(needle) > 0 {
			q.Limit = auditBatch
		}
		if forward {
			q.AfterSeq = cursor
		} else {
			q.BeforeSeq, q.Newest = cursor, true
		}
		recs, err := c.store.QueryAudit(r.Context(), q)
		if err != nil {
			c.fail(w, r, "Reading the audit log", err)
			return
		}
		for _, rec := range recs {
			if len(needle) == 0 || bytes.Contains(bytes.ToLower(rec.Body), needle) {
				if len(v.Rows) == auditPageSize {
					more = true
					break scan
				}
				ev, err := rec.Event()
				if err != nil {
					c.fail(w, r, "Reading the audit log", err)
					return
				}
				v.Rows = append(v.Rows, newAuditItem(rec.Seq, ev))
			}
			cursor = rec.Seq
			v.Scanned++
		}
		if len(recs) < q.Limit {
			break
		}
		if v.Scanned >= auditSearchMax {
			more, v.Limited = true, true
			break
		}
	}
	link := func(k string, seq int64) string {
		vals := f.values()
		vals.Set(k, strconv.FormatInt(seq, 10))
		return "/audit?" + vals.Encode()
	}
	if forward {
		slices.Reverse(v.Rows)
		v.Older = link("before", after+1)
		if more {
			v.Newer = link("after", cursor)
		}
	} else {
		if more {
			v.Older = link("before", cursor)
		}
		if before > 0 {
			v.Newer = link("after", before-1)
		}
	}
	c.render(w, r, s, http.StatusOK, pageInfo{name: "audit", title: "Audit log"}, v)
}

func seqParam(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, errors.New("a row number must be a whole number ≥ 0")
	}
	return n, nil
}

type auditRowView struct {
	Rec  portcullis.AuditRecord
	Item auditItem
	Body string
}

func (c *Console) auditRowPage(w http.ResponseWriter, r *http.Request, s *session) {
	seq, err := seqParam(r.PathValue("seq"))
	if err != nil || seq == 0 {
		c.refuse(w, r, http.StatusBadRequest, "An audit row is named by its number (1 or more).")
		return
	}
	recs, err := c.store.QueryAudit(r.Context(), portcullis.AuditQuery{AfterSeq: seq - 1, BeforeSeq: seq + 1, Limit: 1})
	if err != nil {
		c.fail(w, r, "Reading the audit log", err)
		return
	}
	if len(recs) == 0 {
		c.refuse(w, r, http.StatusNotFound, "There is no audit row "+strconv.FormatInt(seq, 10)+" (it may have been pruned).")
		return
	}
	ev, err := recs[0].Event()
	if err != nil {
		c.fail(w, r, "Reading the audit log", err)
		return
	}
	v := auditRowView{Rec: recs[0], Item: newAuditItem(seq, ev), Body: prettyJSON(recs[0].Body)}
	c.render(w, r, s, http.StatusOK, pageInfo{name: "auditrow", title: "Audit row " + strconv.FormatInt(seq, 10), live: ""}, v)
}

// pinItem is a pinned tool definition, with the diff of a pending change.
type pinItem struct {
	portcullis.ToolPin
	Definition string
	Diff       []diffLine
}

type toolsView struct {
	Pending []pinItem
	Pinned  []pinItem
}

func (c *Console) toolsPage(w http.ResponseWriter, r *http.Request, s *session) {
	ps, err := c.store.ToolPins(r.Context())
	if err != nil {
		c.fail(w, r, "Listing tool pins", err)
		return
	}
	var v toolsView
	for _, p := range ps {
		it := pinItem{ToolPin: p, Definition: prettyJSON(p.Definition)}
		if p.PendingHash != "" {
			it.Diff = condense(lineDiff(it.Definition, prettyJSON(p.PendingDefinition)))
			v.Pending = append(v.Pending, it)
			continue
		}
		v.Pinned = append(v.Pinned, it)
	}
	c.render(w, r, s, http.StatusOK, pageInfo{name: "tools", title: "Tools", live: "pin"}, v)
}

// toolRow and elementRow are the policy's tools and elements as the policy
// page shows them.
type toolRow struct {
	portcullis.ToolPolicy
	Level portcullis.Level
}

type policyView struct {
	P        *portcullis.Policy
	Tools    []toolRow
	LoadedAt time.Time
	Raw      string
	RawNote  string
}

func (c *Console) policyPage(w http.ResponseWriter, r *http.Request, s *session) {
	p := c.gate.Policy()
	if p == nil {
		c.refuse(w, r, http.StatusServiceUnavailable, "No policy is in force.")
		return
	}
	v := policyView{P: p}
	if c.loadedAt != nil {
		v.LoadedAt = c.loadedAt()
	}
	for i := range p.Tools {
		v.Tools = append(v.Tools, toolRow{ToolPolicy: p.Tools[i], Level: p.Tools[i].Level()})
	}
	v.Raw, v.RawNote = policySource(p)
	c.render(w, r, s, http.StatusOK, pageInfo{name: "policy", title: "Policy"}, v)
}

// policySource reads the policy's file when it still holds the policy in
// force (its hash matches); otherwise it says why it is not shown.
func policySource(p *portcullis.Policy) (raw, note string) {
	if p.Source == "" {
		return "", "This policy was built in code; it has no file."
	}
	f, err := os.Open(p.Source)
	if err != nil {
		return "", "The policy file cannot be read now: " + err.Error()
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxPolicyBytes+1))
	if err != nil {
		return "", "The policy file cannot be read now: " + err.Error()
	}
	if len(b) > maxPolicyBytes {
		return "", "The policy file is larger than 1 MiB; it is not shown."
	}
	sum := sha256.Sum256(b)
	if "sha256:"+hex.EncodeToString(sum[:]) != p.Hash {
		return "", "The file has changed since the policy was loaded, so it is not the policy in force; the gateway applies it when it reloads."
	}
	return string(b), ""
}
