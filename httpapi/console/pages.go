package console

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"maps"
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
	// Stopped: the agent no longer waits for the answer (see stopped);
	// WaitEnds is when it stops waiting (RFC 3339), while it waits.
	Stopped  bool
	WaitEnds string
}

// stopped reports whether the agent of a pending request has stopped
// waiting for the answer: a held call waits at most the policy's
// approvals.wait, so past it the call has already been refused (or its
// agent went away) and approving only lets an identical retry through.
// It also returns when the wait ends.
func (c *Console) stopped(a portcullis.Approval) (bool, time.Time) {
	p := c.gate.Policy()
	if a.Status != portcullis.ApprovalPending || p == nil || p.Approvals.Wait <= 0 || a.CreatedAt.IsZero() {
		return false, time.Time{}
	}
	ends := a.CreatedAt.Add(p.Approvals.Wait)
	return !c.clock.Now().Before(ends), ends
}

// decideView is the data of the "decide" template: one pending request's
// answer forms.
type decideView struct {
	CSRF, Path, Return string
	ForSession         bool
	// Names is the request the buttons act on, for their accessible
	// names: the tool and the agent (made visible).
	Names string
	// Tool and Session (made visible) and Lifetime (the session grant's,
	// "12 h") say what approving for the session covers.
	Tool, Session, Lifetime string
}

// decide is the answer forms' data for a pending request.
func (c *Console) decide(a portcullis.Approval, csrf, ret string) decideView {
	return decideView{
		CSRF: csrf, Path: ApprovalPath(a.ID), Return: ret, ForSession: a.Level == portcullis.ConfirmSession,
		Names: names(a), Tool: visible(a.Tool, false), Session: visible(a.Call.Session, false),
		Lifetime: lifetime(c.gate.SessionGrantTTL()),
	}
}

// lifetime is a grant's lifetime as a person reads it: "12 h", "90 min".
func lifetime(d time.Duration) string {
	switch {
	case d > 0 && d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + " h"
	case d > 0 && d%time.Minute == 0:
		return strconv.FormatInt(int64(d/time.Minute), 10) + " min"
	}
	return d.String()
}

// names is what a request's buttons say they act on.
func names(a portcullis.Approval) string {
	s := visible(a.Tool, false)
	if a.Call.Agent != "" {
		s += " from agent " + visible(a.Call.Agent, false)
	}
	return s
}

// pendingView is the pending page: the waiting requests grouped by agent,
// so that one agent's flood cannot hide another agent's request. Without a
// filter each group shows its agent's newest groupShown requests, the
// groups with the fewest requests first; with ?agent= one agent's group
// shows up to listLimit.
type pendingView struct {
	Filtered    bool
	FilterAgent string // visible
	Groups      []pendingGroup
	// MoreAgents is how many agents with waiting requests are not shown
	// (past maxGroups).
	MoreAgents int
	// Total is every agent's waiting requests, for the badge.
	Total int
}

// pendingGroup is one agent's waiting requests.
type pendingGroup struct {
	Agent    string // visible; "(no agent)" for calls that named none
	RawAgent string // for data-agent (the template escapes it)
	Anchor   string
	Pending  int
	Items    []card
	More     int    // waiting requests not shown
	AllPath  string // the agent's own list; "" on that list, and for no agent
}

// How many requests each agent's group shows on the unfiltered pending
// page, and how many groups it shows.
const (
	groupShown = 10
	maxGroups  = 50
)

func (v pendingView) pendingCount() int { return v.Total }

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
		Decide: c.decide(a, csrf, "/approvals"),
	}
	if !a.ExpiresAt.IsZero() {
		k.ExpiresAt = a.ExpiresAt.UTC().Format(time.RFC3339)
	}
	stopped, ends := c.stopped(a)
	k.Stopped = stopped
	if !stopped && !ends.IsZero() {
		k.WaitEnds = ends.UTC().Format(time.RFC3339)
	}
	return k
}

func (c *Console) pendingPage(w http.ResponseWriter, r *http.Request, s *session) {
	ctx := r.Context()
	counts, err := c.store.PendingCounts(ctx)
	if err != nil {
		c.fail(w, r, "Counting pending approvals", err)
		return
	}
	var v pendingView
	for _, n := range counts {
		v.Total += n.Pending
	}
	shown := groupShown
	if q := r.URL.Query(); q.Has("agent") {
		agent := q.Get("agent")
		v.Filtered, v.FilterAgent = true, agentLabel(agent)
		kept := counts[:0]
		for _, n := range counts {
			if n.Agent == agent {
				kept = append(kept, n)
			}
		}
		counts, shown = kept, listLimit
	} else {
		// The quietest agents first: a lone request is never below a flood.
		slices.SortStableFunc(counts, func(a, b portcullis.PendingCount) int {
			if a.Pending != b.Pending {
				return a.Pending - b.Pending
			}
			return strings.Compare(a.Agent, b.Agent)
		})
		if len(counts) > maxGroups {
			v.MoreAgents = len(counts) - maxGroups
			counts = counts[:maxGroups]
		}
	}
	for i, n := range counts {
		as, err := c.pendingOf(ctx, n.Agent, shown)
		if err != nil {
			c.fail(w, r, "Listing pending approvals", err)
			return
		}
		if len(as) == 0 {
			continue // answered since they were counted
		}
		g := pendingGroup{
			Agent: agentLabel(n.Agent), RawAgent: n.Agent, Anchor: "agent-" + strconv.Itoa(i),
			Pending: max(n.Pending, len(as)), Items: make([]card, len(as)),
		}
		g.More = g.Pending - len(as)
		if n.Agent != "" && !v.Filtered {
			g.AllPath = "/approvals?agent=" + url.QueryEscape(n.Agent)
		}
		for j, a := range as {
			g.Items[j] = c.card(a, s.csrf)
		}
		v.Groups = append(v.Groups, g)
	}
	c.render(w, r, s, http.StatusOK, pageInfo{name: "pending", title: "Pending approvals", live: "approval"}, v)
}

