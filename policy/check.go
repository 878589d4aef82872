package policy

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/template"
	"unicode"

	"github.com/portcullis/portcullis"
	"gopkg.in/yaml.v3"
)

// MaxNameBytes bounds tool names, aliases and patterns, as the decision
// request bounds a call's tool name.
const MaxNameBytes = 500

// maxGlobComparisons bounds the "matches no tool" lint: with more tools ×
// distinct globs than this, globs are not checked (exact names still are).
// maxGlobSteps bounds the matching work itself; when it runs out, the
// remaining globs are not checked either.
const (
	maxGlobComparisons = 5_000_000
	maxGlobSteps       = 100_000_000
)

var envName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })

// checker runs the semantic checks shared by Parse and Validate over a
// Policy, applies zero-value defaults, cleans the element lists and lints.
// With a locator (Parse) its messages carry lines, and problems at nodes
// the parser already reported are not reported again.
type checker struct {
	pol  *portcullis.Policy
	rep  *report
	file string
	loc  *locator // nil for Validate

	names      map[string]nameRef // tool names and aliases
	allNames   []string           // the same, for scanning with a glob
	foldNames  map[string]bool    // the same, lower-cased (deny and confirm ignore case)
	lowerNames []string
	globs      map[string]bool // glob → matches some name; nil when not checked
	globSteps  int             // matching work left for the lint
}

// nameRef is where a name in `tools` comes from: a tool, or one of its aliases.
type nameRef struct {
	tool, alias int // alias -1: the tool's own name
}

// path is a path into the policy's YAML: mapping keys and list (or tools)
// indexes.
type path []any

func (c *checker) errorf(p path, w at, format string, args ...any) {
	if line, ok := c.loc.find(p); ok {
		c.rep.errs = append(c.rep.errs, problem{file: c.file, line: line, where: w.String(), msg: fmt.Sprintf(format, args...)})
	}
}

func (c *checker) warnf(p path, w at, format string, args ...any) {
	if line, ok := c.loc.find(p); ok {
		c.rep.warns = append(c.rep.warns, problem{file: c.file, line: line, where: w.String(), msg: fmt.Sprintf(format, args...)})
	}
}

// lineOf returns " (line N)" for the node at p, or "" when lines are unknown.
func (c *checker) lineOf(p path) string {
	if line, _ := c.loc.find(p); line > 0 {
		return " (line " + strconv.Itoa(line) + ")"
	}
	return ""
}

func (c *checker) run() {
	p := c.pol
	switch {
	case p.Version == 0:
		c.errorf(path{"version"}, at{path: "version"}, "missing (want version: 1)")
	case p.Version != 1:
		c.errorf(path{"version"}, at{path: "version"}, "unsupported version %d (want 1)", p.Version)
	}
	if p.Mode == "" {
		p.Mode = portcullis.ModeEnforce
	} else if _, err := portcullis.ParseMode(string(p.Mode)); err != nil {
		c.errorf(path{"mode"}, at{path: "mode"}, "unknown mode %s (want enforce, shadow or off)", quote(string(p.Mode)))
	}
	switch p.UnknownTools {
	case "":
		p.UnknownTools = portcullis.UnknownConfirm
	case portcullis.UnknownConfirm, portcullis.UnknownDeny:
	default:
		c.errorf(path{"unknownTools"}, at{path: "unknownTools"}, "unknown setting %s (want confirm or deny)", quote(string(p.UnknownTools)))
	}
	p.PolicyDocument = cleanPath(p.PolicyDocument)
	c.tools()
	c.elements()
	c.shell()
	c.validator()
	c.migrations()
	if p.Approvals.Wait == 0 {
		p.Approvals.Wait = defaultApprovalsWait
	} else if p.Approvals.Wait < 0 {
		c.errorf(path{"approvals", "wait"}, at{path: "approvals.wait"}, "duration %s is not more than 0", p.Approvals.Wait)
	}
	c.pendingCaps()
	c.upstreamRequests()
	c.budgets()
	if r := p.Audit.Retention; r.MaxAge < 0 {
		c.errorf(path{"audit", "retention", "maxAge"}, at{path: "audit.retention.maxAge"}, "duration %s is not more than 0", r.MaxAge)
	} else if r.MaxRows < 0 {
		c.errorf(path{"audit", "retention", "maxRows"}, at{path: "audit.retention.maxRows"}, "%d is not more than 0", r.MaxRows)
	}
}

