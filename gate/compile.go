package gate

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/template"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/shell"
)

// memoLimit bounds the per-policy cache of element matches by tool name, so
// a stream of invented tool names cannot grow it without end; past the limit
// names are matched afresh on every call.
const memoLimit = 1 << 16

// listKind is one of an element's gatekeeper lists.
type listKind uint8

const (
	listDeny listKind = iota
	listConfirm
	listAllow
)

func (k listKind) String() string {
	switch k {
	case listDeny:
		return "deny"
	case listConfirm:
		return "confirm"
	}
	return "allow"
}

// match records that a pattern of an element's list matched a name.
type match struct {
	elem    int32
	list    listKind
	pattern string
	// trace is the elements stage's result when this match decides,
	// computed once: `deny list of "Security Persona" matches ("delete_*")`.
	trace string
}

type globRef struct {
	g glob
	m match
}

// route is a compiled `tools` entry.
type route struct {
	name       string
	endpoint   portcullis.Endpoint
	base       portcullis.Level
	elevatable bool
	rationale  string
	risk       portcullis.Risk
	shellArg   string
	pathArg    string
	// outsideWorkdir is the least level of a write outside the call's
	// working directory (LevelUnset: the path does not matter).
	outsideWorkdir portcullis.Level
	summary        *template.Template
	// trace is the route stage's result text, computed once.
	trace string
	// quoted is the name, quoted, for reasons.
	quoted string
	// redact names the arguments the audit log leaves out.
	redact []string
	// level is the tool's explicit defaultLevel (LevelUnset: none).
	level portcullis.Level
	// mode overrides the policy's mode for this tool ("": the policy's).
	mode portcullis.Mode
}

// element is a compiled element.
type element struct {
	name      string
	quoted    string
	typ       portcullis.ElementType
	allowed   []string // scope.allowedTypes
	blocked   []string // scope.blockedTypes
	sandboxes bool     // its deny list matches confirm_operation
	autonomy  *portcullis.Autonomy
}

// compiled is a policy prepared for deciding: tools indexed by name and
// alias, patterns compiled and indexed, the default active set resolved.
// It is immutable once built except for the match memo.
type compiled struct {
	pol    *portcullis.Policy
	routes map[string]*route
	// requests are the routes of the requests upstream MCP servers send
	// to their client, by method (policy upstreamRequests).
	requests      map[string]*route
	elems         []element
	elemIndex     map[string]int
	defaultActive []bool

	// Exact patterns by name: deny and confirm lists match case-insensitively
	// (keys lower-cased), allow lists exactly.
	exactFold map[string][]match
	exact     map[string][]match
	globsFold globIndex
	globs     globIndex

	memo  sync.Map // canonical tool name → []match
	memoN atomic.Int32

	policyDocBase string   // lower-cased base name of the policy document
	protected     []string // cleaned absolute paths of Portcullis's own files

	// shell classifies the commands of shell tools; nil when the policy has
	// none and no shell rules.
	shell *shell.Classifier
	// agents maps an agent element's name to its autonomy envelope (nil:
	// the defaults).
	agents map[string]*portcullis.Autonomy
}

