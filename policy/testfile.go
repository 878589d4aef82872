package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/portcullis/portcullis"
	"gopkg.in/yaml.v3"
)

// TestFile is a loaded policy unit-test file (`portcullis policy test`): a
// policy and cases, each a decision request and the decision expected.
type TestFile struct {
	Path     string
	Policy   *portcullis.Policy
	Warnings []Warning // the policy's warnings
	Cases    []TestCase
	// Clock is the clock of the file's gates: RunTests sets it to each
	// case's At (when given) before deciding it. Until a case sets it,
	// it tells the system time.
	Clock *CaseClock
}

// CaseClock is the clock a test file's cases run on: what a case's `at`
// set last, or the system time before any did. It is safe for concurrent
// use.
type CaseClock struct {
	mu  sync.Mutex
	now time.Time
}

// Now returns the time the last case set, or the system time.
func (c *CaseClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.now.IsZero() {
		return time.Now()
	}
	return c.now
}

// Set makes the clock tell t.
func (c *CaseClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// TestCase is one case of a test file.
type TestCase struct {
	Name string
	// File is the test file the case is in (TestFile.Path), for messages.
	File    string
	Line    int
	Request portcullis.Call
	// Validator stands in for the LLM validator in this case: "allow",
	// "deny" or "unavailable" (no verdict: fail closed); "" means the case
	// runs without a validator, so a call in the validator's scope is denied
	// fail-closed.
	Validator string
	// At is `at`: the time the case is decided at (the file's clock is
	// set to it); zero leaves the clock where the case before left it.
	// Budgets count across the cases of a file, in order.
	At   time.Time
	Want Expectation
}

// The stand-in validator verdicts a test case may name.
const (
	ValidatorAllow       = "allow"
	ValidatorDeny        = "deny"
	ValidatorUnavailable = "unavailable"
)

// Expectation is what a case expects of the decision. A nil field is not
// checked.
type Expectation struct {
	Outcome             *portcullis.Outcome
	PermissionLevel     *portcullis.Level
	Code                *portcullis.Code
	Source              *portcullis.Source
	SourceElement       *string
	MatchedPolicy       *string
	ConflictingElements *[]portcullis.Conflict
	FailClosed          *bool
	ReasonContains      *string // the decision's reason contains this text
	Tool                *string
	Risk                *portcullis.Risk
	// Budget is the name of the budget the call did not fit ("" for none).
	Budget *string
	// ReopensAt is when that budget's window reopens.
	ReopensAt *time.Time
}

// CaseResult is the result of running one case.
type CaseResult struct {
	Case     TestCase
	Decision portcullis.Decision
	Err      error    // from Decide: an error always fails the case
	Diffs    []string // one line per expectation not met
}

// Passed reports whether the case passed: no error and no differences.
func (r *CaseResult) Passed() bool { return r.Err == nil && len(r.Diffs) == 0 }

// The keys of a test file's mappings.
var (
	testFileKeys = []string{"policy", "cases"}
	caseKeys     = []string{"name", "at", "request", "validator", "want"}
	wantKeys     = []string{"outcome", "permissionLevel", "code", "source", "sourceElement", "matchedPolicy", "conflictingElements", "failClosed", "reasonContains", "tool", "risk", "budget", "reopensAt"}
	conflictKeys = []string{"name", "wantedLevel"}
)

// The values a decision's fields can take.
var (
	outcomes       = names(portcullis.Outcomes)
	sources        = names(portcullis.Sources)
	codes          = names(portcullis.DecisionCodes)
	matchedPolicys = []string{"", "allow", "confirm", "deny", "scope_restriction"}
)

// LoadTests reads a policy unit-test file. Errors are as for Load: the os
// error when the file cannot be read, otherwise a *portcullis.Error with
// code INVALID_POLICY listing every problem with file and line, including
// the problems of the policy the file names.
func LoadTests(path string) (*TestFile, error) {
	data, err := readFile("test file", path)
	if err != nil {
		return nil, err
	}
	return ParseTests(path, data)
}

// ParseTests parses a policy unit-test file's contents. name is the file's
// name, used in messages; a policy named by path is loaded relative to its
// directory.
//
// The file is a mapping with `policy` (a path, or an inline policy mapping
// read exactly as a policy file is) and `cases`, a list of {name, request,
// want}. A request is converted to JSON and decoded with
// portcullis.DecodeCall, so it is exactly as strict as on the wire.
func ParseTests(name string, data []byte) (*TestFile, error) {
	rep := &report{}
	root := decodeYAML(name, data, rep)
	if root == nil {
		return nil, rep.err()
	}
	p := newParser(name, rep)
	root = p.resolve(root)
	if root.Kind != yaml.MappingNode {
		p.errorf(root, at{}, "the test file is %s; want a mapping (policy: ..., cases: [...])", kindName(root))
		return nil, rep.err()
	}
	var polNode, casesNode *yaml.Node
	p.mapping(root, at{}, testFileKeys, func(key string, _, v *yaml.Node) {
		switch key {
		case "policy":
			polNode = v
		case "cases":
			casesNode = v
		}
	})
	tf := &TestFile{Path: name, Clock: &CaseClock{}}
	if polNode == nil {
		p.errorf(root, at{path: "policy"}, "missing (want the path of a policy file, or a policy mapping)")
	} else {
		tf.Policy, tf.Warnings = p.testPolicy(polNode, data)
	}
	if casesNode == nil {
		p.errorf(root, at{path: "cases"}, "missing (want a list of cases: - name: ..., request: ..., want: ...)")
	} else {
		tf.Cases = p.cases(casesNode, tf.Policy)
	}
	if err := rep.err(); err != nil {
		return nil, err
	}
	return tf, nil
}

// testPolicy reads the test file's policy: a path or an inline mapping.
// An inline policy's Source is the test file and its Hash that of the test
// file's bytes (data).
func (p *parser) testPolicy(n *yaml.Node, data []byte) (*portcullis.Policy, []Warning) {
	w := at{path: "policy"}
	dir := filepath.Dir(p.file)
	switch {
	case n.Kind == yaml.MappingNode:
		rep := &report{}
		pol := parsePolicy(p.file, n, rep)
		p.rep.errs = append(p.rep.errs, rep.errs...)
		if pol == nil || len(rep.errs) > 0 {
			return nil, rep.warnings()
		}
		pol.Source = p.file
		pol.Hash = hashOf(data)
		if err := resolvePaths(pol, dir); err != nil {
			p.errorf(n, w, "%v", err)
			return nil, rep.warnings()
		}
		return pol, rep.warnings()
	case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" && n.Value != "":
		path := n.Value
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, path)
		}
		pol, warns, err := Load(path)
		if err != nil {
			if lines := errorLines(err); lines != nil {
				p.rep.before = append(p.rep.before, lines...)
				p.bad[n] = true
			} else {
				p.errorf(n, w, "%v", err)
			}
			return nil, warns
		}
		return pol, warns
	}
	p.errorf(n, w, "got %s, want the path of a policy file or a policy mapping", kindName(n))
	return nil, nil
}

