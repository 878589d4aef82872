package gate

import (
	"strings"
	"unicode/utf8"
)

// glob is a compiled pattern: `*` matches any run of characters, `?` exactly
// one character, everything else itself. Matching is anchored at both ends
// and takes time linear in len(pattern)+len(name) for the common shapes.
type glob struct {
	pattern string
	// For patterns with a single `*` and no `?` (the common `delete_*`,
	// `*_file` shapes): prefix and suffix.
	simple         bool
	prefix, suffix string
}

func isGlob(p string) bool { return strings.ContainsAny(p, "*?") }

func compileGlob(p string) glob {
	g := glob{pattern: p}
	if strings.Count(p, "*") == 1 && !strings.Contains(p, "?") {
		i := strings.IndexByte(p, '*')
		g.simple, g.prefix, g.suffix = true, p[:i], p[i+1:]
	}
	return g
}

func (g *glob) match(name string) bool {
	if g.simple {
		return len(name) >= len(g.prefix)+len(g.suffix) &&
			strings.HasPrefix(name, g.prefix) && strings.HasSuffix(name, g.suffix)
	}
	return wildcardMatch(g.pattern, name)
}

// wildcardMatch is the classic iterative matcher with a single backtrack
// point: on a mismatch it retries from the last `*`, consuming one more
// character of the name. `?` consumes one UTF-8 character.
func wildcardMatch(p, s string) bool {
	pi, si := 0, 0
	starP, starS := -1, 0
	for si < len(s) {
		if pi < len(p) {
			switch c := p[pi]; c {
			case '*':
				starP, starS = pi, si
				pi++
				continue
			case '?':
				_, n := utf8.DecodeRuneInString(s[si:])
				pi++
				si += n
				continue
			default:
				if c == s[si] {
					pi++
					si++
					continue
				}
			}
		}
		if starP < 0 {
			return false
		}
		// Backtrack: let the last star absorb one more character.
		_, n := utf8.DecodeRuneInString(s[starS:])
		starS += n
		pi, si = starP+1, starS
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}