func compile(p *portcullis.Policy, protected []string, home string) (*compiled, error) {
	c := &compiled{
		pol:       p,
		routes:    make(map[string]*route, len(p.Tools)),
		elemIndex: make(map[string]int, len(p.Elements)),
		exactFold: map[string][]match{},
		exact:     map[string][]match{},
	}
	needShell := len(p.Shell.Rules) > 0
	for i := range p.Tools {
		t := &p.Tools[i]
		if t.Name == "" {
			return nil, fmt.Errorf("tools[%d]: empty name", i)
		}
		r := &route{
			name:           t.Name,
			endpoint:       t.Endpoint,
			base:           t.Level(),
			elevatable:     t.CanBeElevated,
			rationale:      t.Rationale,
			risk:           t.Risk,
			shellArg:       t.ShellArg,
			pathArg:        t.PathArg,
			outsideWorkdir: t.OutsideWorkdir,
			redact:         t.Redact,
			level:          t.DefaultLevel,
			mode:           t.Mode,
		}
		if t.Summary != "" {
			tmpl, err := template.New(t.Name).Option("missingkey=zero").Parse(t.Summary)
			if err != nil {
				return nil, fmt.Errorf("tool %q: summary: %w", t.Name, err)
			}
			r.summary = tmpl
		}
		if r.base == portcullis.Deny {
			// DENY means never allowed: no element's allow lifts it,
			// whatever canBeElevated says.
			r.elevatable = false
		}
		if r.shellArg != "" {
			needShell = true
		}
		r.trace = routeTrace(r)
		r.quoted = strconv.Quote(r.name)
		for _, n := range append([]string{t.Name}, t.Aliases...) {
			if _, dup := c.routes[n]; dup {
				return nil, fmt.Errorf("tool %q: name or alias %q is defined twice", t.Name, n)
			}
			c.routes[n] = r
		}
	}
	reqs, err := compileUpstreamRequests(p)
	if err != nil {
		return nil, fmt.Errorf("upstreamRequests: %w", err)
	}
	c.requests = reqs
	c.defaultActive = make([]bool, len(p.Elements))
	c.elems = make([]element, len(p.Elements))
	for i := range p.Elements {
		e := &p.Elements[i]
		if _, dup := c.elemIndex[e.Name]; dup {
			return nil, fmt.Errorf("element %q is defined twice", e.Name)
		}
		c.elemIndex[e.Name] = i
		c.defaultActive[i] = e.Active
		c.elems[i] = element{
			name:     e.Name,
			quoted:   strconv.Quote(e.Name),
			typ:      e.Type,
			allowed:  e.Gatekeeper.Scope.AllowedTypes,
			blocked:  e.Gatekeeper.Scope.BlockedTypes,
			autonomy: e.Autonomy,
		}
		lists := [...][]string{listDeny: e.Gatekeeper.Deny, listConfirm: e.Gatekeeper.Confirm, listAllow: e.Gatekeeper.Allow}
		for k, list := range lists {
			kind := listKind(k)
			for _, pat := range list {
				if pat == "" {
					return nil, fmt.Errorf("element %q: empty pattern in %s", e.Name, kind)
				}
				if kind == listDeny && matchesFold(pat, portcullis.ConfirmOperation) {
					c.elems[i].sandboxes = true
				}
				// Ungatable operations are never matched by any list;
				// confirm_operation is never allowed. The policy linter
				// removes them; this is the engine's own guarantee.
				m := match{elem: int32(i), list: kind, pattern: pat,
					trace: kind.String() + " list of " + strconv.Quote(e.Name) + " matches (" + strconv.Quote(pat) + ")"}
				fold := kind != listAllow
				key := pat
				if fold {
					key = strings.ToLower(pat)
				}
				switch {
				case isGlob(pat) && fold:
					c.globsFold.add(globRef{compileGlob(key), m})
				case isGlob(pat):
					c.globs.add(globRef{compileGlob(key), m})
				case fold:
					c.exactFold[key] = append(c.exactFold[key], m)
				default:
					c.exact[key] = append(c.exact[key], m)
				}
			}
		}
	}
	if p.PolicyDocument != "" {
		c.policyDocBase = strings.ToLower(filepath.Base(p.PolicyDocument))
	}
	for _, path := range append(protected, p.Source) {
		if path == "" {
			continue
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil, fmt.Errorf("protected path %q: %w", path, err)
		}
		c.protected = append(c.protected, abs)
	}
	if needShell {
		// Building the classifier checks every shell rule's match and
		// notMatch examples: a policy whose rules do not do what their
		// examples say does not load.
		sh, err := shell.New(shell.Options{Rules: p.Shell.Rules, ProtectedPaths: c.protected, Home: home})
		if err != nil {
			return nil, fmt.Errorf("shell.rules: %w", err)
		}
		c.shell = sh
	}
	c.agents = map[string]*portcullis.Autonomy{}
	for i := range p.Elements {
		if e := &p.Elements[i]; e.Type == portcullis.Agent {
			c.agents[e.Name] = e.Autonomy
		}
	}
	return c, nil
}

