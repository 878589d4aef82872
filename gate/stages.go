package gate

import (
	"context"
	"encoding/base32"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/portcullis/portcullis"
)

// route classifies the call: canonical name, endpoint, base level,
// elevation, risk. It returns true when it ended the decision.
func (e *eval) route() bool {
	e.source = portcullis.SourceOperationDefault
	r := e.r // looked up by decide
	u := e.c.Upstream
	if u != nil {
		e.routeFacts = upstreamFacts(u, r)
		if r == nil && u.Annotated && u.Trusted {
			e.routeUpstream = u.Server
		}
	}
	if u != nil && !u.Offered {
		if r != nil {
			e.canonical = r.name
		}
		e.end(&portcullis.TraceEntry{Stage: "route", Result: "no upstream server offers a tool named " + quote(e.c.Tool)}, ending{
			outcome: portcullis.OutcomeDeny, level: portcullis.Deny, code: portcullis.CodeUnknownOperation,
			reason:    "No upstream server offers a tool named " + quote(e.c.Tool),
			authorize: "a tool of that name offered by one of the gateway's upstream servers",
		})
		return true
	}
	if r == nil && u != nil && u.Annotated && u.Trusted {
		r = annotatedRoute(e.c.Tool, u)
		e.r = r
	}
	if r == nil {
		e.canonical = e.c.Tool
		e.elevatable = false
		if e.pol.pol.UnknownTools == portcullis.UnknownDeny {
			e.end(&portcullis.TraceEntry{Stage: "route", Result: "unclassified: the policy has no tools entry for " + quote(e.c.Tool) + " and unknownTools is deny" + untrustedHints(u)}, ending{
				outcome: portcullis.OutcomeDeny, level: portcullis.Deny, code: portcullis.CodeUnknownOperation,
				reason:    "Operation " + quote(e.c.Tool) + " is not classified by the policy, and unknown tools are denied",
				authorize: "a tools entry for " + quote(e.c.Tool) + " in the policy",
			})
			return true
		}
		e.level = portcullis.ConfirmSingleUse
		result := "unclassified: no tools entry for " + quote(e.c.Tool) + "; secure fallback CONFIRM_SINGLE_USE, never auto-approved" + untrustedHints(u)
		if u != nil && u.Annotated && u.OpenWorld {
			// A server's claim to reach the open world only adds scrutiny.
			e.risk = portcullis.RiskExternalWrite
			e.routeFacts, e.routeUpstream = append(e.routeFacts, portcullis.FactOpenWorldHint), u.Server
			result += "; openWorldHint of upstream " + quote(u.Server) + ": risk external-write"
		}
		if u != nil && u.Held() {
			result += "; " + heldNote(u)
		}
		e.trace("route", result)
		return false
	}
	e.r = r
	e.canonical = r.name
	e.level = r.base
	e.elevatable = r.elevatable
	e.risk = r.risk
	result := r.trace
	if e.c.Tool != r.name {
		result = "alias " + quote(e.c.Tool) + " of " + result
	}
	if u != nil && u.Annotated && u.Destructive && e.level < portcullis.ConfirmSingleUse {
		// The server says the tool destroys: believed, since it only
		// makes the tool stricter. The policy's canBeElevated stands, so
		// an element that names the tool in its allow list still may.
		e.level = portcullis.ConfirmSingleUse
		e.routeFacts, e.routeUpstream = append(e.routeFacts, portcullis.FactDestructiveHint), u.Server
		result += "; destructiveHint of upstream " + quote(u.Server) + ": raised to CONFIRM_SINGLE_USE"
	}
	if u != nil && u.Held() {
		e.level = e.level.Stricter(portcullis.ConfirmSingleUse)
		e.elevatable = false
		result += "; " + heldNote(u)
	}
	if r.shellArg != "" && e.shellCommand(r, &result) {
		return true
	}
	if r.pathArg != "" && r.endpoint != portcullis.Read {
		path, _ := e.c.Args[r.pathArg].(string)
		if r.outsideWorkdir != portcullis.LevelUnset {
			if outside := e.outsideWorkdir(path); outside != "" {
				e.level = e.level.Stricter(r.outsideWorkdir)
				e.routeFacts = append(e.routeFacts, portcullis.FactOutsideWorkdir)
				result += "; " + outside + ": at least " + r.outsideWorkdir.String() + " (outsideWorkdir)"
			}
		}
		if path != "" {
			if e.pol.isProtected(path) {
				e.end(&portcullis.TraceEntry{Stage: "route", Result: result + "; path " + quote(path) + " is one of Portcullis's own files"}, ending{
					outcome: portcullis.OutcomeDeny, level: portcullis.Deny, code: portcullis.CodeBlockedCommand,
					reason:    "Operation " + quote(r.name) + " would write " + quote(path) + ", one of Portcullis's own files: an agent cannot change its own permissions",
					authorize: "a person editing the file directly, outside the agent",
				})
				return true
			}
			if e.pol.isPolicyDocument(path) {
				e.risk = portcullis.RiskPolicyWrite
				e.level = e.level.Stricter(portcullis.ConfirmSingleUse)
				e.elevatable = false
				result += "; path " + quote(path) + " is the policy document: risk policy-write, CONFIRM_SINGLE_USE, not elevatable"
			}
		}
	}
	e.trace("route", result)
	return false
}