// pendingCaps checks approvals.maxPendingPerAgent and
// maxPendingPerSession (a Policy built in code is not parsed) and fills in
// their defaults.
func (c *checker) pendingCaps() {
	a := &c.pol.Approvals
	if a.MaxPendingPerAgent > 0 && a.MaxPendingPerSession > a.MaxPendingPerAgent {
		c.warnf(path{"approvals", "maxPendingPerSession"}, at{path: "approvals.maxPendingPerSession"},
			"%d is more than maxPendingPerAgent (%d): a session's requests are its agent's, so the agent's cap is reached first", a.MaxPendingPerSession, a.MaxPendingPerAgent)
	}
	for _, f := range []struct {
		key string
		v   *int
	}{{"maxPendingPerAgent", &a.MaxPendingPerAgent}, {"maxPendingPerSession", &a.MaxPendingPerSession}} {
		switch {
		case *f.v == 0:
			*f.v = portcullis.DefaultMaxPending
		case *f.v < 0 || *f.v > maxPendingCap:
			c.errorf(path{"approvals", f.key}, at{path: "approvals." + f.key}, "%d is out of range (want 1 to %d)", *f.v, maxPendingCap)
		}
	}
}

// upstreamRequests checks upstreamRequests and fills in its defaults:
// sampling deny (a server must not drive the client's model unasked),
// elicitation and roots allow.
func (c *checker) upstreamRequests() {
	u := &c.pol.UpstreamRequests
	for _, r := range []struct {
		key  string
		rule *portcullis.UpstreamRule
		def  portcullis.UpstreamRule
	}{
		{"sampling", &u.Sampling, portcullis.UpstreamDeny},
		{"elicitation", &u.Elicitation, portcullis.UpstreamAllow},
		{"roots", &u.Roots, portcullis.UpstreamAllow},
	} {
		switch *r.rule {
		case "":
			*r.rule = r.def
		case portcullis.UpstreamAllow, portcullis.UpstreamConfirm, portcullis.UpstreamDeny:
		default:
			c.errorf(path{"upstreamRequests", r.key}, at{path: "upstreamRequests." + r.key}, "unknown rule %s (want allow, confirm or deny)", quote(string(*r.rule)))
		}
	}
}

// nameProblem says what is wrong with a tool name or alias, or "".
func nameProblem(s string) string {
	switch {
	case s == "":
		return "empty name"
	case len(s) > MaxNameBytes:
		return fmt.Sprintf("name is %d bytes long, more than the limit of %d", len(s), MaxNameBytes)
	case strings.IndexFunc(s, unicode.IsSpace) >= 0:
		return fmt.Sprintf("name %s contains whitespace", quote(s))
	}
	return ""
}

// recoveryOperation reports whether op is on the human recovery path (an
// ungatable operation, or confirm_operation), which is auto-approved on
// purpose so that people cannot be locked out.
func recoveryOperation(op string) bool {
	return portcullis.IsUngatable(op) || op == portcullis.ConfirmOperation
}

func toolAt(t *portcullis.ToolPolicy) at { return at{what: "tool", name: t.Name} }

