package shell

import (
	"fmt"
	"strings"

	"github.com/portcullis/portcullis"
)

// rule is one compiled `shell.rules` entry.
type rule struct {
	src     portcullis.ShellRule
	name    string // shell.rules[2] (line 14)
	pattern string // [git, [push, fetch]]
	reason  string
}

func strictness(d portcullis.ShellDecision) int {
	switch d {
	case portcullis.ShellAllow:
		return 1
	case portcullis.ShellConfirm:
		return 2
	case portcullis.ShellDeny:
		return 3
	}
	return 0
}

func compileRules(src []portcullis.ShellRule) ([]rule, error) {
	out := make([]rule, 0, len(src))
	for i, r := range src {
		name := fmt.Sprintf("shell.rules[%d]", i)
		if r.Line > 0 {
			name += fmt.Sprintf(" (line %d)", r.Line)
		}
		if len(r.Pattern) == 0 {
			return nil, fmt.Errorf("%s: pattern is empty (want a list of tokens, e.g. [git, [push, fetch]])", name)
		}
		for j, alts := range r.Pattern {
			if len(alts) == 0 {
				return nil, fmt.Errorf("%s: pattern position %d lists no tokens", name, j)
			}
			for _, t := range alts {
				if strings.TrimSpace(t) == "" {
					return nil, fmt.Errorf("%s: pattern position %d has an empty token", name, j)
				}
			}
		}
		if strictness(r.Decision) == 0 {
			return nil, fmt.Errorf("%s: unknown decision %q (want allow, confirm or deny)", name, r.Decision)
		}
		cr := rule{src: r, name: name, pattern: patternString(r.Pattern)}
		cr.reason = strings.TrimSpace(r.Justification)
		if cr.reason == "" {
			cr.reason = fmt.Sprintf("policy rule %s: %s", cr.pattern, r.Decision)
		}
		out = append(out, cr)
	}
	return out, nil
}

func patternString(p [][]string) string {
	parts := make([]string, len(p))
	for i, alts := range p {
		if len(alts) == 1 {
			parts[i] = alts[0]
		} else {
			parts[i] = "[" + strings.Join(alts, ", ") + "]"
		}
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// matches reports whether argv starts with the rule's token prefix. The
// first token also matches a command given by path (/usr/bin/git is git).
func (r *rule) matches(argv []string) bool {
	if len(argv) < len(r.src.Pattern) {
		return false
	}
	for i, alts := range r.src.Pattern {
		tok := argv[i]
		ok := false
		for _, a := range alts {
			if a == tok || i == 0 && a == commandName(tok) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

func (r *rule) matchesLayer(c *cmd) bool {
	return r.matches(c.values()) || c.canon != nil && r.matches(c.canon)
}

// ruleMatchesExample reports whether the rule matches any layer of any
// simple command of an example command line.
func (c *Classifier) ruleMatchesExample(r rule, example string) bool {
	w := newWalker(c)
	found := false
	w.onLayer = func(l *cmd) {
		if !found && r.matchesLayer(l) {
			found = true
		}
	}
	w.script(example)
	return found
}

// applyRules applies the strictest matching rule to each layer: deny
// blocks, confirm makes it at least dangerous, allow lowers the layer's own
// moderate judgements to safe (never a dangerous or blocked one).
func (w *walker) applyRules(layers []*cmd) {
	if len(w.c.rules) == 0 {
		return
	}
	for _, c := range layers {
		var best *rule
		for i := range w.c.rules {
			r := &w.c.rules[i]
			if (best == nil || strictness(r.src.Decision) > strictness(best.src.Decision)) && r.matchesLayer(c) {
				best = r
			}
		}
		if best == nil {
			continue
		}
		switch best.src.Decision {
		case portcullis.ShellDeny:
			c.findings = append(c.findings, finding{cat: Blocked, score: scoreBlocked, reason: best.reason})
		case portcullis.ShellConfirm:
			c.findings = append(c.findings, finding{cat: Dangerous, score: scoreDangerous, reason: best.reason})
		case portcullis.ShellAllow:
			for i := range c.findings {
				if f := &c.findings[i]; f.lowerable && f.cat == Moderate {
					f.cat, f.score, f.reason = Safe, scoreSafe, ""
				}
			}
			c.findings = append(c.findings, finding{cat: Safe, score: scoreSafe, reason: best.reason})
		}
	}
}
