package policy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/portcullis/portcullis"
)

// ChangeKind says whether a thing was added, removed or changed.
type ChangeKind string

// The change kinds.
const (
	Added   ChangeKind = "added"
	Removed ChangeKind = "removed"
	Changed ChangeKind = "changed"
)

// The sections of a policy a Change can be in, in the order Diff lists them.
const (
	SectionPolicy    = "policy"    // version, mode, unknownTools, policyDocument
	SectionTool      = "tool"      // an entry of tools
	SectionElement   = "element"   // an entry of elements
	SectionShell     = "shell"     // a rule of shell.rules
	SectionValidator = "validator" // the validator block
	SectionMigration = "migration" // an entry of migrations
	SectionApprovals = "approvals" // the approvals block
	// SectionUpstreamRequests is the upstreamRequests block.
	SectionUpstreamRequests = "upstreamRequests"
	SectionAudit            = "audit" // the audit block
)

// Change is one semantic difference between two policies: a thing (a
// tool, an element, a shell rule, a setting) added, removed, or one of its
// fields changed. Values are shown as a person would write them in the
// policy file.
type Change struct {
	Kind    ChangeKind `json:"kind"`
	Section string     `json:"section"`
	// Name is the tool, element or migration, or the shell rule's pattern;
	// "" for a policy-wide setting.
	Name string `json:"name,omitempty"`
	// Field is the key that changed, as in the file (e.g.
	// "gatekeeper.deny"); "" when the whole thing was added or removed.
	Field string `json:"field,omitempty"`
	// Old and New are the values before and after ("" when absent).
	Old string `json:"old,omitempty"`
	New string `json:"new,omitempty"`
	// For list fields: the entries added and removed.
	AddedItems   []string `json:"addedItems,omitempty"`
	RemovedItems []string `json:"removedItems,omitempty"`
}

// String describes the change on one line, e.g.
// `element "Security Persona": gatekeeper.deny: added delete_*`.
func (c Change) String() string {
	var b strings.Builder
	b.WriteString(c.Section)
	if c.Name != "" {
		b.WriteString(" " + strconv.Quote(c.Name))
	}
	switch {
	case c.Field == "":
		b.WriteString(" " + string(c.Kind))
		if v := c.New; c.Kind == Added && v != "" {
			b.WriteString(": " + v)
		} else if v := c.Old; c.Kind == Removed && v != "" {
			b.WriteString(": " + v)
		}
	case len(c.AddedItems) > 0 || len(c.RemovedItems) > 0:
		b.WriteString(": " + c.Field + ":")
		if len(c.AddedItems) > 0 {
			b.WriteString(" added " + strings.Join(c.AddedItems, ", "))
		}
		if len(c.RemovedItems) > 0 {
			if len(c.AddedItems) > 0 {
				b.WriteString(";")
			}
			b.WriteString(" removed " + strings.Join(c.RemovedItems, ", "))
		}
	default:
		b.WriteString(": " + c.Field + " " + show(c.Old) + " → " + show(c.New))
	}
	return b.String()
}