// tools checks `tools` and collects the names and aliases.
func (c *checker) tools() {
	tools := c.pol.Tools
	n := len(tools)
	for i := range tools {
		n += len(tools[i].Aliases)
	}
	c.names = make(map[string]nameRef, n)
	c.allNames = make([]string, 0, n)
	for i := range tools {
		t := &tools[i]
		if msg := nameProblem(t.Name); msg != "" {
			c.errorf(path{"tools", i}, toolAt(t), "%s", msg)
		} else if prev, dup := c.names[t.Name]; dup {
			c.errorf(path{"tools", i}, toolAt(t), "duplicate tool (first%s)", c.atLine(path{"tools", prev.tool}))
		} else {
			c.names[t.Name] = nameRef{i, -1}
			c.allNames = append(c.allNames, t.Name)
		}
		w := toolAt(t)
		if t.Endpoint == "" {
			c.errorf(path{"tools", i, "endpoint"}, w.key("endpoint"), "missing (want READ, CREATE, UPDATE, DELETE or EXECUTE)")
		} else if _, err := portcullis.ParseEndpoint(string(t.Endpoint)); err != nil {
			c.errorf(path{"tools", i, "endpoint"}, w.key("endpoint"), "unknown endpoint %s (want READ, CREATE, UPDATE, DELETE or EXECUTE)", quote(string(t.Endpoint)))
		} else if t.DefaultLevel.Valid() && t.DefaultLevel < t.Endpoint.DefaultLevel() && !recoveryOperation(t.Name) && t.Rationale == "" {
			c.warnf(path{"tools", i, "defaultLevel"}, w.key("defaultLevel"), "%s is less strict than the default for %s operations (%s)", t.DefaultLevel, t.Endpoint, t.Endpoint.DefaultLevel())
		}
		if t.DefaultLevel != portcullis.LevelUnset && !t.DefaultLevel.Valid() {
			c.errorf(path{"tools", i, "defaultLevel"}, w.key("defaultLevel"), "invalid level %s (want %s)", t.DefaultLevel, portcullis.LevelNames)
		}
		if t.Mode != "" {
			if _, err := portcullis.ParseMode(string(t.Mode)); err != nil {
				c.errorf(path{"tools", i, "mode"}, w.key("mode"), "unknown mode %s (want enforce, shadow or off)", quote(string(t.Mode)))
			}
		}
		if t.Risk != "" {
			if _, err := portcullis.ParseRisk(string(t.Risk)); err != nil {
				c.errorf(path{"tools", i, "risk"}, w.key("risk"), "unknown risk %s (want external-write or policy-write)", quote(string(t.Risk)))
			}
		}
		if t.Summary != "" {
			if _, err := template.New(t.Name).Parse(t.Summary); err != nil {
				c.errorf(path{"tools", i, "summary"}, w.key("summary"), "not a valid template: %v", err)
			}
		}
		if t.ShellArg != "" && strings.TrimSpace(t.ShellArg) == "" {
			c.errorf(path{"tools", i, "shellArg"}, w.key("shellArg"), "empty (want the name of the argument that holds the command)")
		}
		if t.PathArg != "" && strings.TrimSpace(t.PathArg) == "" {
			c.errorf(path{"tools", i, "pathArg"}, w.key("pathArg"), "empty (want the name of the argument that holds the file path)")
		}
		if t.OutsideWorkdir != portcullis.LevelUnset {
			switch {
			case t.PathArg == "":
				c.errorf(path{"tools", i, "outsideWorkdir"}, w.key("outsideWorkdir"), "needs pathArg (the argument that holds the file path it judges)")
			case t.Endpoint == portcullis.Read:
				c.errorf(path{"tools", i, "outsideWorkdir"}, w.key("outsideWorkdir"), "applies to writes; this tool's endpoint is READ")
			}
		}
	}
	// Aliases after all names, so that an alias colliding with a later
	// tool is found too.
	for i := range tools {
		t := &tools[i]
		for j, a := range t.Aliases {
			p := path{"tools", i, "aliases", j}
			w := toolAt(t).key("aliases").index(j)
			if msg := nameProblem(a); msg != "" {
				c.errorf(p, w, "%s", msg)
				continue
			}
			prev, taken := c.names[a]
			switch {
			case !taken:
				c.names[a] = nameRef{i, j}
				c.allNames = append(c.allNames, a)
			case prev.tool == i && prev.alias < 0:
				c.errorf(p, w, "alias %s is the tool's own name", quote(a))
			case prev.alias < 0:
				c.errorf(p, w, "alias %s is also the name of tool %s%s", quote(a), quote(tools[prev.tool].Name), c.lineOf(path{"tools", prev.tool}))
			case prev.tool == i:
				c.errorf(p, w, "alias %s is listed twice (first as aliases[%d])", quote(a), prev.alias)
			default:
				c.errorf(p, w, "alias %s is also an alias of tool %s (aliases[%d]%s)", quote(a), quote(tools[prev.tool].Name), prev.alias, c.atLine(path{"tools", prev.tool, "aliases", prev.alias}))
			}
		}
	}
}

// atLine returns " at line N", or "" when lines are unknown.
func (c *checker) atLine(p path) string {
	if line, _ := c.loc.find(p); line > 0 {
		return " at line " + strconv.Itoa(line)
	}
	return ""
}

func elementAt(e *portcullis.Element, i int) at {
	if strings.TrimSpace(e.Name) == "" {
		return at{path: "elements[" + strconv.Itoa(i) + "]"}
	}
	return at{what: "element", name: e.Name}
}

// elements checks `elements` and cleans their lists.
func (c *checker) elements() {
	els := c.pol.Elements
	c.prepareGlobs()
	byName := make(map[string]int, len(els))
	byFold := make(map[string]int, len(els))
	for i := range els {
		e := &els[i]
		w := elementAt(e, i)
		if strings.TrimSpace(e.Name) == "" {
			c.errorf(path{"elements", i, "name"}, w.key("name"), "missing (want a unique name)")
		} else if prev, dup := byName[e.Name]; dup {
			c.errorf(path{"elements", i, "name"}, w, "duplicate name (first%s)", c.atLine(path{"elements", prev}))
		} else {
			byName[e.Name] = i
			fold := strings.ToLower(e.Name)
			if prev, dup := byFold[fold]; dup {
				c.errorf(path{"elements", i, "name"}, w, "name differs only in case from element %s%s; names must differ by more than case", quote(els[prev].Name), c.lineOf(path{"elements", prev}))
			} else {
				byFold[fold] = i
			}
		}
		typeOK := false
		if e.Type == "" {
			c.errorf(path{"elements", i, "type"}, w.key("type"), "missing (want persona, skill, ensemble or agent)")
		} else if _, err := portcullis.ParseElementType(string(e.Type)); err != nil {
			c.errorf(path{"elements", i, "type"}, w.key("type"), "unknown element type %s (want persona, skill, ensemble or agent)", quote(string(e.Type)))
		} else {
			typeOK = true
		}
		c.gatekeeper(i, e, w)
		if a := e.Autonomy; a != nil {
			c.autonomy(i, e, w, typeOK)
		}
		g := &e.Gatekeeper
		if len(g.Allow)+len(g.Confirm)+len(g.Deny)+len(g.Scope.AllowedTypes)+len(g.Scope.BlockedTypes) == 0 && e.Autonomy == nil {
			c.warnf(path{"elements", i, "gatekeeper"}, w, "has no policy (no gatekeeper lists, scope or autonomy): it changes nothing while active")
		}
	}
}

