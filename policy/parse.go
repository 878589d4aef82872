package policy

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/portcullis/portcullis"
	"gopkg.in/yaml.v3"
)

// The keys of each mapping of the policy file, in the order docs/POLICY.md lists them.
var (
	topKeys             = []string{"version", "mode", "unknownTools", "tools", "policyDocument", "elements", "shell", "validator", "migrations", "approvals", "audit", "upstreamRequests"}
	toolKeys            = []string{"endpoint", "defaultLevel", "canBeElevated", "rationale", "summary", "risk", "aliases", "shellArg", "pathArg", "outsideWorkdir", "redact", "mode"}
	elementKeys         = []string{"name", "type", "active", "gatekeeper", "autonomy"}
	gatekeeperKeys      = []string{"allow", "confirm", "deny", "scope"}
	scopeKeys           = []string{"allowedTypes", "blockedTypes"}
	autonomyKeys        = []string{"riskTolerance", "maxAutonomousSteps", "requiresApproval", "autoApprove"}
	shellKeys           = []string{"rules"}
	shellRuleKeys       = []string{"pattern", "decision", "justification", "match", "notMatch"}
	validatorKeys       = []string{"provider", "model", "baseURL", "apiKeyEnv", "command", "timeout", "mode", "rules", "scope", "trustedContext", "budget"}
	validatorScopeKeys  = []string{"risks", "tools", "shell"}
	validatorBudgetKeys = []string{"perMinute", "burst", "concurrent"}
	migrationKeys       = []string{"name", "paths"}
	approvalsKeys       = []string{"wait", "outOfBand", "maxPendingPerAgent", "maxPendingPerSession"}
	auditKeys           = []string{"redact", "retention"}
	upstreamReqKeys     = []string{"sampling", "elicitation", "roots"}
	retentionKeys       = []string{"maxAge", "maxRows"}
)

// The defaults. The parser applies those whose zero value means something
// else (CanBeElevated, Active, MaxAutonomousSteps, the validator's scope);
// the checker fills in the others where a value is zero.
const (
	defaultMaxAutonomousSteps = 10
	defaultValidatorTimeout   = 10 * time.Second
	defaultApprovalsWait      = 45 * time.Second
)

// maxAliasExpansion bounds the nodes YAML aliases may add to a document, so
// that a small file cannot expand into a huge one ("billion laughs").
const maxAliasExpansion = 1_000_000

// at names where a value is, for messages: a named context such as
// `element "X"` and a path inside it such as `gatekeeper.deny[2]`.
type at struct {
	what, name string // e.g. "tool", "delete_element"; what "" means the top
	path       string
}

func (a at) key(k string) at {
	if a.path != "" {
		k = a.path + "." + k
	}
	return at{a.what, a.name, k}
}

func (a at) index(i int) at {
	return at{a.what, a.name, a.path + "[" + strconv.Itoa(i) + "]"}
}

func (a at) String() string {
	if a.what == "" {
		return a.path
	}
	ctx := a.what + " " + quote(a.name)
	if a.path == "" {
		return ctx
	}
	return ctx + ": " + a.path
}

// parser turns YAML nodes into values, reporting every node it cannot read
// and remembering it (bad) so that the checker does not report the
// placeholder left in its stead a second time.
type parser struct {
	file     string
	rep      *report
	bad      map[*yaml.Node]bool
	sizes    map[*yaml.Node]int
	expanded int
	aborted  bool
}

func newParser(file string, rep *report) *parser {
	return &parser{file: file, rep: rep, bad: map[*yaml.Node]bool{}}
}

func (p *parser) errorf(n *yaml.Node, w at, format string, args ...any) {
	if p.aborted {
		return
	}
	line := 0
	if n != nil {
		p.bad[n] = true
		line = n.Line
	}
	p.rep.errs = append(p.rep.errs, problem{file: p.file, line: line, where: w.String(), msg: fmt.Sprintf(format, args...)})
}

// resolve follows an alias, counting what it adds against maxAliasExpansion.
func (p *parser) resolve(n *yaml.Node) *yaml.Node {
	if n.Kind != yaml.AliasNode {
		return n
	}
	if p.aborted {
		return nullNode()
	}
	if p.sizes == nil {
		p.sizes = map[*yaml.Node]int{}
	}
	target := n.Alias
	if target != nil {
		p.expanded += p.size(target)
	}
	if target == nil || target.Kind == yaml.AliasNode || p.expanded > maxAliasExpansion {
		// Nothing read from such a file is worth reporting: this is the
		// one problem, and reading stops.
		p.rep.errs = append(p.rep.errs[:0], problem{file: p.file, line: n.Line,
			msg: fmt.Sprintf("YAML aliases expand to more than %d nodes, or an anchor contains itself", maxAliasExpansion)})
		p.aborted = true
		return nullNode()
	}
	return target
}