// pendingOf lists an agent's newest pending requests, at most limit. The
// store's filter cannot select the agent with no name, so its requests
// are picked from the whole list.
func (c *Console) pendingOf(ctx context.Context, agent string, limit int) ([]portcullis.Approval, error) {
	if agent != "" {
		return c.store.Approvals(ctx, portcullis.ApprovalFilter{Status: portcullis.ApprovalPending, Agent: agent, Limit: limit})
	}
	all, err := c.store.Approvals(ctx, portcullis.ApprovalFilter{Status: portcullis.ApprovalPending, Limit: pendingCountLimit})
	if err != nil {
		return nil, err
	}
	var out []portcullis.Approval
	for _, a := range all {
		if a.Call.Agent == "" && len(out) < limit {
			out = append(out, a)
		}
	}
	return out, nil
}

// agentLabel is an agent's name as the pending page shows it.
func agentLabel(agent string) string {
	if agent == "" {
		return "(no agent)"
	}
	return visible(agent, false)
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
	// Texts are the string arguments that span lines (a file's content, a
	// script), shown as text with their line breaks.
	Texts []argText
	// Stopped: the agent no longer waits for the answer; Wait is how long
	// it waited (the policy's approvals.wait).
	Stopped bool
	Wait    string
	// WaitEnds is when the agent stops waiting (RFC 3339), while it waits:
	// the page refreshes then.
	WaitEnds string
}

// argText is one string argument shown as text.
type argText struct{ Name, Text string }

// textArgs are the top-level string arguments of args that hold a line
// break, by name.
func textArgs(args map[string]any) []argText {
	var out []argText
	for _, k := range slices.Sorted(maps.Keys(args)) {
		if s, ok := args[k].(string); ok && strings.ContainsAny(s, "\n\r") {
			out = append(out, argText{Name: k, Text: s})
		}
	}
	return out
}

func (c *Console) approvalPage(w http.ResponseWriter, r *http.Request, s *session) {
	ctx := r.Context()
	a, err := c.store.Approval(ctx, r.PathValue("id"))
	if err != nil {
		c.fail(w, r, "Reading the approval", err)
		return
	}
	v := approvalView{A: a, Decide: c.decide(a, s.csrf, ApprovalPath(a.ID))}
	if stopped, ends := c.stopped(a); stopped {
		v.Stopped, v.Wait = true, ends.Sub(a.CreatedAt).String()
	} else if !ends.IsZero() {
		v.WaitEnds = ends.UTC().Format(time.RFC3339)
	}
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
	shown := portcullis.RedactArgs(args, names)
	b, err := marshal(shown, true)
	if err != nil {
		v.Args = "(arguments cannot be shown: " + err.Error() + ")"
	} else {
		v.Args = string(b)
		v.Texts = textArgs(shown)
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

// budgetItem is a budget counter as the budgets page shows it.
type budgetItem struct {
	portcullis.BudgetUsage
	// Left is what the window still holds (0 past the limit); Full marks
	// a counter at or past its limit.
	Left portcullis.Amount
	Full bool
}

type budgetsView struct {
	Items []budgetItem
}

// budgetsPage shows each budget counter's use in its current window,
// read from the store (every replica's calls count in it).
func (c *Console) budgetsPage(w http.ResponseWriter, r *http.Request, s *session) {
	us, err := c.store.BudgetUse(r.Context(), c.clock.Now())
	if err != nil {
		c.fail(w, r, "Listing budget use", err)
		return
	}
	v := budgetsView{Items: make([]budgetItem, len(us))}
	for i, u := range us {
		v.Items[i] = budgetItem{BudgetUsage: u, Left: max(u.Limit-u.Used, 0), Full: u.Used >= u.Limit}
	}
	c.render(w, r, s, http.StatusOK, pageInfo{name: "budgets", title: "Budgets"}, v)
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
		if p.IsToolSet() {
			continue // marks the upstream's pinned set; not a tool
		}
		it := pinItem{ToolPin: p, Definition: prettyJSON(p.Definition)}
		if p.PendingHash != "" {
			it.Diff = definitionDiff(it.Definition, prettyJSON(p.PendingDefinition))
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
	// Elevatable is canBeElevated as the gate reads it: a DENY tool is
	// never elevated, whatever the key says.
	Elevatable bool
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
		l := p.Tools[i].Level()
		v.Tools = append(v.Tools, toolRow{ToolPolicy: p.Tools[i], Level: l, Elevatable: p.Tools[i].CanBeElevated && l != portcullis.Deny})
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