// gatekeeper checks and cleans an element's lists: patterns are checked,
// ungatable operations removed from every list, confirm_operation from
// allow, duplicates dropped; overlaps with allow and patterns that match no
// tool are warned about.
func (c *checker) gatekeeper(i int, e *portcullis.Element, w at) {
	g := &e.Gatekeeper
	gw := w.key("gatekeeper")
	g.Allow = c.gatekeeperList(i, "allow", g.Allow, gw, nil)
	var allowed map[string]bool
	if len(g.Allow) > 0 {
		allowed = make(map[string]bool, len(g.Allow))
		for _, s := range g.Allow {
			allowed[s] = true
		}
	}
	g.Confirm = c.gatekeeperList(i, "confirm", g.Confirm, gw, allowed)
	g.Deny = c.gatekeeperList(i, "deny", g.Deny, gw, allowed)
	for _, list := range []struct {
		key   string
		types []string
	}{{"allowedTypes", g.Scope.AllowedTypes}, {"blockedTypes", g.Scope.BlockedTypes}} {
		for j, t := range list.types {
			if !slices.Contains(scopeTypes, t) {
				c.errorf(path{"elements", i, "gatekeeper", "scope", list.key, j}, gw.key("scope").key(list.key).index(j),
					"unknown element type %s (want %s)", quote(t), listWords(scopeTypes))
			}
		}
	}
}

// scopeTypes are the element types a scope may name: the types of element
// an operation can act on (a request's elementType). They are DollhouseMCP's
// six element types: the four that carry policy, and memory and template.
var scopeTypes = portcullis.TargetTypes

func (c *checker) gatekeeperList(i int, list string, pats []string, gw at, allowed map[string]bool) []string {
	w := gw.key(list)
	return cleanList(pats, func(j int, s string, dupOf int) bool {
		p := path{"elements", i, "gatekeeper", list, j}
		w := w.index(j)
		if msg := patternProblem(s); msg != "" {
			c.errorf(p, w, "%s", msg)
			return false
		}
		switch {
		case portcullis.IsUngatable(s):
			c.warnf(p, w, "%s cannot be gated (a recovery operation that must stay open to people); removed", quote(s))
			return false
		case list == "allow" && s == portcullis.ConfirmOperation:
			c.warnf(p, w, "%s cannot be allowed (an element cannot allow confirming; it may only confirm or deny it); removed", quote(s))
			return false
		case dupOf >= 0:
			c.warnf(p, w, "%s is listed twice (first as %s[%d]); removed", quote(s), list, dupOf)
			return false
		}
		if strings.IndexFunc(s, unicode.IsSpace) >= 0 {
			c.warnf(p, w, "pattern %s contains whitespace; operation names never do", quote(s))
		}
		if allowed[s] {
			c.warnf(p, w, "%s is also in allow; %s wins", quote(s), list)
		}
		switch {
		case list == "allow" && (len(c.pol.Tools) == 0 || !c.matchesSomeTool(s, false)):
			// The gate never elevates a tool the policy does not classify;
			// an upstream's MCP annotations classify one only when the
			// operator trusts that upstream.
			c.warnf(p, w, "%s matches no tool in tools, and allow never auto-approves a tool the policy does not classify: classify it in tools (an upstream's MCP annotations classify it only if its upstream has trustAnnotations)", quote(s))
		case list != "allow" && s != portcullis.ConfirmOperation && !c.matchesSomeTool(s, true):
			c.warnf(p, w, "%s matches no tool in tools; an upstream MCP server may still offer one", quote(s))
		}
		return true
	})
}