func caseAt(name string, i int) at {
	if strings.TrimSpace(name) == "" {
		return at{path: "cases[" + strconv.Itoa(i) + "]"}
	}
	return at{what: "case", name: name}
}

// cases reads `cases`. pol, when not nil, is the policy, against which the
// requests' activeElements are checked.
func (p *parser) cases(n *yaml.Node, pol *portcullis.Policy) []TestCase {
	w := at{path: "cases"}
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		p.errorf(n, w, "got %s, want a non-empty list of cases (- name: ..., request: ..., want: ...)", kindName(n))
		return nil
	}
	var elements map[string]bool
	if pol != nil {
		elements = make(map[string]bool, len(pol.Elements))
		for _, e := range pol.Elements {
			elements[e.Name] = true
		}
	}
	seen := map[string]int{}
	out := make([]TestCase, 0, len(n.Content))
	for i, item := range n.Content {
		item = p.resolve(item)
		w := w.index(i)
		if item.Kind != yaml.MappingNode {
			p.errorf(item, w, "got %s, want a mapping with name, request and want", kindName(item))
			continue
		}
		tc := TestCase{File: p.file, Line: item.Line}
		if name := nameOf(item); name != "" {
			w = caseAt(name, i)
		}
		var req, want *yaml.Node
		p.mapping(item, w, caseKeys, func(key string, _, v *yaml.Node) {
			switch key {
			case "name":
				tc.Name, _ = p.str(v, w.key(key))
			case "request":
				req = v
			case "at":
				tc.At = p.timestamp(v, w.key(key))
			case "validator":
				if s, ok := p.str(v, w.key(key)); ok {
					switch s {
					case ValidatorAllow, ValidatorDeny, ValidatorUnavailable:
						tc.Validator = s
					default:
						p.errorf(v, w.key(key), "unknown verdict %s (want allow, deny or unavailable)", quote(s))
					}
				}
			case "want":
				want = v
			}
		})
		if strings.TrimSpace(tc.Name) == "" {
			p.errorf(item, w.key("name"), "missing (want a name that says what the case checks)")
		} else if prev, dup := seen[tc.Name]; dup {
			p.errorf(item, w, "duplicate case name (first at line %d)", prev)
		} else {
			seen[tc.Name] = tc.Line
		}
		if req == nil {
			p.errorf(item, w.key("request"), "missing (want a decision request, e.g. {tool: list_elements})")
		} else if c, ok := p.request(req, w.key("request"), elements); ok {
			tc.Request = c
		}
		if want == nil {
			p.errorf(item, w.key("want"), "missing (want the expected decision, e.g. {outcome: allow})")
		} else {
			tc.Want = p.want(want, w.key("want"))
		}
		out = append(out, tc)
	}
	return out
}