// size counts the nodes of n with its aliases expanded, saturating just
// above maxAliasExpansion (also for an anchor that contains itself).
func (p *parser) size(n *yaml.Node) int {
	const over = maxAliasExpansion + 1
	if n == nil {
		return 1
	}
	if n.Kind == yaml.AliasNode {
		return p.size(n.Alias)
	}
	if s, ok := p.sizes[n]; ok {
		if s < 0 { // still being counted: a cycle
			return over
		}
		return s
	}
	p.sizes[n] = -1
	s := 1
	for _, c := range n.Content {
		s += p.size(c)
		if s >= over {
			s = over
			break
		}
	}
	p.sizes[n] = s
	return s
}

// mapping walks a mapping with the given known keys, calling each for every
// known key once, with the value resolved. A null node is an absent mapping
// (each is not called); another kind is an error and mapping returns false.
func (p *parser) mapping(n *yaml.Node, w at, known []string, each func(key string, k, v *yaml.Node)) bool {
	n = p.resolve(n)
	if isNull(n) {
		return true
	}
	if n.Kind != yaml.MappingNode {
		p.errorf(n, w, "got %s, want a mapping (keys %s)", kindName(n), strings.Join(known, ", "))
		return false
	}
	seen := make([]int, len(known)) // line of each known key's first use
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := p.resolve(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			p.errorf(k, w, "got %s as a key, want a name", kindName(k))
			continue
		}
		idx := slices.Index(known, k.Value)
		if idx < 0 {
			p.errorf(k, w, "unknown key %s%s", quote(k.Value), suggest(k.Value, known))
			continue
		}
		if seen[idx] != 0 {
			p.errorf(k, w, "duplicate key %q (first at line %d)", k.Value, seen[idx])
			continue
		}
		seen[idx] = max(k.Line, 1)
		each(k.Value, k, p.resolve(v))
	}
	return true
}

// str reads a string. Null is "" (absent); numbers are taken as written.
func (p *parser) str(n *yaml.Node, w at) (string, bool) {
	n = p.resolve(n)
	if n.Kind == yaml.ScalarNode {
		switch n.ShortTag() {
		case "!!null":
			return "", true
		case "!!bool":
			p.errorf(n, w, "got boolean %s, want a string (quote it: %q)", clip(n.Value), n.Value)
			return "", false
		}
		return n.Value, true
	}
	p.errorf(n, w, "got %s, want a string", kindName(n))
	return "", false
}

// strList reads a list of strings; null is an absent list (nil) and so is
// an empty one. An item that is not a string is reported and left as "".
func (p *parser) strList(n *yaml.Node, w at) []string {
	n = p.resolve(n)
	switch {
	case isNull(n):
		return nil
	case n.Kind == yaml.ScalarNode:
		p.errorf(n, w, "got %s, want a list of strings (write [%s])", kindName(n), clip(n.Value))
		return nil
	case n.Kind != yaml.SequenceNode:
		p.errorf(n, w, "got %s, want a list of strings", kindName(n))
		return nil
	}
	if len(n.Content) == 0 {
		return nil
	}
	out := make([]string, len(n.Content))
	for i, item := range n.Content {
		item = p.resolve(item)
		if item.Kind == yaml.ScalarNode && isNull(item) {
			continue // "": the checker reports an empty entry where one matters
		}
		out[i], _ = p.str(item, w.index(i))
	}
	return out
}

// boolean reads true or false, nothing else.
func (p *parser) boolean(n *yaml.Node, w at) (bool, bool) {
	n = p.resolve(n)
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!bool" {
		switch n.Value {
		case "true":
			return true, true
		case "false":
			return false, true
		}
	}
	p.errorf(n, w, "got %s, want true or false", kindName(n))
	return false, false
}

// integer reads a YAML integer.
func (p *parser) integer(n *yaml.Node, w at) (int, bool) {
	n = p.resolve(n)
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!int" {
		var v int64
		if err := n.Decode(&v); err == nil && v >= -1<<31 && v < 1<<31 {
			return int(v), true
		}
		p.errorf(n, w, "%s is not an integer in range", quote(n.Value))
		return 0, false
	}
	p.errorf(n, w, "got %s, want an integer", kindName(n))
	return 0, false
}