// cleanList calls keep for each entry, with the index of an earlier equal
// entry (or -1), and returns the entries it keeps. The list is copied only
// when something is dropped.
func cleanList(list []string, keep func(j int, s string, dupOf int) bool) []string {
	var first map[string]int
	if len(list) > 8 {
		first = make(map[string]int, len(list))
	}
	out := list
	dropped := false
	for j, s := range list {
		dupOf := -1
		if first != nil {
			if k, ok := first[s]; ok {
				dupOf = k
			} else {
				first[s] = j
			}
		} else if k := slices.Index(list[:j], s); k >= 0 {
			dupOf = k
		}
		ok := keep(j, s, dupOf)
		switch {
		case !ok && !dropped:
			out = append(make([]string, 0, len(list)-1), list[:j]...)
			dropped = true
		case ok && dropped:
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// patternProblem says what is wrong with a pattern, or "".
func patternProblem(s string) string {
	switch {
	case strings.TrimSpace(s) == "":
		return "empty pattern"
	case len(s) > MaxNameBytes:
		return fmt.Sprintf("pattern is %d bytes long, more than the limit of %d", len(s), MaxNameBytes)
	}
	return ""
}

// prepareGlobs decides whether the "matches no tool" lint runs for globs:
// only when there are tools and tools × distinct globs stays under
// maxGlobComparisons.
func (c *checker) prepareGlobs() {
	if len(c.pol.Tools) == 0 {
		return
	}
	globs := map[string]bool{}
	for i := range c.pol.Elements {
		g := &c.pol.Elements[i].Gatekeeper
		for _, list := range [][]string{g.Allow, g.Confirm, g.Deny} {
			for _, s := range list {
				if isGlob(s) {
					globs[s] = false
				}
			}
		}
	}
	if len(globs) > 0 && len(c.allNames)*len(globs) > maxGlobComparisons {
		return
	}
	c.globs = make(map[string]bool, len(globs))
	c.globSteps = maxGlobSteps
}

// matchesSomeTool reports whether a pattern matches a tool name or alias,
// ignoring case when fold is set (as the gate does for deny and confirm);
// true when the lint does not apply (no tools, or too many globs).
func (c *checker) matchesSomeTool(s string, fold bool) bool {
	if len(c.pol.Tools) == 0 {
		return true
	}
	names, key := c.allNames, s
	if fold {
		if c.foldNames == nil {
			c.foldNames = make(map[string]bool, len(c.allNames))
			c.lowerNames = make([]string, len(c.allNames))
			for i, n := range c.allNames {
				c.lowerNames[i] = strings.ToLower(n)
				c.foldNames[c.lowerNames[i]] = true
			}
		}
		names, s = c.lowerNames, strings.ToLower(s)
		key = "\x00" + s // fold and exact results of one glob differ
	}
	if !isGlob(s) {
		if fold {
			return c.foldNames[s]
		}
		_, ok := c.names[s]
		return ok
	}
	if c.globs == nil {
		return true
	}
	m, done := c.globs[key]
	if done {
		return m
	}
	for _, name := range names {
		ok, steps := match(s, name, c.globSteps)
		c.globSteps -= steps
		if c.globSteps < 0 {
			c.globs = nil // out of budget: check no more globs
			return true
		}
		if ok {
			m = true
			break
		}
	}
	c.globs[key] = m
	return m
}

// autonomy checks an agent's envelope.
func (c *checker) autonomy(i int, e *portcullis.Element, w at, typeOK bool) {
	a := e.Autonomy
	aw := w.key("autonomy")
	if typeOK && e.Type != portcullis.Agent {
		c.errorf(path{"elements", i, "autonomy"}, aw, "only elements of type agent have autonomy; this one is a %s", e.Type)
	}
	switch a.RiskTolerance {
	case "":
		a.RiskTolerance = portcullis.Moderate
	case portcullis.Conservative, portcullis.Moderate, portcullis.Aggressive:
	default:
		c.errorf(path{"elements", i, "autonomy", "riskTolerance"}, aw.key("riskTolerance"),
			"unknown risk tolerance %s (want conservative, moderate or aggressive)", quote(string(a.RiskTolerance)))
	}
	if a.MaxAutonomousSteps < 0 || a.MaxAutonomousSteps > 10000 {
		c.errorf(path{"elements", i, "autonomy", "maxAutonomousSteps"}, aw.key("maxAutonomousSteps"),
			"%d is out of range (want 0 to 10000; 0 means unlimited)", a.MaxAutonomousSteps)
	}
	clean := func(key string, pats []string) []string {
		return cleanList(pats, func(j int, s string, dupOf int) bool {
			p := path{"elements", i, "autonomy", key, j}
			w := aw.key(key).index(j)
			if msg := patternProblem(s); msg != "" {
				c.errorf(p, w, "%s", msg)
				return false
			}
			if dupOf >= 0 {
				c.warnf(p, w, "%s is listed twice (first as %s[%d]); removed", quote(s), key, dupOf)
				return false
			}
			return true
		})
	}
	a.RequiresApproval = clean("requiresApproval", a.RequiresApproval)
	a.AutoApprove = clean("autoApprove", a.AutoApprove)
}

// shell checks `shell.rules`. Whether each rule matches its match and
// notMatch examples is for the shell classifier to check.
func (c *checker) shell() {
	for i := range c.pol.Shell.Rules {
		r := &c.pol.Shell.Rules[i]
		w := at{path: "shell.rules[" + strconv.Itoa(i) + "]"}
		if len(r.Pattern) == 0 {
			c.errorf(path{"shell", "rules", i, "pattern"}, w.key("pattern"), "missing (want a list of tokens, e.g. [git, [push, fetch]])")
		}
		for j, alts := range r.Pattern {
			pw := w.key("pattern").index(j)
			if len(alts) == 0 {
				c.errorf(path{"shell", "rules", i, "pattern", j}, pw, "no tokens (want a token or a non-empty list of alternatives)")
			}
			for k, tok := range alts {
				p := path{"shell", "rules", i, "pattern", j, k}
				tw := pw
				if len(alts) > 1 {
					tw = pw.index(k)
				}
				switch {
				case strings.TrimSpace(tok) == "":
					c.errorf(p, tw, "empty token")
				case strings.IndexFunc(tok, unicode.IsSpace) >= 0:
					c.warnf(p, tw, "token %s contains whitespace, so it never matches one word of a command; write the words as separate tokens", quote(tok))
				}
			}
		}
		switch r.Decision {
		case "":
			c.errorf(path{"shell", "rules", i, "decision"}, w.key("decision"), "missing (want allow, confirm or deny)")
		case portcullis.ShellAllow, portcullis.ShellConfirm, portcullis.ShellDeny:
		default:
			c.errorf(path{"shell", "rules", i, "decision"}, w.key("decision"), "unknown decision %s (want allow, confirm or deny)", quote(string(r.Decision)))
		}
	}
}

// validator checks `validator`.
func (c *checker) validator() {
	v := c.pol.Validator
	if v == nil {
		return
	}
	w := at{path: "validator"}
	switch v.Provider {
	case "anthropic", "openai":
		if v.Model == "" {
			c.errorf(path{"validator", "model"}, w.key("model"), "missing (provider %s needs a model, e.g. claude-haiku-4-5)", v.Provider)
		}
	case "command":
		if len(v.Command) == 0 {
			c.errorf(path{"validator", "command"}, w.key("command"), "missing (provider command needs the command to run, e.g. [claude, -p])")
		} else if strings.TrimSpace(v.Command[0]) == "" {
			c.errorf(path{"validator", "command", 0}, w.key("command").index(0), "empty program name")
		}
	case "":
		c.errorf(path{"validator", "provider"}, w.key("provider"), "missing (want anthropic, openai or command)")
	default:
		c.errorf(path{"validator", "provider"}, w.key("provider"), "unknown provider %s (want anthropic, openai or command)", quote(v.Provider))
	}
	if v.Provider != "command" && len(v.Command) > 0 {
		c.warnf(path{"validator", "command"}, w.key("command"), "used only with provider command; ignored")
	}
	if v.APIKeyEnv != "" && !envName().MatchString(v.APIKeyEnv) {
		c.errorf(path{"validator", "apiKeyEnv"}, w.key("apiKeyEnv"),
			"%s is not an environment variable name (want letters, digits and _, not starting with a digit); the key itself never goes in this file", quote(v.APIKeyEnv))
	}
	if v.BaseURL != "" {
		if u, err := url.Parse(v.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			c.errorf(path{"validator", "baseURL"}, w.key("baseURL"), "invalid URL %s (want http:// or https:// and a host)", quote(v.BaseURL))
		}
	}
	if v.Timeout == 0 {
		v.Timeout = defaultValidatorTimeout
	} else if v.Timeout < 0 {
		c.errorf(path{"validator", "timeout"}, w.key("timeout"), "duration %s is not more than 0", v.Timeout)
	}
	switch v.Mode {
	case "":
		v.Mode = "stateless"
	case "stateless", "contextual":
	default:
		c.errorf(path{"validator", "mode"}, w.key("mode"), "unknown mode %s (want stateless or contextual)", quote(v.Mode))
	}
	v.Rules = cleanPath(v.Rules)
	s := &v.Scope
	if s.Risks == nil && s.Tools == nil && !s.Shell {
		s.Risks = defaultValidatorRisks()
	}
	for j, r := range s.Risks {
		if _, err := portcullis.ParseRisk(string(r)); err != nil {
			c.errorf(path{"validator", "scope", "risks", j}, w.key("scope.risks").index(j), "unknown risk %s (want external-write or policy-write)", quote(string(r)))
		}
	}
	for j, t := range s.Tools {
		if msg := nameProblem(t); msg != "" {
			c.errorf(path{"validator", "scope", "tools", j}, w.key("scope.tools").index(j), "%s", msg)
		}
	}
	if len(s.Risks) == 0 && len(s.Tools) == 0 && !s.Shell {
		c.warnf(path{"validator", "scope"}, w.key("scope"), "selects no calls, so the validator never runs (list risks or tools, or set shell: true)")
	}
	for j, a := range v.TrustedContext {
		if strings.TrimSpace(a) == "" {
			c.errorf(path{"validator", "trustedContext", j}, w.key("trustedContext").index(j), "empty agent name")
		}
	}
	if len(v.TrustedContext) > 0 && v.Mode != "contextual" {
		c.warnf(path{"validator", "trustedContext"}, w.key("trustedContext"), "used only in mode contextual; the stateless validator sees no conversation")
	}
	b := &v.Budget
	for _, f := range []struct {
		key string
		n   *int
		def int
	}{
		{"perMinute", &b.PerMinute, portcullis.DefaultValidatorPerMinute},
		{"burst", &b.Burst, portcullis.DefaultValidatorBurst},
		{"concurrent", &b.Concurrent, portcullis.DefaultValidatorConcurrent},
	} {
		switch {
		case *f.n == 0:
			*f.n = f.def
		case *f.n < 0:
			c.errorf(path{"validator", "budget", f.key}, w.key("budget."+f.key), "%d is negative (want a number of model calls above 0)", *f.n)
		}
	}
}

// migrations checks `migrations`.
func (c *checker) migrations() {
	seen := make(map[string]int, len(c.pol.Migrations))
	for i := range c.pol.Migrations {
		m := &c.pol.Migrations[i]
		w := at{what: "migration", name: m.Name}
		if strings.TrimSpace(m.Name) == "" {
			w = at{path: "migrations[" + strconv.Itoa(i) + "]"}
			c.errorf(path{"migrations", i, "name"}, w.key("name"), "missing (want a unique name)")
		} else if prev, dup := seen[m.Name]; dup {
			c.errorf(path{"migrations", i, "name"}, w, "duplicate name (first%s)", c.atLine(path{"migrations", prev}))
		} else {
			seen[m.Name] = i
		}
		if len(m.Paths) == 0 {
			c.errorf(path{"migrations", i, "paths"}, w.key("paths"), "missing (want the paths the migration writes, e.g. [/preferences/calendar.md])")
		}
		for j, p := range m.Paths {
			if strings.TrimSpace(p) == "" {
				c.errorf(path{"migrations", i, "paths", j}, w.key("paths").index(j), "empty path")
			}
		}
	}
}

// locator finds the line of a path in the policy's YAML, and whether a
// problem there is still to be reported (not when the parser already
// reported the node, or a node above it, as unreadable). A nil locator
// (Validate) knows no lines and suppresses nothing.
type locator struct {
	root *yaml.Node
	bad  map[*yaml.Node]bool
	keys map[*yaml.Node]map[string]int // a mapping's keys → index of the first, built on use
}

// keyIndex returns the index in n.Content of the first key named key, or -1.
// Each mapping is indexed once, so many lookups stay linear.
func (l *locator) keyIndex(n *yaml.Node, key string) int {
	if l.keys == nil {
		l.keys = map[*yaml.Node]map[string]int{}
	}
	idx, ok := l.keys[n]
	if !ok {
		idx = make(map[string]int, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k := resolveAlias(n.Content[i]); k.Kind == yaml.ScalarNode {
				if _, dup := idx[k.Value]; !dup {
					idx[k.Value] = i
				}
			}
		}
		l.keys[n] = idx
	}
	if i, ok := idx[key]; ok {
		return i
	}
	return -1
}

func (l *locator) find(p path) (line int, ok bool) {
	if l == nil {
		return 0, true
	}
	n := resolveAlias(l.root)
	line = n.Line
	for _, step := range p {
		if l.bad[n] {
			return 0, false
		}
		var key, next *yaml.Node
		switch s := step.(type) {
		case string:
			if n.Kind == yaml.MappingNode {
				if i := l.keyIndex(n, s); i >= 0 {
					key, next = resolveAlias(n.Content[i]), n.Content[i+1]
				}
			}
		case int:
			switch {
			case n.Kind == yaml.SequenceNode && s < len(n.Content):
				next = n.Content[s]
			case n.Kind == yaml.MappingNode && 2*s+1 < len(n.Content):
				key, next = resolveAlias(n.Content[2*s]), n.Content[2*s+1]
			}
		}
		if next == nil {
			return line, true
		}
		if key != nil && l.bad[key] {
			return 0, false
		}
		n = resolveAlias(next)
		if key != nil {
			line = key.Line
		} else {
			line = n.Line
		}
	}
	if l.bad[n] {
		return 0, false
	}
	return line, true
}

// listWords joins words as "a, b or c", showing "" for the empty word.
func listWords(ws []string) string {
	q := make([]string, len(ws))
	for i, s := range ws {
		if s == "" {
			s = `""`
		}
		q[i] = s
	}
	if len(q) < 2 {
		return strings.Join(q, "")
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// maxBudgets bounds the budgets of a policy: each that applies to a call
// is one counter the store locks.
const maxBudgets = 100

// budgets checks `budgets` and every element's, fills in their defaults
// (by agent, over deny) and sets each element budget's Element.
func (c *checker) budgets() {
	seen := map[string]string{} // name → where it was first
	n := 0
	check := func(bs []portcullis.Budget, base path, elem string) {
		for j := range bs {
			b := &bs[j]
			b.Element = elem
			n++
			p := append(append(path{}, base...), j)
			key := func(k string) path { return append(append(path{}, p...), k) }
			w := at{what: "budget", name: b.Name}
			if strings.TrimSpace(b.Name) == "" {
				w = at{path: pathString(p)}
				c.errorf(key("name"), w.key("name"), "missing (want a unique name, e.g. email-rate)")
			} else if msg := nameProblem(b.Name); msg != "" {
				c.errorf(key("name"), w.key("name"), "%s", msg)
			} else if first, dup := seen[b.Name]; dup {
				c.errorf(key("name"), w, "duplicate name (first as %s); budget names are unique across the policy and its elements", first)
			} else {
				seen[b.Name] = pathString(p) + c.atLine(p)
			}
			if len(b.Tools) == 0 {
				c.errorf(key("tools"), w.key("tools"), "missing (want the tools the budget counts, e.g. [send_email] or [\"payments.*\"])")
			}
			for t, s := range b.Tools {
				tp := append(key("tools"), t)
				if msg := patternProblem(s); msg != "" {
					c.errorf(tp, w.key("tools").index(t), "%s", msg)
					continue
				}
				if prev := slices.Index(b.Tools[:t], s); prev >= 0 {
					c.warnf(tp, w.key("tools").index(t), "%s is listed twice (first as tools[%d])", quote(s), prev)
				} else if !c.matchesSomeTool(s, true) {
					c.warnf(tp, w.key("tools").index(t), "%s matches no tool in tools; an upstream MCP server may still offer one", quote(s))
				}
				if ref, ok := c.names[s]; ok && ref.alias >= 0 {
					c.warnf(tp, w.key("tools").index(t), "%s is an alias of %s; the budget counts the tool under either name", quote(s), quote(c.pol.Tools[ref.tool].Name))
				}
			}
			switch {
			case b.Limit == 0:
				c.errorf(key("limit"), w.key("limit"), "missing or 0 (want how many calls, or how much cost, a window holds; to forbid the tools, deny them in an element)")
			case b.Limit < 0 || b.Limit > portcullis.MaxAmount:
				c.errorf(key("limit"), w.key("limit"), "%s is out of range (want more than 0, at most %s)", b.Limit, portcullis.MaxAmount)
			}
			if b.Window <= 0 {
				c.errorf(key("window"), w.key("window"), "missing (want minute, hour, day, week or a Go duration such as 15m)")
			}
			if len(b.By) == 0 {
				b.By = []portcullis.BudgetKey{portcullis.BudgetByAgent}
			}
			for k, by := range b.By {
				switch by {
				case portcullis.BudgetByAgent, portcullis.BudgetBySession, portcullis.BudgetByTool:
					if prev := slices.Index(b.By[:k], by); prev >= 0 {
						c.errorf(key("by"), w.key("by"), "%s is listed twice", quote(string(by)))
					}
				default:
					c.errorf(key("by"), w.key("by"), "unknown key %s (want agent, session or tool)", quote(string(by)))
				}
			}
			switch {
			case b.Cost.Arg != "" && b.Cost.Fixed != 0:
				c.errorf(key("cost"), w.key("cost"), "has both arg and fixed (want one: the argument that holds the cost, or a fixed cost per call)")
			case b.Cost.Fixed < 0 || b.Cost.Fixed > portcullis.MaxAmount:
				c.errorf(key("cost"), w.key("cost.fixed"), "%s is out of range (want more than 0)", b.Cost.Fixed)
			case b.Cost.Fixed > b.Limit && b.Limit > 0:
				c.warnf(key("cost"), w.key("cost.fixed"), "%s is more than the limit %s: no call ever fits", b.Cost.Fixed, b.Limit)
			}
			switch b.Over {
			case "":
				b.Over = portcullis.BudgetDeny
			case portcullis.BudgetDeny, portcullis.BudgetConfirm:
			default:
				c.errorf(key("over"), w.key("over"), "unknown action %s (want confirm or deny)", quote(string(b.Over)))
			}
		}
	}
	check(c.pol.Budgets, path{"budgets"}, "")
	for i := range c.pol.Elements {
		e := &c.pol.Elements[i]
		check(e.Budgets, path{"elements", i, "budgets"}, e.Name)
	}
	if n > maxBudgets {
		c.errorf(path{"budgets"}, at{path: "budgets"}, "%d budgets; at most %d", n, maxBudgets)
	}
}

// pathString writes a path as budgets[2] or elements[0].budgets[1].
func pathString(p path) string {
	var b strings.Builder
	for _, s := range p {
		switch s := s.(type) {
		case string:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s)
		case int:
			b.WriteString("[" + strconv.Itoa(s) + "]")
		}
	}
	return b.String()
}
