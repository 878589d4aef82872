package shell

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/syntax"

	"github.com/portcullis/portcullis"
)

// Category is how dangerous a command is. The categories are ordered:
// safe < moderate < dangerous < blocked.
type Category string

// The categories, from least to most dangerous.
const (
	// Safe commands only read: ls, grep, git status, go test.
	Safe Category = "safe"
	// Moderate commands change things that can be put back, or are not
	// known: writes to files, package installs, unknown programs.
	Moderate Category = "moderate"
	// Dangerous commands destroy, escalate privilege, run code from the
	// network or read secrets; a person must confirm each one.
	Dangerous Category = "dangerous"
	// Blocked commands are never allowed: reverse shells, and anything
	// that touches Portcullis itself.
	Blocked Category = "blocked"
)

// Rank orders the categories: 0 for safe up to 3 for blocked, -1 for a
// value that is not a category.
func (c Category) Rank() int {
	switch c {
	case Safe:
		return 0
	case Moderate:
		return 1
	case Dangerous:
		return 2
	case Blocked:
		return 3
	}
	return -1
}

// Valid reports whether c is one of the four categories.
func (c Category) Valid() bool { return c.Rank() >= 0 }

// Band returns the range of risk scores, inclusive, that a classification
// of this category carries: safe 0–20, moderate 21–60, dangerous 61–95,
// blocked 96–100. It returns 100, 100 for an invalid category.
func (c Category) Band() (lo, hi int) {
	switch c {
	case Safe:
		return 0, 20
	case Moderate:
		return 21, 60
	case Dangerous:
		return 61, 95
	}
	return 96, 100
}

// Classification is the verdict on one command line. Its JSON form is the
// contract of docs/SHELL.md.
type Classification struct {
	// Category is the category of the most dangerous part of the line.
	Category Category `json:"category"`
	// RiskScore is 0..100 and always within Category's band.
	RiskScore int `json:"riskScore"`
	// Irreversible is set when some part destroys data, loses history or
	// tears infrastructure down.
	Irreversible bool `json:"irreversible"`
	// Reasons say, for a person, why the line has its category; empty for
	// a plainly safe line.
	Reasons []string `json:"reasons"`
	// Commands lists every simple command found, as argv, after looking
	// through wrappers (sudo rm -rf x gives [rm -rf x]). Words known only
	// at run time appear as written ($HOME, $(cmd)).
	Commands [][]string `json:"commands"`
}

// MarshalJSON writes empty lists as [] rather than null.
func (c Classification) MarshalJSON() ([]byte, error) {
	type plain Classification
	p := plain(c)
	if p.Reasons == nil {
		p.Reasons = []string{}
	}
	if p.Commands == nil {
		p.Commands = [][]string{}
	}
	return json.Marshal(p)
}

// Options configures a Classifier.
type Options struct {
	// Rules are the policy's `shell.rules`, applied on top of the built-in
	// knowledge.
	Rules []portcullis.ShellRule
	// ProtectedPaths are Portcullis's own files: its state directory, the
	// policy file, its binary. A command naming one of them, or a path
	// under one, anywhere in its arguments or as a redirect target, is
	// blocked. The default state directory (~/.local/state/portcullis and
	// $XDG_STATE_HOME/portcullis) is always protected.
	ProtectedPaths []string
	// Home is the home directory that ~ and $HOME stand for, so that
	// ~/x in a command matches a protected path written in full. When it
	// is empty, ~ matches only paths written with ~.
	Home string
}

// Classifier classifies shell commands. It is safe for concurrent use.
type Classifier struct {
	rules     []rule
	protected []protectedPath
	// protectedNames are the protected paths' last components, each once:
	// a path that holds none of them cannot touch a protected path.
	protectedNames []string
	home           string
	parsers        sync.Pool
}

// New builds a classifier. It checks every rule: the pattern must be well
// formed, the decision known, each Match example must match the rule and
// no NotMatch example may. The error names the rule by its index in
// shell.rules (and its line in the policy file when known) and the example.
func New(opts Options) (*Classifier, error) {
	c := &Classifier{home: cleanHome(opts.Home)}
	c.parsers.New = func() any { return syntax.NewParser(syntax.Variant(syntax.LangBash)) }
	for _, p := range builtinProtected {
		c.protected = append(c.protected, newProtectedPath(p, ""))
	}
	for _, p := range opts.ProtectedPaths {
		if strings.TrimSpace(p) == "" {
			continue
		}
		c.protected = append(c.protected, newProtectedPath(p, c.home))
	}
	for _, pp := range c.protected {
		if name := pp.comps[len(pp.comps)-1]; !slices.Contains(c.protectedNames, name) {
			c.protectedNames = append(c.protectedNames, name)
		}
	}
	rules, err := compileRules(opts.Rules)
	if err != nil {
		return nil, err
	}
	// The examples are checked with the built-in walker only: a rule's
	// examples say what its pattern matches, whatever the other rules do.
	for i, r := range rules {
		for _, ex := range r.src.Match {
			if !c.ruleMatchesExample(r, ex) {
				return nil, fmt.Errorf("%s: match example %q does not match pattern %s", r.name, ex, r.pattern)
			}
		}
		for _, ex := range r.src.NotMatch {
			if c.ruleMatchesExample(r, ex) {
				return nil, fmt.Errorf("%s: notMatch example %q matches pattern %s", r.name, ex, r.pattern)
			}
		}
		rules[i] = r
	}
	c.rules = rules
	return c, nil
}