// maxPendingCap bounds approvals.maxPendingPerAgent and
// maxPendingPerSession: a cap is there to keep the person's queue short.
const maxPendingCap = 10000

// pendingCap reads a cap on pending approval requests: an integer from 1
// to maxPendingCap. Null is absent (0, the default).
func (p *parser) pendingCap(n *yaml.Node, w at) int {
	if isNull(p.resolve(n)) {
		return 0
	}
	v, ok := p.integer(n, w)
	if !ok {
		return 0
	}
	if v < 1 || v > maxPendingCap {
		p.errorf(n, w, "%d is out of range (want 1 to %d)", v, maxPendingCap)
		return 0
	}
	return v
}

// duration reads a Go duration that must be more than 0. Null is absent (0).
func (p *parser) duration(n *yaml.Node, w at) (time.Duration, bool) {
	n = p.resolve(n)
	if n.Kind == yaml.ScalarNode {
		switch n.ShortTag() {
		case "!!null":
			return 0, true
		case "!!int", "!!float":
			p.errorf(n, w, "got number %s, want a duration with a unit, such as %ss", clip(n.Value), clip(n.Value))
			return 0, false
		}
	}
	s, ok := p.str(n, w)
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		p.errorf(n, w, "invalid duration %s (want a Go duration such as 45s, 2m or 1h30m)", quote(s))
		return 0, false
	}
	if d <= 0 {
		p.errorf(n, w, "duration %s is not more than 0", quote(s))
		return 0, false
	}
	return d, true
}

// level reads a permission level name; null is LevelUnset.
func (p *parser) level(n *yaml.Node, w at) portcullis.Level {
	n = p.resolve(n)
	if isNull(n) {
		return portcullis.LevelUnset
	}
	s, ok := p.str(n, w)
	if !ok {
		return portcullis.LevelUnset
	}
	l, err := portcullis.ParseLevel(s)
	if err != nil {
		p.errorf(n, w, "unknown level %s (want %s)", quote(s), portcullis.LevelNames)
		return portcullis.LevelUnset
	}
	return l
}

// policy reads the whole policy mapping.
func (p *parser) policy(root *yaml.Node) *portcullis.Policy {
	root = p.resolve(root)
	if root.Kind != yaml.MappingNode {
		p.errorf(root, at{}, "the policy is %s; want a mapping (version: 1, tools: ..., elements: ...)", kindName(root))
		return nil
	}
	pol := &portcullis.Policy{}
	p.mapping(root, at{}, topKeys, func(key string, _, v *yaml.Node) {
		w := at{path: key}
		switch key {
		case "version":
			if n, ok := p.integer(v, w); ok {
				pol.Version = n
			}
		case "mode":
			s, _ := p.str(v, w)
			pol.Mode = portcullis.Mode(s)
		case "unknownTools":
			s, _ := p.str(v, w)
			pol.UnknownTools = portcullis.UnknownTools(s)
		case "tools":
			pol.Tools = p.tools(v)
		case "policyDocument":
			pol.PolicyDocument, _ = p.str(v, w)
		case "elements":
			pol.Elements = p.elements(v)
		case "shell":
			p.mapping(v, w, shellKeys, func(_ string, _, v *yaml.Node) {
				pol.Shell.Rules = p.shellRules(v)
			})
		case "validator":
			pol.Validator = p.validator(v)
		case "migrations":
			pol.Migrations = p.migrations(v)
		case "approvals":
			p.mapping(v, w, approvalsKeys, func(key string, _, v *yaml.Node) {
				switch key {
				case "wait":
					pol.Approvals.Wait, _ = p.duration(v, w.key("wait"))
				case "outOfBand":
					pol.Approvals.OutOfBand, _ = p.boolean(v, w.key("outOfBand"))
				case "maxPendingPerAgent":
					pol.Approvals.MaxPendingPerAgent = p.pendingCap(v, w.key(key))
				case "maxPendingPerSession":
					pol.Approvals.MaxPendingPerSession = p.pendingCap(v, w.key(key))
				}
			})
		case "upstreamRequests":
			p.mapping(v, w, upstreamReqKeys, func(key string, _, v *yaml.Node) {
				s, _ := p.str(v, w.key(key))
				switch key {
				case "sampling":
					pol.UpstreamRequests.Sampling = portcullis.UpstreamRule(s)
				case "elicitation":
					pol.UpstreamRequests.Elicitation = portcullis.UpstreamRule(s)
				case "roots":
					pol.UpstreamRequests.Roots = portcullis.UpstreamRule(s)
				}
			})
		case "audit":
			p.mapping(v, w, auditKeys, func(key string, _, v *yaml.Node) {
				w := w.key(key)
				switch key {
				case "redact":
					pol.Audit.Redact = p.argNames(v, w)
				case "retention":
					p.mapping(v, w, retentionKeys, func(key string, _, v *yaml.Node) {
						w := w.key(key)
						switch key {
						case "maxAge":
							pol.Audit.Retention.MaxAge, _ = p.duration(v, w)
						case "maxRows":
							if n, ok := p.integer(v, w); ok {
								if n <= 0 {
									p.errorf(v, w, "%d is not more than 0 (want the number of newest rows to keep)", n)
								} else {
									pol.Audit.Retention.MaxRows = int64(n)
								}
							}
						}
					})
				}
			})
		}
	})
	return pol
}