func show(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// Diff returns the semantic differences between two loaded policies: what
// would decide differently, not how the files are written. Order, comments
// and formatting do not count; a tool or element is matched by name, a
// shell rule by its pattern, a migration by name. Changes come in a fixed
// order: policy-wide settings, tools, elements, shell rules, validator,
// migrations, approvals, audit; tools and elements sorted by name. Two
// policies that decide alike give no changes (their Source and Hash are
// not compared).
//
// Diff does not evaluate anything: how the changes move each tool's
// effective level is the gate's to say (`portcullis policy diff` shows both).
func Diff(before, after *portcullis.Policy) []Change {
	var d differ
	d.policy(before, after)
	d.tools(before.Tools, after.Tools)
	d.elements(before.Elements, after.Elements)
	d.shell(before.Shell.Rules, after.Shell.Rules)
	d.validator(before.Validator, after.Validator)
	d.migrations(before.Migrations, after.Migrations)
	d.section(SectionApprovals, "")
	d.field("wait", duration(before.Approvals.Wait), duration(after.Approvals.Wait))
	d.field("outOfBand", strconv.FormatBool(before.Approvals.OutOfBand), strconv.FormatBool(after.Approvals.OutOfBand))
	bl, al := before.Approvals.PendingLimit(), after.Approvals.PendingLimit()
	d.field("maxPendingPerAgent", strconv.Itoa(bl.PerAgent), strconv.Itoa(al.PerAgent))
	d.field("maxPendingPerSession", strconv.Itoa(bl.PerSession), strconv.Itoa(al.PerSession))
	d.section(SectionUpstreamRequests, "")
	d.field("sampling", string(before.UpstreamRequests.Sampling), string(after.UpstreamRequests.Sampling))
	d.field("elicitation", string(before.UpstreamRequests.Elicitation), string(after.UpstreamRequests.Elicitation))
	d.field("roots", string(before.UpstreamRequests.Roots), string(after.UpstreamRequests.Roots))
	d.section(SectionAudit, "")
	d.list("redact", before.Audit.Redact, after.Audit.Redact)
	d.field("retention.maxAge", duration(before.Audit.Retention.MaxAge), duration(after.Audit.Retention.MaxAge))
	d.field("retention.maxRows", count(before.Audit.Retention.MaxRows), count(after.Audit.Retention.MaxRows))
	return d.out
}

// differ collects changes for one thing at a time.
type differ struct {
	out        []Change
	sect, name string
}

func (d *differ) section(sect, name string) { d.sect, d.name = sect, name }

func (d *differ) whole(kind ChangeKind, summary string) {
	c := Change{Kind: kind, Section: d.sect, Name: d.name}
	if kind == Added {
		c.New = summary
	} else {
		c.Old = summary
	}
	d.out = append(d.out, c)
}

func (d *differ) field(field, before, after string) {
	if before != after {
		d.out = append(d.out, Change{Kind: Changed, Section: d.sect, Name: d.name, Field: field, Old: before, New: after})
	}
}

// list compares two lists as sets: order and duplicates do not count.
func (d *differ) list(field string, before, after []string) {
	var added, removed []string
	for _, v := range after {
		if !slices.Contains(before, v) && !slices.Contains(added, v) {
			added = append(added, v)
		}
	}
	for _, v := range before {
		if !slices.Contains(after, v) && !slices.Contains(removed, v) {
			removed = append(removed, v)
		}
	}
	if len(added) == 0 && len(removed) == 0 {
		return
	}
	d.out = append(d.out, Change{Kind: Changed, Section: d.sect, Name: d.name, Field: field,
		Old: listString(before), New: listString(after), AddedItems: added, RemovedItems: removed})
}

func (d *differ) policy(before, after *portcullis.Policy) {
	d.section(SectionPolicy, "")
	d.field("version", strconv.Itoa(before.Version), strconv.Itoa(after.Version))
	d.field("mode", string(modeOf(before.Mode)), string(modeOf(after.Mode)))
	d.field("unknownTools", string(unknownOf(before.UnknownTools)), string(unknownOf(after.UnknownTools)))
	d.field("policyDocument", before.PolicyDocument, after.PolicyDocument)
}

func modeOf(m portcullis.Mode) portcullis.Mode {
	if m == "" {
		return portcullis.ModeEnforce
	}
	return m
}

func unknownOf(u portcullis.UnknownTools) portcullis.UnknownTools {
	if u == "" {
		return portcullis.UnknownConfirm
	}
	return u
}

func (d *differ) tools(before, after []portcullis.ToolPolicy) {
	byName := func(ts []portcullis.ToolPolicy) map[string]*portcullis.ToolPolicy {
		m := make(map[string]*portcullis.ToolPolicy, len(ts))
		for i := range ts {
			m[ts[i].Name] = &ts[i]
		}
		return m
	}
	o, n := byName(before), byName(after)
	for _, name := range unionKeys(o, n) {
		d.section(SectionTool, name)
		a, b := o[name], n[name]
		switch {
		case a == nil:
			d.whole(Added, toolSummary(b))
			continue
		case b == nil:
			d.whole(Removed, toolSummary(a))
			continue
		}
		d.field("endpoint", string(a.Endpoint), string(b.Endpoint))
		d.field("level", toolLevel(a), toolLevel(b))
		d.field("canBeElevated", strconv.FormatBool(a.CanBeElevated), strconv.FormatBool(b.CanBeElevated))
		d.field("risk", string(a.Risk), string(b.Risk))
		d.field("mode", string(a.Mode), string(b.Mode))
		d.field("shellArg", a.ShellArg, b.ShellArg)
		d.field("pathArg", a.PathArg, b.PathArg)
		d.field("outsideWorkdir", levelString(a.OutsideWorkdir), levelString(b.OutsideWorkdir))
		d.list("aliases", a.Aliases, b.Aliases)
		d.list("redact", a.Redact, b.Redact)
		d.field("summary", a.Summary, b.Summary)
		d.field("rationale", a.Rationale, b.Rationale)
	}
}

// levelString is l's name, or "" when unset.
func levelString(l portcullis.Level) string {
	if l == portcullis.LevelUnset {
		return ""
	}
	return l.String()
}

// toolLevel is the tool's base level, saying when it is the endpoint's
// default: a changed endpoint with no defaultLevel changes the level too.
func toolLevel(t *portcullis.ToolPolicy) string {
	if t.DefaultLevel.Valid() {
		return t.DefaultLevel.String()
	}
	return t.Level().String() + " (endpoint default)"
}

func toolSummary(t *portcullis.ToolPolicy) string {
	parts := []string{string(t.Endpoint), t.Level().String()}
	if !t.CanBeElevated {
		parts = append(parts, "not elevatable")
	}
	if t.Risk != "" {
		parts = append(parts, "risk "+string(t.Risk))
	}
	if t.Mode != "" {
		parts = append(parts, "mode "+string(t.Mode))
	}
	if t.ShellArg != "" {
		parts = append(parts, "shellArg "+t.ShellArg)
	}
	if t.PathArg != "" {
		parts = append(parts, "pathArg "+t.PathArg)
	}
	if t.OutsideWorkdir != portcullis.LevelUnset {
		parts = append(parts, "outsideWorkdir "+t.OutsideWorkdir.String())
	}
	if len(t.Aliases) > 0 {
		parts = append(parts, "aliases "+listString(t.Aliases))
	}
	return strings.Join(parts, ", ")
}

func (d *differ) elements(before, after []portcullis.Element) {
	byName := func(es []portcullis.Element) map[string]*portcullis.Element {
		m := make(map[string]*portcullis.Element, len(es))
		for i := range es {
			m[es[i].Name] = &es[i]
		}
		return m
	}
	o, n := byName(before), byName(after)
	for _, name := range unionKeys(o, n) {
		d.section(SectionElement, name)
		a, b := o[name], n[name]
		switch {
		case a == nil:
			d.whole(Added, elementSummary(b))
			continue
		case b == nil:
			d.whole(Removed, elementSummary(a))
			continue
		}
		d.field("type", string(a.Type), string(b.Type))
		d.field("active", strconv.FormatBool(a.Active), strconv.FormatBool(b.Active))
		d.list("gatekeeper.allow", a.Gatekeeper.Allow, b.Gatekeeper.Allow)
		d.list("gatekeeper.confirm", a.Gatekeeper.Confirm, b.Gatekeeper.Confirm)
		d.list("gatekeeper.deny", a.Gatekeeper.Deny, b.Gatekeeper.Deny)
		d.list("gatekeeper.scope.allowedTypes", a.Gatekeeper.Scope.AllowedTypes, b.Gatekeeper.Scope.AllowedTypes)
		d.list("gatekeeper.scope.blockedTypes", a.Gatekeeper.Scope.BlockedTypes, b.Gatekeeper.Scope.BlockedTypes)
		switch x, y := a.Autonomy, b.Autonomy; {
		case x == nil && y == nil:
		case x == nil:
			d.field("autonomy", "", autonomySummary(y))
		case y == nil:
			d.field("autonomy", autonomySummary(x), "")
		default:
			d.field("autonomy.riskTolerance", string(x.RiskTolerance), string(y.RiskTolerance))
			d.field("autonomy.maxAutonomousSteps", steps(x.MaxAutonomousSteps), steps(y.MaxAutonomousSteps))
			d.list("autonomy.requiresApproval", x.RequiresApproval, y.RequiresApproval)
			d.list("autonomy.autoApprove", x.AutoApprove, y.AutoApprove)
		}
	}
}

func elementSummary(e *portcullis.Element) string {
	state := "inactive"
	if e.Active {
		state = "active"
	}
	parts := []string{string(e.Type), state}
	g := e.Gatekeeper
	for _, l := range []struct {
		name string
		v    []string
	}{{"allow", g.Allow}, {"confirm", g.Confirm}, {"deny", g.Deny}, {"allowedTypes", g.Scope.AllowedTypes}, {"blockedTypes", g.Scope.BlockedTypes}} {
		if len(l.v) > 0 {
			parts = append(parts, l.name+" "+listString(l.v))
		}
	}
	if e.Autonomy != nil {
		parts = append(parts, "autonomy "+autonomySummary(e.Autonomy))
	}
	return strings.Join(parts, ", ")
}

func autonomySummary(a *portcullis.Autonomy) string {
	s := string(a.RiskTolerance) + ", " + steps(a.MaxAutonomousSteps)
	if len(a.RequiresApproval) > 0 {
		s += ", requiresApproval " + listString(a.RequiresApproval)
	}
	if len(a.AutoApprove) > 0 {
		s += ", autoApprove " + listString(a.AutoApprove)
	}
	return s
}

func steps(n int) string {
	if n == 0 {
		return "unlimited steps"
	}
	return strconv.Itoa(n) + " steps"
}

// shell matches rules by pattern. Several rules with one pattern are
// matched in file order.
func (d *differ) shell(before, after []portcullis.ShellRule) {
	key := func(rs []portcullis.ShellRule) (map[string][]*portcullis.ShellRule, []string) {
		m := map[string][]*portcullis.ShellRule{}
		var order []string
		for i := range rs {
			k := patternString(rs[i].Pattern)
			if _, ok := m[k]; !ok {
				order = append(order, k)
			}
			m[k] = append(m[k], &rs[i])
		}
		return m, order
	}
	o, oOrder := key(before)
	n, nOrder := key(after)
	seen := map[string]bool{}
	for _, k := range append(oOrder, nOrder...) {
		if seen[k] {
			continue
		}
		seen[k] = true
		d.section(SectionShell, k)
		a, b := o[k], n[k]
		for i := 0; i < max(len(a), len(b)); i++ {
			switch {
			case i >= len(a):
				d.whole(Added, ruleSummary(b[i]))
			case i >= len(b):
				d.whole(Removed, ruleSummary(a[i]))
			default:
				d.field("decision", string(a[i].Decision), string(b[i].Decision))
				d.field("justification", a[i].Justification, b[i].Justification)
			}
		}
	}
}

// patternString writes a shell rule's pattern as in the file: `git [push, fetch]`.
func patternString(p [][]string) string {
	parts := make([]string, len(p))
	for i, alts := range p {
		if len(alts) == 1 {
			parts[i] = alts[0]
		} else {
			parts[i] = "[" + strings.Join(alts, ", ") + "]"
		}
	}
	return strings.Join(parts, " ")
}

func ruleSummary(r *portcullis.ShellRule) string {
	s := string(r.Decision)
	if r.Justification != "" {
		s += ": " + r.Justification
	}
	return s
}

func (d *differ) validator(before, after *portcullis.ValidatorConfig) {
	d.section(SectionValidator, "")
	switch {
	case before == nil && after == nil:
		return
	case before == nil:
		d.whole(Added, validatorSummary(after))
		return
	case after == nil:
		d.whole(Removed, validatorSummary(before))
		return
	}
	d.field("provider", before.Provider, after.Provider)
	d.field("model", before.Model, after.Model)
	d.field("baseURL", before.BaseURL, after.BaseURL)
	d.field("apiKeyEnv", before.APIKeyEnv, after.APIKeyEnv)
	d.field("command", listString(before.Command), listString(after.Command))
	d.field("timeout", duration(before.Timeout), duration(after.Timeout))
	d.field("mode", before.Mode, after.Mode)
	d.field("rules", before.Rules, after.Rules)
	d.list("scope.risks", risks(before.Scope.Risks), risks(after.Scope.Risks))
	d.list("scope.tools", before.Scope.Tools, after.Scope.Tools)
	d.field("scope.shell", strconv.FormatBool(before.Scope.Shell), strconv.FormatBool(after.Scope.Shell))
	d.list("trustedContext", before.TrustedContext, after.TrustedContext)
	d.field("budget.perMinute", strconv.Itoa(before.Budget.PerMinute), strconv.Itoa(after.Budget.PerMinute))
	d.field("budget.burst", strconv.Itoa(before.Budget.Burst), strconv.Itoa(after.Budget.Burst))
	d.field("budget.concurrent", strconv.Itoa(before.Budget.Concurrent), strconv.Itoa(after.Budget.Concurrent))
}

func validatorSummary(v *portcullis.ValidatorConfig) string {
	s := v.Provider
	if v.Model != "" {
		s += " " + v.Model
	}
	var scope []string
	scope = append(scope, risks(v.Scope.Risks)...)
	scope = append(scope, v.Scope.Tools...)
	if v.Scope.Shell {
		scope = append(scope, "every shell command")
	}
	if len(scope) > 0 {
		s += ", scope " + listString(scope)
	}
	return s
}

func risks(rs []portcullis.Risk) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r)
	}
	return out
}

func (d *differ) migrations(before, after []portcullis.Migration) {
	byName := func(ms []portcullis.Migration) map[string]*portcullis.Migration {
		m := make(map[string]*portcullis.Migration, len(ms))
		for i := range ms {
			m[ms[i].Name] = &ms[i]
		}
		return m
	}
	o, n := byName(before), byName(after)
	for _, name := range unionKeys(o, n) {
		d.section(SectionMigration, name)
		a, b := o[name], n[name]
		switch {
		case a == nil:
			d.whole(Added, "paths "+listString(b.Paths))
		case b == nil:
			d.whole(Removed, "paths "+listString(a.Paths))
		default:
			d.list("paths", a.Paths, b.Paths)
		}
	}
}

func unionKeys[V any](a, b map[string]V) []string {
	keys := make([]string, 0, len(a)+len(b))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

func listString(l []string) string {
	if len(l) == 0 {
		return ""
	}
	return "[" + strings.Join(l, ", ") + "]"
}

func duration(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}

func count(n int64) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprint(n)
}