var unknownField = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`unknown field "([^"]*)"`) })

// request converts a request node to JSON and decodes it as the wire does.
func (p *parser) request(n *yaml.Node, w at, elements map[string]bool) (portcullis.Call, bool) {
	if n.Kind != yaml.MappingNode {
		p.errorf(n, w, "got %s, want a decision request mapping, e.g. {tool: list_elements}", kindName(n))
		return portcullis.Call{}, false
	}
	var buf bytes.Buffer
	if !p.toJSON(n, &buf, w) {
		return portcullis.Call{}, false
	}
	c, err := portcullis.DecodeCall(buf.Bytes())
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), "json: ")
		at := n
		if m := unknownField().FindStringSubmatch(msg); m != nil {
			if k := findKey(n, m[1]); k != nil {
				at = k
			}
		}
		p.errorf(at, w, "%s", msg)
		return portcullis.Call{}, false
	}
	if elements != nil {
		for j, name := range c.ActiveElements {
			if !elements[name] {
				at := n
				if list := mapValue(n, "activeElements"); list != nil && list.Kind == yaml.SequenceNode && j < len(list.Content) {
					at = list.Content[j]
				}
				p.errorf(at, w.key("activeElements").index(j), "no element %s in the policy", quote(name))
			}
		}
	}
	return c, true
}

// mapValue returns the value of key in mapping n, or nil.
func mapValue(n *yaml.Node, key string) *yaml.Node {
	n = resolveAlias(n)
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return resolveAlias(n.Content[i+1])
		}
	}
	return nil
}

// findKey finds a mapping key named key in n or below, outside args.
func findKey(n *yaml.Node, key string) *yaml.Node {
	n = resolveAlias(n)
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				return n.Content[i]
			}
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == "args" {
				continue
			}
			if k := findKey(n.Content[i+1], key); k != nil {
				return k
			}
		}
	case yaml.SequenceNode:
		for _, c := range n.Content {
			if k := findKey(c, key); k != nil {
				return k
			}
		}
	}
	return nil
}