// tools reads `tools`, a mapping of name to entry, in file order. Every
// pair gives one entry (the checker's line lookups rely on it).
func (p *parser) tools(n *yaml.Node) []portcullis.ToolPolicy {
	w := at{path: "tools"}
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		p.errorf(n, w, "got %s, want a mapping of tool name to entry (list_elements: {endpoint: READ})", kindName(n))
		return nil
	}
	tools := make([]portcullis.ToolPolicy, 0, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := p.resolve(n.Content[i])
		name := ""
		if k.Kind == yaml.ScalarNode && !isNull(k) && k.ShortTag() != "!!bool" {
			name = k.Value
		} else {
			p.errorf(k, w, "got %s as a tool name, want a string", kindName(k))
		}
		tools = append(tools, p.tool(name, k, p.resolve(n.Content[i+1])))
	}
	return tools
}

func (p *parser) tool(name string, k, v *yaml.Node) portcullis.ToolPolicy {
	t := portcullis.ToolPolicy{Name: name, CanBeElevated: true, Line: k.Line}
	w := at{what: "tool", name: name}
	p.mapping(v, w, toolKeys, func(key string, _, v *yaml.Node) {
		w := w.key(key)
		switch key {
		case "endpoint":
			s, _ := p.str(v, w)
			t.Endpoint = portcullis.Endpoint(s)
		case "defaultLevel":
			t.DefaultLevel = p.level(v, w)
		case "canBeElevated":
			if b, ok := p.boolean(v, w); ok {
				t.CanBeElevated = b
			}
		case "rationale":
			t.Rationale, _ = p.str(v, w)
		case "summary":
			t.Summary, _ = p.str(v, w)
		case "risk":
			s, _ := p.str(v, w)
			t.Risk = portcullis.Risk(s)
		case "aliases":
			t.Aliases = p.strList(v, w)
		case "shellArg":
			t.ShellArg = p.argName(v, w, "command")
		case "pathArg":
			t.PathArg = p.argName(v, w, "file path")
		case "outsideWorkdir":
			t.OutsideWorkdir = p.level(v, w)
		case "redact":
			t.Redact = p.argNames(v, w)
		case "mode":
			s, _ := p.str(v, w)
			t.Mode = portcullis.Mode(s)
		}
	})
	return t
}

// argNames reads a list of argument names (`redact`): each non-empty.
func (p *parser) argNames(v *yaml.Node, w at) []string {
	names := p.strList(v, w)
	for _, n := range names {
		if strings.TrimSpace(n) == "" {
			p.errorf(v, w, "an empty argument name (want the names of arguments whose values the audit log must not keep)")
			break
		}
	}
	return names
}

// argName reads shellArg or pathArg: present means non-empty.
func (p *parser) argName(v *yaml.Node, w at, holds string) string {
	s, ok := p.str(v, w)
	if ok && strings.TrimSpace(s) == "" {
		p.errorf(v, w, "empty (want the name of the argument that holds the %s)", holds)
	}
	return s
}