func matchesFold(pattern, name string) bool {
	pattern = strings.ToLower(pattern)
	if !isGlob(pattern) {
		return pattern == name
	}
	g := compileGlob(pattern)
	return g.match(name)
}

func routeTrace(r *route) string {
	var b strings.Builder
	b.WriteString(r.name)
	b.WriteString(": ")
	b.WriteString(string(r.endpoint))
	b.WriteString(", base level ")
	b.WriteString(r.base.String())
	if !r.elevatable {
		b.WriteString(", not elevatable")
	}
	if r.risk != "" {
		b.WriteString(", risk ")
		b.WriteString(string(r.risk))
	}
	if r.shellArg != "" {
		b.WriteString(", shell command in argument ")
		b.WriteString(r.shellArg)
	}
	b.WriteString(" (policy tools entry)")
	return b.String()
}

// matches returns every (element, list) whose patterns match the canonical
// tool name, the first matching pattern of each, in policy file order then
// deny, confirm, allow. Ungatable operations match nothing, and
// confirm_operation never matches an allow list.
func (c *compiled) matches(name string) []match {
	if v, ok := c.memo.Load(name); ok {
		return v.([]match)
	}
	ms := c.computeMatches(name)
	if c.memoN.Load() < memoLimit {
		if _, loaded := c.memo.LoadOrStore(name, ms); !loaded {
			c.memoN.Add(1)
		}
	}
	return ms
}

func (c *compiled) computeMatches(name string) []match {
	if portcullis.IsUngatable(name) {
		return nil
	}
	lname := strings.ToLower(name)
	var ms []match
	ms = append(ms, c.exactFold[lname]...)
	ms = append(ms, c.exact[name]...)
	ms = c.globsFold.matches(ms, lname)
	ms = c.globs.matches(ms, name)
	if name == portcullis.ConfirmOperation {
		ms = slices.DeleteFunc(ms, func(m match) bool { return m.list == listAllow })
	}
	// Stable sort keeps, within one (element, list), the pattern that comes
	// first among exact names then globs; then keep one per (element, list).
	slices.SortStableFunc(ms, func(a, b match) int {
		if a.elem != b.elem {
			return cmp.Compare(a.elem, b.elem)
		}
		return cmp.Compare(a.list, b.list)
	})
	ms = slices.CompactFunc(ms, func(a, b match) bool { return a.elem == b.elem && a.list == b.list })
	return slices.Clip(ms)
}

// quotedElem returns an element's name quoted, without allocating for the
// policy's own elements.
func (c *compiled) quotedElem(name string) string {
	if i, ok := c.elemIndex[name]; ok {
		return c.elems[i].quoted
	}
	return strconv.Quote(name)
}

// globIndex holds glob patterns by their first byte when it is a literal,
// so a name is tried only against the globs that can match its first byte
// and those that start with a wildcard.
type globIndex struct {
	byFirst  map[byte][]globRef
	wildHead []globRef
}

func (x *globIndex) add(r globRef) {
	p := r.g.pattern
	if p[0] == '*' || p[0] == '?' {
		x.wildHead = append(x.wildHead, r)
		return
	}
	if x.byFirst == nil {
		x.byFirst = map[byte][]globRef{}
	}
	x.byFirst[p[0]] = append(x.byFirst[p[0]], r)
}

// matches appends the matches of every glob that matches name.
func (x *globIndex) matches(ms []match, name string) []match {
	if name != "" {
		for _, r := range x.byFirst[name[0]] {
			if r.g.match(name) {
				ms = append(ms, r.m)
			}
		}
	}
	for _, r := range x.wildHead {
		if r.g.match(name) {
			ms = append(ms, r.m)
		}
	}
	return ms
}