var jsonNumber = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`) })

// toJSON writes n as JSON. Numbers are kept as written when JSON can say
// them so; the document is bounded by portcullis.MaxRequestBytes.
func (p *parser) toJSON(n *yaml.Node, buf *bytes.Buffer, w at) bool {
	n = p.resolve(n)
	if p.aborted {
		return false
	}
	if buf.Len() > portcullis.MaxRequestBytes {
		p.errorf(n, w, "request is more than %d bytes as JSON, the limit", portcullis.MaxRequestBytes)
		return false
	}
	switch n.Kind {
	case yaml.MappingNode:
		buf.WriteByte('{')
		seen := make(map[string]bool, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := p.resolve(n.Content[i])
			if k.Kind != yaml.ScalarNode {
				p.errorf(k, w, "got %s as a key, want a name", kindName(k))
				return false
			}
			if seen[k.Value] {
				p.errorf(k, w, "duplicate key %s", quote(k.Value))
				return false
			}
			seen[k.Value] = true
			if i > 0 {
				buf.WriteByte(',')
			}
			writeJSONString(buf, k.Value)
			buf.WriteByte(':')
			if !p.toJSON(n.Content[i+1], buf, w) {
				return false
			}
		}
		buf.WriteByte('}')
	case yaml.SequenceNode:
		buf.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				buf.WriteByte(',')
			}
			if !p.toJSON(c, buf, w) {
				return false
			}
		}
		buf.WriteByte(']')
	case yaml.ScalarNode:
		return p.scalarJSON(n, buf, w)
	default:
		p.errorf(n, w, "got %s, want a value", kindName(n))
		return false
	}
	return true
}

func (p *parser) scalarJSON(n *yaml.Node, buf *bytes.Buffer, w at) bool {
	switch n.ShortTag() {
	case "!!null":
		buf.WriteString("null")
	case "!!bool":
		if n.Value != "true" && n.Value != "false" {
			p.errorf(n, w, "got boolean %s, want true or false", clip(n.Value))
			return false
		}
		buf.WriteString(n.Value)
	case "!!int", "!!float":
		if jsonNumber().MatchString(n.Value) {
			buf.WriteString(n.Value)
			return true
		}
		var f float64
		if n.ShortTag() == "!!int" {
			var i int64
			if err := n.Decode(&i); err != nil {
				p.errorf(n, w, "%s is not a number JSON can hold", quote(n.Value))
				return false
			}
			buf.WriteString(strconv.FormatInt(i, 10))
			return true
		}
		if err := n.Decode(&f); err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			p.errorf(n, w, "%s is not a number JSON can hold", quote(n.Value))
			return false
		}
		buf.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
	default:
		writeJSONString(buf, n.Value)
	}
	return true
}

func writeJSONString(buf *bytes.Buffer, s string) {
	b, err := json.Marshal(s)
	if err != nil { // a Go string always marshals
		panic(err)
	}
	buf.Write(b)
}

// want reads a case's expectation.
func (p *parser) want(n *yaml.Node, w at) Expectation {
	var e Expectation
	keys := 0
	oneOf := func(v *yaml.Node, w at, what string, allowed []string) (string, bool) {
		s, ok := p.str(v, w)
		if !ok {
			return "", false
		}
		for _, a := range allowed {
			if a == s {
				return s, true
			}
		}
		p.errorf(v, w, "unknown %s %s (want %s)", what, quote(s), listWords(allowed))
		return "", false
	}
	ok := p.mapping(n, w, wantKeys, func(key string, _, v *yaml.Node) {
		keys++
		w := w.key(key)
		switch key {
		case "outcome":
			if s, ok := oneOf(v, w, "outcome", outcomes); ok {
				o := portcullis.Outcome(s)
				e.Outcome = &o
			}
		case "permissionLevel":
			if l := p.level(v, w); l.Valid() {
				e.PermissionLevel = &l
			} else if !p.bad[v] {
				p.errorf(v, w, "missing level (want %s)", portcullis.LevelNames)
			}
		case "code":
			if s, ok := oneOf(v, w, "code", codes); ok {
				c := portcullis.Code(s)
				e.Code = &c
			}
		case "source":
			if s, ok := oneOf(v, w, "source", sources); ok {
				src := portcullis.Source(s)
				e.Source = &src
			}
		case "sourceElement":
			if s, ok := p.str(v, w); ok {
				e.SourceElement = &s
			}
		case "matchedPolicy":
			if s, ok := oneOf(v, w, "matched policy", matchedPolicys); ok {
				e.MatchedPolicy = &s
			}
		case "conflictingElements":
			if cs, ok := p.conflicts(v, w); ok {
				e.ConflictingElements = &cs
			}
		case "failClosed":
			if b, ok := p.boolean(v, w); ok {
				e.FailClosed = &b
			}
		case "reasonContains":
			if s, ok := p.str(v, w); ok {
				e.ReasonContains = &s
			}
		case "tool":
			if s, ok := p.str(v, w); ok {
				e.Tool = &s
			}
		case "budget":
			if s, ok := p.str(v, w); ok {
				e.Budget = &s
			}
		case "reopensAt":
			if t := p.timestamp(v, w); !t.IsZero() {
				e.ReopensAt = &t
			}
		case "risk":
			if s, ok := p.str(v, w); ok {
				if _, err := portcullis.ParseRisk(s); err != nil && s != "" {
					p.errorf(v, w, "unknown risk %s (want external-write, policy-write or \"\")", quote(s))
				} else {
					r := portcullis.Risk(s)
					e.Risk = &r
				}
			}
		}
	})
	if ok && keys == 0 {
		p.errorf(n, w, "empty (want at least one of %s)", strings.Join(wantKeys, ", "))
	}
	return e
}

// timestamp reads an RFC 3339 time, such as 2026-11-28T12:00:00Z.
func (p *parser) timestamp(n *yaml.Node, w at) time.Time {
	n = p.resolve(n)
	if n.Kind == yaml.ScalarNode && !isNull(n) {
		if t, err := time.Parse(time.RFC3339Nano, n.Value); err == nil {
			return t.UTC()
		}
	}
	p.errorf(n, w, "got %s, want a time such as 2026-11-28T12:00:00Z", clip(n.Value))
	return time.Time{}
}

// conflicts reads want.conflictingElements: a list of {name, wantedLevel};
// null and [] both expect none.
func (p *parser) conflicts(n *yaml.Node, w at) ([]portcullis.Conflict, bool) {
	if isNull(n) {
		return []portcullis.Conflict{}, true
	}
	if n.Kind != yaml.SequenceNode {
		p.errorf(n, w, "got %s, want a list of {name: ..., wantedLevel: ...}", kindName(n))
		return nil, false
	}
	out := make([]portcullis.Conflict, 0, len(n.Content))
	ok := true
	for i, item := range n.Content {
		item = p.resolve(item)
		w := w.index(i)
		if item.Kind != yaml.MappingNode {
			p.errorf(item, w, "got %s, want {name: ..., wantedLevel: ...}", kindName(item))
			ok = false
			continue
		}
		var c portcullis.Conflict
		p.mapping(item, w, conflictKeys, func(key string, _, v *yaml.Node) {
			switch key {
			case "name":
				c.Name, _ = p.str(v, w.key(key))
			case "wantedLevel":
				c.WantedLevel = p.level(v, w.key(key))
			}
		})
		if c.Name == "" {
			p.errorf(item, w.key("name"), "missing (want the element's name)")
			ok = false
		}
		if !c.WantedLevel.Valid() {
			if vn := mapValue(item, "wantedLevel"); vn == nil || !p.bad[vn] {
				p.errorf(item, w.key("wantedLevel"), "missing (want %s)", portcullis.LevelNames)
			}
			ok = false
		}
		out = append(out, c)
	}
	return out, ok
}

// RunTests runs every case of tf through d, in order. A case fails when
// Decide returns an error (or panics) or when the decision does not meet an
// expectation.
func RunTests(ctx context.Context, d portcullis.Decider, tf *TestFile) []CaseResult {
	return RunTestsWith(ctx, tf, func(TestCase) portcullis.Decider { return d })
}

// RunTestsWith runs every case through the Decider that decider returns
// for it: the runner of `portcullis policy test` gives a case that names a
// stand-in validator verdict a gate with that verdict.
func RunTestsWith(ctx context.Context, tf *TestFile, decider func(TestCase) portcullis.Decider) []CaseResult {
	results := make([]CaseResult, 0, len(tf.Cases))
	for _, tc := range tf.Cases {
		r := CaseResult{Case: tc}
		if !tc.At.IsZero() && tf.Clock != nil {
			tf.Clock.Set(tc.At)
		}
		if err := ctx.Err(); err != nil {
			r.Err = err
		} else {
			r.Decision, r.Err = decide(ctx, decider(tc), tc.Request)
			if r.Err == nil {
				r.Diffs = tc.Want.Diff(r.Decision)
			}
		}
		results = append(results, r)
	}
	return results
}

func decide(ctx context.Context, d portcullis.Decider, c portcullis.Call) (dec portcullis.Decision, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("decide panicked: %v", v)
		}
	}()
	return d.Decide(ctx, c)
}

// Diff returns one line for each expectation d does not meet, such as
// "permissionLevel: got CONFIRM_SESSION, want CONFIRM_SINGLE_USE".
func (e *Expectation) Diff(d portcullis.Decision) []string {
	var diffs []string
	add := func(field, got, want string) {
		if got != want {
			diffs = append(diffs, fmt.Sprintf("%s: got %s, want %s", field, orEmpty(got), orEmpty(want)))
		}
	}
	if e.Outcome != nil {
		add("outcome", string(d.Outcome), string(*e.Outcome))
	}
	if e.PermissionLevel != nil {
		add("permissionLevel", d.PermissionLevel.String(), e.PermissionLevel.String())
	}
	if e.Code != nil {
		add("code", string(d.Code), string(*e.Code))
	}
	if e.Source != nil {
		add("source", string(d.Source), string(*e.Source))
	}
	if e.SourceElement != nil {
		add("sourceElement", strconv.Quote(d.SourceElement), strconv.Quote(*e.SourceElement))
	}
	if e.MatchedPolicy != nil {
		add("matchedPolicy", d.MatchedPolicy, *e.MatchedPolicy)
	}
	if e.ConflictingElements != nil {
		add("conflictingElements", formatConflicts(d.ConflictingElements), formatConflicts(*e.ConflictingElements))
	}
	if e.FailClosed != nil {
		add("failClosed", strconv.FormatBool(d.FailClosed), strconv.FormatBool(*e.FailClosed))
	}
	if e.Budget != nil {
		got := ""
		if d.Budget != nil {
			got = d.Budget.Name
		}
		add("budget", strconv.Quote(got), strconv.Quote(*e.Budget))
	}
	if e.ReopensAt != nil {
		got := ""
		if d.Budget != nil {
			got = d.Budget.ReopensAt.UTC().Format(time.RFC3339)
		}
		add("reopensAt", got, e.ReopensAt.Format(time.RFC3339))
	}
	if e.ReasonContains != nil && !strings.Contains(d.Reason, *e.ReasonContains) {
		diffs = append(diffs, fmt.Sprintf("reason: got %q, want it to contain %q", d.Reason, *e.ReasonContains))
	}
	if e.Tool != nil {
		add("tool", strconv.Quote(d.Tool), strconv.Quote(*e.Tool))
	}
	if e.Risk != nil {
		add("risk", string(d.Risk), string(*e.Risk))
	}
	return diffs
}

func orEmpty(s string) string {
	if s == "" {
		return `""`
	}
	return s
}

func formatConflicts(cs []portcullis.Conflict) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = fmt.Sprintf("{name: %q, wantedLevel: %s}", c.Name, orEmpty(c.WantedLevel.String()))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// FormatResults writes one line per failed case, "FAIL file:line name",
// followed by its differences (or error) indented; with verbose, also
// "PASS name" for each passed case. It ends with "N passed, M failed" and
// returns the number of failed cases. Write errors are not reported; w is
// meant to be a terminal or a buffer.
func FormatResults(w io.Writer, results []CaseResult, verbose bool) (failed int) {
	var b strings.Builder
	for i := range results {
		r := &results[i]
		if r.Passed() {
			if verbose {
				fmt.Fprintf(&b, "PASS %s\n", r.Case.Name)
			}
			continue
		}
		failed++
		where := "line " + strconv.Itoa(r.Case.Line)
		if r.Case.File != "" {
			where = r.Case.File + ":" + strconv.Itoa(r.Case.Line)
		}
		fmt.Fprintf(&b, "FAIL %s %s\n", where, r.Case.Name)
		if r.Err != nil {
			fmt.Fprintf(&b, "    error: %s\n", strings.ReplaceAll(r.Err.Error(), "\n", "\n    "))
		}
		for _, d := range r.Diffs {
			fmt.Fprintf(&b, "    %s\n", d)
		}
	}
	fmt.Fprintf(&b, "%d passed, %d failed\n", len(results)-failed, failed)
	io.WriteString(w, b.String())
	return failed
}

func names[S ~string](vs []S) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}