// elements reads `elements`, one entry per list item.
func (p *parser) elements(n *yaml.Node) []portcullis.Element {
	w := at{path: "elements"}
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		p.errorf(n, w, "got %s, want a list of elements (- name: ..., type: ...)", kindName(n))
		return nil
	}
	els := make([]portcullis.Element, 0, len(n.Content))
	for i, item := range n.Content {
		item = p.resolve(item)
		e := portcullis.Element{Active: true, Line: item.Line}
		w := w.index(i)
		if item.Kind != yaml.MappingNode {
			p.errorf(item, w, "got %s, want a mapping with name and type", kindName(item))
			els = append(els, e)
			continue
		}
		if name := nameOf(item); name != "" {
			w = at{what: "element", name: name}
		}
		p.mapping(item, w, elementKeys, func(key string, _, v *yaml.Node) {
			switch key {
			case "name":
				e.Name, _ = p.str(v, w.key(key))
			case "type":
				s, _ := p.str(v, w.key(key))
				e.Type = portcullis.ElementType(s)
			case "active":
				if b, ok := p.boolean(v, w.key(key)); ok {
					e.Active = b
				}
			case "gatekeeper":
				e.Gatekeeper = p.gatekeeper(v, w.key(key))
			case "autonomy":
				e.Autonomy = p.autonomy(v, w.key(key))
			}
		})
		els = append(els, e)
	}
	return els
}

// nameOf returns the string value of a mapping's name key, or "".
func nameOf(n *yaml.Node) string {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "name" {
			if v := n.Content[i+1]; v.Kind == yaml.ScalarNode && !isNull(v) && v.ShortTag() != "!!bool" {
				return v.Value
			}
			return ""
		}
	}
	return ""
}

func (p *parser) gatekeeper(n *yaml.Node, w at) portcullis.GatekeeperPolicy {
	var g portcullis.GatekeeperPolicy
	p.mapping(n, w, gatekeeperKeys, func(key string, _, v *yaml.Node) {
		w := w.key(key)
		switch key {
		case "allow":
			g.Allow = p.strList(v, w)
		case "confirm":
			g.Confirm = p.strList(v, w)
		case "deny":
			g.Deny = p.strList(v, w)
		case "scope":
			p.mapping(v, w, scopeKeys, func(key string, _, v *yaml.Node) {
				switch key {
				case "allowedTypes":
					g.Scope.AllowedTypes = p.strList(v, w.key(key))
				case "blockedTypes":
					g.Scope.BlockedTypes = p.strList(v, w.key(key))
				}
			})
		}
	})
	return g
}

// autonomy reads an agent's envelope; null is absent (nil).
func (p *parser) autonomy(n *yaml.Node, w at) *portcullis.Autonomy {
	if isNull(n) {
		return nil
	}
	a := &portcullis.Autonomy{MaxAutonomousSteps: defaultMaxAutonomousSteps}
	ok := p.mapping(n, w, autonomyKeys, func(key string, _, v *yaml.Node) {
		w := w.key(key)
		switch key {
		case "riskTolerance":
			s, _ := p.str(v, w)
			a.RiskTolerance = portcullis.RiskTolerance(s)
		case "maxAutonomousSteps":
			if n, ok := p.integer(v, w); ok {
				a.MaxAutonomousSteps = n
			}
		case "requiresApproval":
			a.RequiresApproval = p.strList(v, w)
		case "autoApprove":
			a.AutoApprove = p.strList(v, w)
		}
	})
	if !ok {
		return nil
	}
	return a
}

// shellRules reads `shell.rules`, one rule per list item.
func (p *parser) shellRules(n *yaml.Node) []portcullis.ShellRule {
	w := at{path: "shell.rules"}
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		p.errorf(n, w, "got %s, want a list of rules (- pattern: [git, push], decision: confirm)", kindName(n))
		return nil
	}
	rules := make([]portcullis.ShellRule, 0, len(n.Content))
	for i, item := range n.Content {
		item = p.resolve(item)
		r := portcullis.ShellRule{Line: item.Line}
		w := w.index(i)
		if item.Kind != yaml.MappingNode {
			p.errorf(item, w, "got %s, want a mapping with pattern and decision", kindName(item))
		} else {
			p.mapping(item, w, shellRuleKeys, func(key string, _, v *yaml.Node) {
				w := w.key(key)
				switch key {
				case "pattern":
					r.Pattern = p.shellPattern(v, w)
				case "decision":
					s, _ := p.str(v, w)
					r.Decision = portcullis.ShellDecision(s)
				case "justification":
					r.Justification, _ = p.str(v, w)
				case "match":
					r.Match = p.strList(v, w)
				case "notMatch":
					r.NotMatch = p.strList(v, w)
				}
			})
		}
		rules = append(rules, r)
	}
	return rules
}