// outsideWorkdir says why the write of path is not inside the call's
// working directory, or "" when it is. Unknown is outside: a missing or
// non-string path, no working directory, one stated by the agent itself
// (an untrusted ContextSource), a relative one, or a path that cannot be
// resolved. Symbolic links of the parts that exist are followed, so a
// link inside the directory to a file outside it is outside.
func (e *eval) outsideWorkdir(path string) string {
	dir := e.c.Workdir
	switch {
	case path == "":
		return "no file path in argument " + quote(e.r.pathArg)
	case dir == "":
		return "path " + quote(path) + ": no working directory is known"
	case !e.contextSource().Trusted():
		return "path " + quote(path) + ": the working directory is the agent's own word"
	case !filepath.IsAbs(dir):
		return "path " + quote(path) + ": working directory " + quote(dir) + " is not absolute"
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	p, err1 := resolveExisting(path)
	d, err2 := resolveExisting(dir)
	if err1 != nil || err2 != nil {
		return "path " + quote(path) + ": cannot tell whether it is inside working directory " + quote(dir)
	}
	if p == d || strings.HasPrefix(p, d+string(filepath.Separator)) || d == string(filepath.Separator) {
		return ""
	}
	return "path " + quote(path) + " is outside working directory " + quote(dir)
}

// resolveExisting cleans the absolute path and follows the symbolic links
// of its longest part that exists; the rest, not yet created, is appended.
func resolveExisting(path string) (string, error) {
	path = filepath.Clean(path)
	var rest []string
	for p := path; ; {
		r, err := filepath.EvalSymlinks(p)
		if err == nil {
			return filepath.Join(append([]string{r}, rest...)...), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(p)
		if parent == p {
			return "", err
		}
		rest = append([]string{filepath.Base(p)}, rest...)
		p = parent
	}
}

// factsMissing is the route stage's fact of a tool no upstream offers.
var factsMissing = []portcullis.Fact{portcullis.FactUpstreamMissing}

// upstreamFacts are the route stage's facts of the call's upstream tool u,
// given the policy's route r for it (nil when the policy names no such
// tool): offered or not, classified from a trusted upstream's pinned
// annotations, changed since it was pinned, new since its upstream's tool
// set was pinned. The hints that make a tool stricter are added where
// they apply (route).
func upstreamFacts(u *portcullis.UpstreamTool, r *route) []portcullis.Fact {
	if !u.Offered {
		return factsMissing
	}
	var f []portcullis.Fact
	if r == nil && u.Annotated && u.Trusted {
		f = append(f, portcullis.FactUpstreamAnnotated)
	}
	if u.Changed {
		f = append(f, portcullis.FactDefinitionChanged)
	}
	if u.New {
		f = append(f, portcullis.FactToolNew)
	}
	return f
}

// changedDefinition is the route stage's note on a tool whose definition
// changed since it was pinned.
const changedDefinition = "its definition changed since it was pinned: CONFIRM_SINGLE_USE, not elevatable, until a person accepts the change (portcullis tools accept)"

// newTool is the route stage's note on a tool that first appeared after
// its upstream's tool set was pinned.
const newTool = "a new tool, offered after the upstream's tools were pinned: CONFIRM_SINGLE_USE, not elevatable, until a person accepts it (portcullis tools accept)"

func heldNote(u *portcullis.UpstreamTool) string {
	if u.New {
		return newTool
	}
	return changedDefinition
}

// untrustedHints notes, for a tool the policy does not name, that its
// upstream's annotations claimed it only reads and were not believed.
func untrustedHints(u *portcullis.UpstreamTool) string {
	if u == nil || !u.Annotated || u.Trusted || !u.ReadOnly {
		return ""
	}
	return "; the readOnlyHint of upstream " + quote(u.Server) + " is its own claim, not trusted (trustAnnotations)"
}

// annotatedRoute classifies a tool the policy does not name from the pinned
// MCP annotations of an upstream the operator trusts: readOnlyHint → READ,
// destructiveHint → DELETE, otherwise UPDATE, at the endpoint's default
// level. A tool that writes to an open world (openWorldHint) gets risk
// external-write, which puts it in the validator's default scope. A
// destructive tool cannot be elevated.
func annotatedRoute(name string, u *portcullis.UpstreamTool) *route {
	ep := u.Endpoint()
	r := &route{
		name:       name,
		endpoint:   ep,
		base:       ep.DefaultLevel(),
		elevatable: ep != portcullis.Delete,
		level:      portcullis.LevelUnset,
	}
	if u.OpenWorld && !u.ReadOnly {
		r.risk = portcullis.RiskExternalWrite
	}
	var b strings.Builder
	b.WriteString(name)
	b.WriteString(": ")
	b.WriteString(string(ep))
	b.WriteString(", base level ")
	b.WriteString(r.base.String())
	if !r.elevatable {
		b.WriteString(", not elevatable")
	}
	if r.risk != "" {
		b.WriteString(", risk ")
		b.WriteString(string(r.risk))
	}
	b.WriteString(" (MCP annotations of upstream ")
	b.WriteString(quote(u.Server))
	b.WriteString(", pinned)")
	r.trace = b.String()
	r.quoted = quote(name)
	return r
}

func (c *compiled) isPolicyDocument(path string) bool {
	return c.policyDocBase != "" && strings.ToLower(filepath.Base(filepath.Clean(path))) == c.policyDocBase
}

func (c *compiled) isProtected(path string) bool {
	if len(c.protected) == 0 {
		return false
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return true // cannot tell: treat as protected
	}
	for _, p := range c.protected {
		if abs == p || strings.HasPrefix(abs, p+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// elements applies the active elements' gatekeeper lists: deny > scope >
// confirm > allow > route default, whatever the order of the elements.
func (e *eval) elements() (bool, error) {
	if portcullis.IsUngatable(e.canonical) {
		e.trace("elements", "ungatable recovery operation: element policies cannot gate it")
		return false, nil
	}
	active, err := e.activeSet()
	if err != nil {
		e.failClosed("elements", err)
		return true, err
	}
	e.active = active

	deny, confirm, allow := -1, -1, -1
	var denyM, confirmM, allowM match
	nAllow := 0
	for _, m := range e.pol.matches(e.canonical) {
		if !active[m.elem] {
			continue
		}
		switch m.list {
		case listDeny:
			if deny < 0 {
				deny, denyM = int(m.elem), m
			}
		case listConfirm:
			if confirm < 0 {
				confirm, confirmM = int(m.elem), m
			}
		case listAllow:
			if allow < 0 {
				allow, allowM = int(m.elem), m
			}
			nAllow++
		}
	}
	if (deny >= 0 || confirm >= 0) && allow >= 0 && e.elevatable {
		e.conflicts = e.allowConflicts(nAllow)
	}

	switch {
	case deny >= 0:
		name := e.pol.elems[deny].name
		e.source, e.sourceElement, e.matchedPolicy = portcullis.SourceElementPolicy, name, "deny"
		e.end(&portcullis.TraceEntry{Stage: "elements", Result: denyM.trace}, ending{
			outcome: portcullis.OutcomeDeny, level: portcullis.Deny, code: portcullis.CodeElementPolicyViolation,
			reason:    "Operation " + e.quotedTool() + " is blocked by active element " + e.pol.quotedElem(name) + "'s deny policy",
			authorize: "deactivating element " + e.pol.quotedElem(name) + " (a person's change to the policy)",
		})
		return true, nil
	}
	if i := e.scopeBlock(); i >= 0 {
		name := e.pol.elems[i].name
		e.source, e.sourceElement, e.matchedPolicy = portcullis.SourceElementPolicy, name, "scope_restriction"
		e.conflicts = nil
		e.end(&portcullis.TraceEntry{Stage: "elements", Result: "scope of " + e.pol.quotedElem(name) + " excludes element type " + quote(e.c.ElementType)}, ending{
			outcome: portcullis.OutcomeDeny, level: portcullis.Deny, code: portcullis.CodeScopeRestriction,
			reason:    "Operation " + e.quotedTool() + " is not allowed on element type " + quote(e.c.ElementType) + " due to scope restrictions in active element " + e.pol.quotedElem(name),
			authorize: "acting on another element type, or deactivating element " + e.pol.quotedElem(name),
		})
		return true, nil
	}
	switch {
	case confirm >= 0:
		name := e.pol.elems[confirm].name
		e.source, e.sourceElement, e.matchedPolicy = portcullis.SourceElementPolicy, name, "confirm"
		e.level = e.level.Stricter(portcullis.ConfirmSession)
		e.trace("elements", confirmM.trace)
	case allow >= 0 && e.elevatable:
		name := e.pol.elems[allow].name
		e.allowElem = allow
		e.source, e.sourceElement, e.matchedPolicy = portcullis.SourceElementPolicy, name, "allow"
		e.level = portcullis.AutoApprove
		e.trace("elements", allowM.trace)
	case allow >= 0:
		e.trace("elements", allowM.trace+", but the operation cannot be elevated: the route level stands")
	default:
		e.trace("elements", "no active element's lists match")
	}
	return false, nil
}

// allowConflicts lists every active element whose allow list matched, in
// policy order: each wanted AUTO_APPROVE and was overridden.
func (e *eval) allowConflicts(n int) []portcullis.Conflict {
	out := make([]portcullis.Conflict, 0, n)
	for _, m := range e.pol.matches(e.canonical) {
		if m.list == listAllow && e.active[m.elem] {
			out = append(out, portcullis.Conflict{Name: e.pol.elems[m.elem].name, WantedLevel: portcullis.AutoApprove})
		}
	}
	return out
}

// activeSet returns which elements are active for this call: the request's
// activeElements when present, else the policy's.
func (e *eval) activeSet() ([]bool, error) {
	if e.c.ActiveElements == nil {
		return e.pol.defaultActive, nil
	}
	active := make([]bool, len(e.pol.elems))
	for _, name := range e.c.ActiveElements {
		i, ok := e.pol.elemIndex[name]
		if !ok {
			return nil, portcullis.Errorf(portcullis.CodeInvalidRequest, "activeElements: no element named %q in the policy", name)
		}
		active[i] = true
	}
	return active, nil
}

// scopeBlock returns the first active element whose scope excludes the
// call's element type, or -1. An empty allowedTypes means no restriction;
// blockedTypes compare case-insensitively.
func (e *eval) scopeBlock() int {
	t := e.c.ElementType
	if t == "" {
		return -1
	}
	for i := range e.pol.elems {
		if !e.active[i] {
			continue
		}
		el := &e.pol.elems[i]
		if len(el.allowed) > 0 && !slices.Contains(el.allowed, t) {
			return i
		}
		for _, b := range el.blocked {
			if strings.EqualFold(b, t) {
				return i
			}
		}
	}
	return -1
}

// confirmation handles a CONFIRM_* level: the nuclear sandbox, then grants,
// then an approval request.
func (e *eval) confirmation(ctx context.Context) {
	if !portcullis.IsUngatable(e.canonical) {
		for i := range e.pol.elems {
			if e.active[i] && e.pol.elems[i].sandboxes {
				name := e.pol.elems[i].name
				e.source, e.sourceElement, e.matchedPolicy = portcullis.SourceElementPolicy, name, "deny"
				e.end(&portcullis.TraceEntry{Stage: "confirmation", Result: "nuclear sandbox: " + e.pol.quotedElem(name) + " denies confirm_operation, so nothing can be confirmed"}, ending{
					outcome: portcullis.OutcomeDeny, level: portcullis.Deny, code: portcullis.CodeSandboxed,
					reason:    "Operation " + e.quotedTool() + " needs confirmation, but active element " + e.pol.quotedElem(name) + " denies confirm_operation: the session is read-only",
					authorize: "a person deactivating element " + e.pol.quotedElem(name) + "; the recovery operations stay available",
				})
				return
			}
		}
	}
	if g, ok := e.requestGrant(); ok {
		e.grantAllows(ctx, "grant in the request", g)
		return
	}
	if st := e.g.store; st != nil {
		digest, err := portcullis.ArgsDigest(e.c.Args)
		if err != nil {
			e.failClosed("confirmation", err)
			return
		}
		q := portcullis.GrantQuery{
			Session:     e.c.Session,
			Tool:        e.canonical,
			ElementType: e.c.ElementType,
			ArgsDigest:  digest,
			Level:       e.level,
			Consume:     !e.dry,
			Now:         e.g.clock.Now(),
		}
		g, ok, err := st.UseGrant(ctx, q)
		if err != nil {
			e.failClosed("confirmation", fmt.Errorf("check grants: %w", err))
			return
		}
		if ok {
			e.grantAllows(ctx, "stored grant "+g.ID, g)
			return
		}
		if !e.dry {
			id, err := e.g.approvalID()
			if err != nil {
				e.failClosed("confirmation", err)
				return
			}
			now := e.g.clock.Now()
			a := portcullis.Approval{
				ID:         id,
				DecisionID: e.d.DecisionID,
				Status:     portcullis.ApprovalPending,
				Call:       *e.c,
				Tool:       e.canonical,
				ArgsDigest: digest,
				Level:      e.level,
				Reason:     e.summary(),
				CreatedAt:  now,
				ExpiresAt:  now.Add(e.g.approvalTTL),
			}
			lim := e.pol.pol.Approvals.PendingLimit()
			adm, err := st.CreateApprovalWithin(ctx, a, lim)
			if err != nil {
				e.failClosed("confirmation", fmt.Errorf("create approval request: %w", err))
				return
			}
			if !adm.Created {
				e.pendingLimit(ctx, adm, lim)
				return
			}
			e.d.ChallengeID = id
			if e.g.notifier != nil {
				e.g.notify(ctx, portcullis.Notice{
					Kind: portcullis.NoticeApproval, Agent: e.c.Agent, Session: e.c.Session, Tool: e.canonical,
					DecisionID: e.d.DecisionID, ChallengeID: id, Reason: a.Reason, ExpiresAt: a.ExpiresAt,
				})
			}
		}
	}
	what := "a person's confirmation of this exact call"
	if e.level == portcullis.ConfirmSession {
		what = "a person's confirmation of " + e.quotedTool() + " for this session"
	}
	result := "no grant: a person must confirm"
	if e.d.ChallengeID != "" {
		result += "; approval request " + e.d.ChallengeID
	} else if e.g.store == nil {
		result += "; this gate has no store, so no approval request was recorded"
	}
	code := portcullis.CodeConfirmationRequired
	if e.paused {
		code = portcullis.CodeAutonomyPause
	}
	if e.overBudget {
		code = portcullis.CodeBudgetExceeded
	}
	e.end(&portcullis.TraceEntry{Stage: "confirmation", Result: result}, ending{
		outcome: portcullis.OutcomeConfirm, level: e.level, code: code,
		reason: e.confirmReason(), authorize: what,
	})
}

// pendingLimit ends a decision whose approval request the store refused:
// the agent (or its session) already has as many requests waiting as the
// policy allows. The call is denied with a reason the agent can act on,
// and a person is told once, when the cap is first reached.
func (e *eval) pendingLimit(ctx context.Context, adm portcullis.Admission, lim portcullis.PendingLimit) {
	agent := "this agent"
	if e.c.Agent != "" {
		agent = "agent " + quote(e.c.Agent)
	}
	whose, limit, key := agent, lim.PerAgent, "maxPendingPerAgent"
	if adm.Scope == portcullis.PendingScopeSession {
		whose, limit, key = "this session of "+agent, lim.PerSession, "maxPendingPerSession"
	}
	e.end(&portcullis.TraceEntry{Stage: "confirmation", Result: fmt.Sprintf("no grant, and no approval request made: %d requests from %s already wait for a person (approvals.%s: %d)", adm.Pending, whose, key, limit)}, ending{
		outcome: portcullis.OutcomeDeny, level: portcullis.Deny, code: portcullis.CodePendingLimit,
		reason:    fmt.Sprintf("Operation %s needs a person's confirmation, but %d requests from %s are already waiting for a person, the most the policy allows. No new request was made: wait until a person has answered the waiting requests (or they expire), then try again.", e.quotedTool(), adm.Pending, whose),
		authorize: "a person answering " + whose + "'s waiting approval requests, then the same call again",
	})
	if adm.Notify {
		e.g.notify(ctx, portcullis.Notice{
			Kind: portcullis.NoticePendingLimit, Agent: e.c.Agent, Session: e.c.Session, Tool: e.canonical,
			DecisionID: e.d.DecisionID,
			Reason:     fmt.Sprintf("%s has %d approval requests waiting for you, the most the policy allows (approvals.%s: %d); its further calls that need a person are refused until you answer some", capitalize(whose), adm.Pending, key, limit),
		})
	}
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// requestGrant finds a grant carried in the request that satisfies the
// call. Request grants are never consumed.
func (e *eval) requestGrant() (portcullis.Grant, bool) {
	if len(e.c.Grants) == 0 {
		return portcullis.Grant{}, false
	}
	var digest string
	q := portcullis.GrantQuery{Session: e.c.Session, Tool: e.canonical, ElementType: e.c.ElementType, Level: e.level, Now: e.g.clock.Now()}
	for _, g := range e.c.Grants {
		if r := e.pol.routes[g.Tool]; r != nil {
			g.Tool = r.name
		}
		// A grant in the request belongs to the request's session.
		g.Session = e.c.Session
		if g.Kind == portcullis.GrantSingle {
			if digest == "" {
				var err error
				if digest, err = portcullis.ArgsDigest(e.c.Args); err != nil {
					return portcullis.Grant{}, false
				}
				q.ArgsDigest = digest
			}
			d, err := portcullis.ArgsDigest(g.Args)
			if err != nil {
				continue
			}
			g.ArgsDigest = d
		}
		if q.Covers(&g) {
			return g, true
		}
	}
	return portcullis.Grant{}, false
}

func (e *eval) grantAllows(ctx context.Context, what string, g portcullis.Grant) {
	if e.overBudget && !e.forceBudget(ctx) {
		return
	}
	e.source = portcullis.SourceSessionGrant
	e.end(&portcullis.TraceEntry{Stage: "confirmation", Result: "satisfied by " + string(g.Kind) + " " + what}, ending{
		outcome: portcullis.OutcomeAllow, level: e.level,
		reason: "Operation " + e.quotedTool() + " was confirmed by a person (" + string(g.Kind) + " grant)",
	})
}

func (e *eval) confirmReason() string {
	label := "requires confirmation each time"
	if e.level == portcullis.ConfirmSession {
		label = "requires confirmation once per session"
	}
	var why string
	switch {
	case e.overBudget:
		why = e.overReason + " A person may let this one call through past the budget."
	case e.paused:
		why = "The autonomous run pauses for a person: " + e.pauseReason + "."
	case e.matchedPolicy == "confirm":
		why = "Active element " + quote(e.sourceElement) + " policy requires confirmation for this operation."
	case e.c.Upstream != nil && e.c.Upstream.New:
		why = "Its upstream " + quote(e.c.Upstream.Server) + " first offered it after its tools were pinned, and no person has accepted it yet (portcullis tools accept)."
	case e.c.Upstream != nil && e.c.Upstream.Changed:
		why = "Its definition at upstream " + quote(e.c.Upstream.Server) + " changed, and no person has accepted the change yet (portcullis tools accept)."
	case e.r == nil:
		why = "It is not classified by the policy, and unknown operations are never auto-approved."
	case e.c.Upstream != nil && e.c.Upstream.Annotated && e.c.Upstream.Destructive && e.r.base < portcullis.ConfirmSingleUse:
		why = "Its upstream " + quote(e.c.Upstream.Server) + " marks it destructive (destructiveHint)."
	case e.risk == portcullis.RiskPolicyWrite:
		why = "It writes the policy document, which only a person may change."
	case e.r.rationale != "":
		why = e.r.rationale
	default:
		why = "This operation modifies data and requires human approval before proceeding."
	}
	if cl := e.shellClass; cl != nil && cl.Category.Rank() > 0 && len(cl.Reasons) > 0 {
		// Name the finding, not only the level: (dangerous: rm with -r and -f on ~).
		label += " (" + string(cl.Category) + ": " + strings.Join(cl.Reasons, "; ") + ")"
	}
	s := "Operation " + e.quotedTool() + " " + label + ". " + why
	if len(e.conflicts) > 0 {
		names := make([]string, len(e.conflicts))
		for i, c := range e.conflicts {
			names[i] = quote(c.Name)
		}
		verb := "is"
		if len(names) > 1 {
			verb = "are"
		}
		s += " (Note: " + strings.Join(names, ", ") + " would auto-approve this but " + verb + " overridden by the confirm policy.)"
	}
	return s
}

func (e *eval) allowReason() string {
	q := e.quotedTool()
	if e.sourceElement != "" {
		return "Operation " + q + " auto-approved by element " + e.pol.elems[e.allowElem].quoted
	}
	return "Operation " + q + " auto-approved by default policy"
}

func (e *eval) quotedTool() string {
	if e.r != nil {
		return e.r.quoted
	}
	return quote(e.canonical)
}

func (e *eval) denyReason() string {
	if e.r != nil && e.r.rationale != "" {
		return "Operation " + e.quotedTool() + " is denied by the policy: " + e.r.rationale
	}
	return "Operation " + e.quotedTool() + " is denied by the policy"
}

// summary renders the tool's summary template over the arguments, for
// people reading an approval request; the tool name when there is none.
func (e *eval) summary() string {
	if e.r == nil || e.r.summary == nil {
		return e.canonical
	}
	var b strings.Builder
	if err := e.r.summary.Execute(&b, e.c.Args); err != nil {
		return e.canonical
	}
	return e.canonical + ": " + b.String()
}

var idEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

func (g *Gate) approvalID() (string, error) {
	var b [15]byte
	if _, err := io.ReadFull(g.rand, b[:]); err != nil {
		return "", fmt.Errorf("approval id: %w", err)
	}
	return "apr_" + strings.ToLower(idEncoding.EncodeToString(b[:])), nil
}

func quote(s string) string { return strconv.Quote(s) }
