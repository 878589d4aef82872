package policy

import (
	"strings"
	"unicode/utf8"
)

// isGlob reports whether a pattern of an element list is a glob (holds * or
// ?) rather than an exact operation name.
func isGlob(pattern string) bool { return strings.ContainsAny(pattern, "*?") }

// The lint matches patterns the way the gate does (docs/ARCHITECTURE.md,
// "Element resolution"), which compiles its own matchers: anchored, * any
// run of characters (also none), ? exactly one character, every other
// character itself, no escaping, no classes. This package only needs it to
// tell whether a pattern matches any tool.

// match reports whether name matches pattern, case-sensitively, within a
// budget of steps (-1: unlimited). It returns how
// many steps it took; when the budget runs out first it returns false and
// the budget plus one. Matching takes at most about len(pattern) ×
// len(name) steps, and usually about len(name).
func match(pattern, name string, budget int) (bool, int) {
	p, n, steps := 0, 0, 0
	starP, starN := -1, 0 // where the last * was, and where its run ends
	for n < len(name) {
		steps++
		if budget >= 0 && steps > budget {
			return false, steps
		}
		if p < len(pattern) {
			switch c := pattern[p]; {
			case c == '*':
				starP, starN = p, n
				p++
				continue
			case c == '?':
				_, size := utf8.DecodeRuneInString(name[n:])
				p++
				n += size
				continue
			case c == name[n]:
				p++
				n++
				continue
			}
		}
		if starP < 0 {
			return false, steps
		}
		// Let the last * take one more character and try again.
		_, size := utf8.DecodeRuneInString(name[starN:])
		starN += size
		p, n = starP+1, starN
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern), steps
}
