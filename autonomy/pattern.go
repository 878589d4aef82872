package autonomy

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxPatternChars is the longest pattern MatchPattern will try, in
// characters. Longer patterns never match (the reference's limit against
// expensive patterns).
const maxPatternChars = 500

// MatchPattern reports whether s matches the glob pattern, as the
// requiresApproval and autoApprove lists of an autonomy envelope use it:
//
//   - `*` matches any run of characters, also none and also across lines;
//   - `?` matches exactly one character (one UTF-8 encoded rune, or one byte
//     that is not valid UTF-8);
//   - every other character matches itself, ignoring case (Unicode simple
//     case folding, as strings.EqualFold);
//   - the match is anchored at both ends: `read*` matches "read file" but not
//     "bread";
//   - a pattern longer than 500 characters never matches.
//
// There is no escaping and there are no character classes. Matching never
// backtracks more than one segment: each run of literal characters between
// two stars is matched at its leftmost place and never retried, so the time
// is at most proportional to len(s) × the longest such run (at most 500), and
// usually to len(s). Unlike the reference, a long s is still matched (it
// never falls through to "no match"), and `*` also matches newlines.
func MatchPattern(pattern, s string) bool {
	if len(pattern) > maxPatternChars && utf8.RuneCountInString(pattern) > maxPatternChars {
		return false
	}
	first := strings.IndexByte(pattern, '*')
	if first < 0 {
		n, ok := matchPrefix(pattern, s)
		return ok && n == len(s)
	}
	last := strings.LastIndexByte(pattern, '*')

	// The parts before the first star and after the last one are anchored;
	// each takes a fixed number of characters, so there is one way to match them.
	lo, ok := matchPrefix(pattern[:first], s)
	if !ok {
		return false
	}
	rest := s[lo:]
	hi, ok := matchSuffix(pattern[last+1:], rest)
	if !ok {
		return false
	}
	rest = rest[:hi]

	// Each segment between stars is matched at its leftmost place: that
	// leaves the most text for the segments after it, so it is never wrong.
	var mid string
	if first < last {
		mid = pattern[first+1 : last]
	}
	for mid != "" {
		seg := mid
		if i := strings.IndexByte(mid, '*'); i >= 0 {
			seg, mid = mid[:i], mid[i+1:]
		} else {
			mid = ""
		}
		if seg == "" {
			continue
		}
		end, ok := find(seg, rest)
		if !ok {
			return false
		}
		rest = rest[end:]
	}
	return true
}

// invalidBase offsets a byte that is not valid UTF-8 past the last rune, so
// that such a byte equals only itself.
const invalidBase = unicode.MaxRune + 1

// next decodes the first character of a non-empty s.
func next(s string) (rune, int) {
	if c := s[0]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	r, n := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError && n == 1 {
		return invalidBase + rune(s[0]), 1
	}
	return r, n
}

// prev decodes the last character of a non-empty s.
func prev(s string) (rune, int) {
	if c := s[len(s)-1]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	r, n := utf8.DecodeLastRuneInString(s)
	if r == utf8.RuneError && n == 1 {
		return invalidBase + rune(s[len(s)-1]), 1
	}
	return r, n
}

// foldEqual reports whether two characters are equal under simple case
// folding.
func foldEqual(a, b rune) bool {
	if a == b {
		return true
	}
	if a < utf8.RuneSelf && b < utf8.RuneSelf {
		return lowerASCII(byte(a)) == lowerASCII(byte(b))
	}
	if a > unicode.MaxRune || b > unicode.MaxRune {
		return false
	}
	for r := unicode.SimpleFold(a); r != a; r = unicode.SimpleFold(r) {
		if r == b {
			return true
		}
	}
	return false
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// matchPrefix matches a star-free segment against the start of s and
// returns how many bytes of s it took.
func matchPrefix(seg, s string) (int, bool) {
	i := 0
	for seg != "" {
		if i == len(s) {
			return 0, false
		}
		pc, pn := next(seg)
		sc, sn := next(s[i:])
		if pc != '?' && !foldEqual(pc, sc) {
			return 0, false
		}
		seg = seg[pn:]
		i += sn
	}
	return i, true
}

// matchSuffix matches a star-free segment against the end of s and returns
// where in s the match starts.
func matchSuffix(seg, s string) (int, bool) {
	i := len(s)
	for seg != "" {
		if i == 0 {
			return 0, false
		}
		pc, pn := prev(seg)
		sc, sn := prev(s[:i])
		if pc != '?' && !foldEqual(pc, sc) {
			return 0, false
		}
		seg = seg[:len(seg)-pn]
		i -= sn
	}
	return i, true
}

// find finds the leftmost match of a non-empty, star-free segment in s and
// returns where it ends.
func find(seg, s string) (int, bool) {
	for i := 0; i < len(s); {
		if n, ok := matchPrefix(seg, s[i:]); ok {
			return i + n, true
		}
		_, n := next(s[i:])
		i += n
	}
	return 0, false
}