// Classify classifies one command line. It never fails: input the parser
// cannot read is classified from what can be recovered and is at least
// moderate. An empty line (or one holding only comments) runs nothing and
// is safe, with no commands.
func (c *Classifier) Classify(command string) Classification {
	w := newWalker(c)
	w.script(command)
	return w.res.classification()
}

// parse parses src; when lenient, the parser skips missing tokens. A panic
// inside the parser (it has one on some malformed input) is an error like
// any other, and that parser is not reused.
func (c *Classifier) parse(src string, lenient bool) (f *syntax.File, err error) {
	var p *syntax.Parser
	if lenient {
		p = syntax.NewParser(syntax.Variant(syntax.LangBash), syntax.RecoverErrors(16))
	} else {
		p = c.parsers.Get().(*syntax.Parser)
	}
	defer func() {
		if r := recover(); r != nil {
			f, err = nil, fmt.Errorf("the parser failed: %v", r)
			return
		}
		if !lenient {
			c.parsers.Put(p)
		}
	}()
	return p.Parse(strings.NewReader(src), "")
}

// Scores within the bands. A finding carries one of these; the line's score
// is the highest.
const (
	scoreSafe         = 10
	scoreWrite        = 35 // writes files, changes permissions
	scoreModerate     = 40 // unknown or changing, reversible
	scoreModerateHigh = 50 // installs, runs code from registries or pipes
	scoreUnparsed     = 55 // the parser cannot read it
	scoreDangerous    = 70 // needs a person: privilege, reading secrets
	scoreDangerHigh   = 80 // privilege with a command, persistence, code from the network
	scoreDestroy      = 90 // destroys data or history
	scoreCatastrophe  = 95 // destroys a system: rm -rf /, mkfs, dd to a disk
	scoreBlocked      = 100
)

// finding is one judgement about part of a line.
type finding struct {
	cat          Category
	score        int
	irreversible bool
	reason       string
	// lowerable marks a built-in judgement of one command that a policy
	// allow rule may lower to safe.
	lowerable bool
}

// result accumulates the findings and commands of one line.
type result struct {
	findings []finding
	commands [][]string
	seen     map[string]bool
	work     int  // simple commands and parses so far
	overrun  bool // work went past the budget
	probes   int  // values and wrapped lines tried as code (codeArgs, unknownWrapper)
}

func (r *result) add(f finding) {
	r.findings = append(r.findings, f)
}

func (r *result) record(argv []string) {
	if len(r.commands) >= maxCommands {
		return
	}
	if len(r.commands) < 16 {
		// Few commands: comparing is cheaper than a map.
		for _, c := range r.commands {
			if slices.Equal(c, argv) {
				return
			}
		}
		r.commands = append(r.commands, argv)
		return
	}
	if r.seen == nil {
		r.seen = make(map[string]bool, 2*len(r.commands))
		for _, c := range r.commands {
			r.seen[strings.Join(c, "\x00")] = true
		}
	}
	key := strings.Join(argv, "\x00")
	if r.seen[key] {
		return
	}
	r.seen[key] = true
	r.commands = append(r.commands, argv)
}

func (r *result) classification() Classification {
	out := Classification{Category: Safe, Reasons: []string{}, Commands: r.commands}
	if out.Commands == nil {
		out.Commands = [][]string{}
	}
	if len(r.commands) > 0 {
		out.RiskScore = scoreSafe
	}
	seen := map[string]bool{}
	for _, f := range r.findings {
		if f.cat.Rank() > out.Category.Rank() {
			out.Category = f.cat
		}
		if f.score > out.RiskScore {
			out.RiskScore = f.score
		}
		if f.irreversible {
			out.Irreversible = true
		}
		if f.reason != "" && !seen[f.reason] && len(out.Reasons) < maxReasons {
			seen[f.reason] = true
			out.Reasons = append(out.Reasons, f.reason)
		}
	}
	lo, hi := out.Category.Band()
	out.RiskScore = min(max(out.RiskScore, lo), hi)
	return out
}

// Limits that keep a hostile line from costing more than a bounded amount
// of work.
const (
	maxDepth     = 8         // nested shell code: bash -c "bash -c ..."
	maxInput     = 256 << 10 // bytes of one piece of code
	maxNesting   = 200       // brackets nested in one piece of code
	maxOperators = 8000      // | and & characters in one piece of code
	maxWork      = 4000      // simple commands and parses per line
	maxVariants  = 16        // argv variants of one simple command
	maxAlts      = 8         // values one word may take
	maxFields    = 64        // fields one brace expansion may yield
	maxCommands  = 512       // commands reported
	maxReasons   = 32        // reasons reported
	maxProbes    = 48        // values and wrapped lines tried as code per line
)