// shellPattern reads a token prefix: a list whose items are a token or a
// list of alternative tokens.
func (p *parser) shellPattern(n *yaml.Node, w at) [][]string {
	switch {
	case isNull(n):
		return nil
	case n.Kind == yaml.ScalarNode:
		p.errorf(n, w, "got %s, want a list of tokens (write [%s])", kindName(n), clip(n.Value))
		return nil
	case n.Kind != yaml.SequenceNode:
		p.errorf(n, w, "got %s, want a list of tokens, each a string or a list of alternatives", kindName(n))
		return nil
	}
	out := make([][]string, len(n.Content))
	for i, item := range n.Content {
		item = p.resolve(item)
		switch item.Kind {
		case yaml.ScalarNode:
			s, _ := p.str(item, w.index(i))
			out[i] = []string{s}
		case yaml.SequenceNode:
			out[i] = p.strList(item, w.index(i))
		default:
			p.errorf(item, w.index(i), "got %s, want a token or a list of alternative tokens", kindName(item))
		}
	}
	return out
}

// validator reads `validator`; null is absent (nil).
func (p *parser) validator(n *yaml.Node) *portcullis.ValidatorConfig {
	w := at{path: "validator"}
	if isNull(n) {
		return nil
	}
	v := &portcullis.ValidatorConfig{Scope: portcullis.ValidatorScope{Risks: defaultValidatorRisks()}}
	ok := p.mapping(n, w, validatorKeys, func(key string, _, n *yaml.Node) {
		w := w.key(key)
		switch key {
		case "provider":
			v.Provider, _ = p.str(n, w)
		case "model":
			v.Model, _ = p.str(n, w)
		case "baseURL":
			v.BaseURL, _ = p.str(n, w)
		case "apiKeyEnv":
			v.APIKeyEnv, _ = p.str(n, w)
		case "command":
			v.Command = p.strList(n, w)
		case "timeout":
			v.Timeout, _ = p.duration(n, w)
		case "mode":
			v.Mode, _ = p.str(n, w)
		case "rules":
			v.Rules, _ = p.str(n, w)
		case "scope":
			// A scope that is given replaces the default, risks included.
			if !isNull(n) {
				v.Scope.Risks = []portcullis.Risk{}
			}
			p.mapping(n, w, validatorScopeKeys, func(key string, _, n *yaml.Node) {
				w := w.key(key)
				switch key {
				case "risks":
					for _, s := range p.strList(n, w) {
						v.Scope.Risks = append(v.Scope.Risks, portcullis.Risk(s))
					}
				case "tools":
					v.Scope.Tools = p.strList(n, w)
				case "shell":
					v.Scope.Shell, _ = p.boolean(n, w)
				}
			})
		case "trustedContext":
			v.TrustedContext = p.strList(n, w)
		case "budget":
			p.mapping(n, w, validatorBudgetKeys, func(key string, _, n *yaml.Node) {
				w := w.key(key)
				switch key {
				case "perMinute":
					v.Budget.PerMinute, _ = p.integer(n, w)
				case "burst":
					v.Budget.Burst, _ = p.integer(n, w)
				case "concurrent":
					v.Budget.Concurrent, _ = p.integer(n, w)
				}
			})
		}
	})
	if !ok {
		return nil
	}
	return v
}

func defaultValidatorRisks() []portcullis.Risk {
	return []portcullis.Risk{portcullis.RiskExternalWrite, portcullis.RiskPolicyWrite}
}

// migrations reads `migrations`, one entry per list item.
func (p *parser) migrations(n *yaml.Node) []portcullis.Migration {
	w := at{path: "migrations"}
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		p.errorf(n, w, "got %s, want a list of migrations (- name: ..., paths: [...])", kindName(n))
		return nil
	}
	ms := make([]portcullis.Migration, 0, len(n.Content))
	for i, item := range n.Content {
		item = p.resolve(item)
		var m portcullis.Migration
		w := w.index(i)
		if item.Kind != yaml.MappingNode {
			p.errorf(item, w, "got %s, want a mapping with name and paths", kindName(item))
		} else {
			if name := nameOf(item); name != "" {
				w = at{what: "migration", name: name}
			}
			p.mapping(item, w, migrationKeys, func(key string, _, v *yaml.Node) {
				switch key {
				case "name":
					m.Name, _ = p.str(v, w.key(key))
				case "paths":
					m.Paths = p.strList(v, w.key(key))
				}
			})
		}
		ms = append(ms, m)
	}
	return ms
}

// cleanPath cleans a non-empty path.
func cleanPath(s string) string {
	if s == "" {
		return s
	}
	return filepath.Clean(s)
}
