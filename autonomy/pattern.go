package autonomy

import (
	"bytes"
	"encoding/binary"
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
// There is no escaping and there are no character classes. Matching takes
// time linear in len(s), whatever the pattern: each run of characters
// between two stars is matched at its leftmost place and never retried, and
// when the direct search for one does too much work it finishes with a
// bit-parallel search (Shift-And) that reads each character of s once.
// Unlike the reference, a long s is still matched (it never falls through
// to "no match"), and `*` also matches newlines.
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
	i, j := 0, 0
	for j < len(seg) {
		if i == len(s) {
			return 0, false
		}
		// Two ASCII characters fold only to each other.
		if pc, sc := seg[j], s[i]; pc < utf8.RuneSelf && sc < utf8.RuneSelf {
			if pc != '?' && pc != sc && lowerASCII(pc) != lowerASCII(sc) {
				return 0, false
			}
			i++
			j++
			continue
		}
		pc, pn := next(seg[j:])
		sc, sn := next(s[i:])
		if pc != '?' && !foldEqual(pc, sc) {
			return 0, false
		}
		j += pn
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
// returns where it ends. It tries each place in turn; when that has cost
// more than a few steps per byte of s, it hands the rest of s to findShiftAnd.
func find(seg, s string) (int, bool) {
	return findDirect(seg, s, 4*len(s)+256)
}

// findDirect is find with a budget of steps.
func findDirect(seg, s string, budget int) (int, bool) {
	if plainASCII(seg) {
		// Only the two ASCII cases of the first character can start a
		// match, and an ASCII byte always starts a character: jump from one
		// to the next with strings.IndexByte.
		lo := lowerASCII(seg[0])
		up := lo - ('a' - 'A') // its upper case, when it is a letter
		nextLo, nextUp := indexFrom(s, lo, 0), -1
		if 'a' <= lo && lo <= 'z' {
			nextUp = indexFrom(s, up, 0)
		}
		for {
			i := nextLo
			if nextUp >= 0 && (i < 0 || nextUp < i) {
				i = nextUp
			}
			if i < 0 || i+len(seg) > len(s) {
				return 0, false
			}
			if i == nextLo {
				nextLo = indexFrom(s, lo, i+1)
			} else {
				nextUp = indexFrom(s, up, i+1)
			}
			if budget -= len(seg); budget < 0 {
				return findShiftAnd(seg, s, i)
			}
			k := 1
			for k < len(seg) && lowerASCII(s[i+k]) == lowerASCII(seg[k]) {
				k++
			}
			if k == len(seg) {
				return i + k, true
			}
		}
	}
	for i := 0; i < len(s); {
		if budget -= len(seg); budget < 0 {
			return findShiftAnd(seg, s, i)
		}
		if n, ok := matchPrefix(seg, s[i:]); ok {
			return i + n, true
		}
		_, n := next(s[i:])
		i += n
	}
	return 0, false
}

// indexFrom returns the index of the first c in s at or after i, or -1.
func indexFrom(s string, c byte, i int) int {
	if k := strings.IndexByte(s[i:], c); k >= 0 {
		return i + k
	}
	return -1
}

// plainASCII reports whether every character of seg is ASCII, none is `?`,
// and none folds to a character outside ASCII. Only ASCII text can match
// such a segment, byte for byte.
func plainASCII(seg string) bool {
	for i := 0; i < len(seg); i++ {
		if c := seg[i]; c >= utf8.RuneSelf || c == '?' || foldsOutsideASCII(c) {
			return false
		}
	}
	return true
}

// findShiftAnd is find by the Shift-And algorithm, from s[from:] on: bit j
// of the state is set when the first j+1 characters of seg match the text
// that ends at the current character. It reads each character of s once and
// updates at most 8 words (seg has at most 500 characters) per character.
func findShiftAnd(seg, s string, from int) (int, bool) {
	var (
		chars  [maxPatternChars]rune
		ascii  [utf8.RuneSelf][8]uint64 // masks of the folded ASCII characters
		wild   [8]uint64                // the positions of ?
		others map[rune]*[8]uint64      // masks of the other folded characters
		state  [8]uint64
	)
	m := 0
	for rest := seg; rest != ""; m++ {
		r, n := next(rest)
		chars[m] = r
		rest = rest[n:]
	}
	for j, c := range chars[:m] {
		w, bit := j/64, uint64(1)<<(j%64)
		switch c = canonical(c); {
		case c == '?':
			wild[w] |= bit
		case c < utf8.RuneSelf:
			ascii[c][w] |= bit
		default:
			if others == nil {
				others = make(map[rune]*[8]uint64)
			}
			if others[c] == nil {
				others[c] = new([8]uint64)
			}
			others[c][w] |= bit
		}
	}
	words, lastWord, lastBit := (m+63)/64, (m-1)/64, uint64(1)<<((m-1)%64)
	for i := from; i < len(s); {
		r, n := next(s[i:])
		i += n
		c := canonical(r)
		var masks *[8]uint64
		if c < utf8.RuneSelf {
			masks = &ascii[c]
		} else {
			masks = others[c]
		}
		carry := uint64(1)
		for w := range words {
			mask := wild[w]
			if masks != nil {
				mask |= masks[w]
			}
			out := state[w] >> 63
			state[w] = (state[w]<<1 | carry) & mask
			carry = out
		}
		if state[lastWord]&lastBit != 0 {
			return i, true
		}
	}
	return 0, false
}

// canonical is one character of each class of characters that are equal
// under simple case folding: lower-case ASCII when the class has an ASCII
// member, else the class's least member.
func canonical(r rune) rune {
	if r < utf8.RuneSelf {
		return rune(lowerASCII(byte(r)))
	}
	if r > unicode.MaxRune {
		return r
	}
	least := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		least = min(least, f)
	}
	if least < utf8.RuneSelf {
		return rune(lowerASCII(byte(least)))
	}
	return least
}

// foldsOutsideASCII reports whether an ASCII character has a case-folded
// form outside ASCII: k and K fold to the Kelvin sign, s and S to the long s.
func foldsOutsideASCII(c byte) bool {
	switch c {
	case 'k', 'K', 's', 'S':
		return true
	}
	return false
}

// The evaluator matches every pattern of an envelope against the same
// action hint, which is usually short and ASCII. It lower-cases the hint
// once (lowerHint), and then matchHint matches each ASCII pattern against
// the lower-cased bytes with bytes.Index, which is much faster than
// MatchPattern's character-by-character search and gives the same answers:
// in ASCII text, an ASCII character folds only to its other ASCII case, and
// `?` is one byte.

// maxLowerHint is the longest hint lowerHint lower-cases.
const maxLowerHint = 256

// lowerHint returns s lower-cased into buf when s is ASCII and fits in it;
// otherwise nil. It works on eight bytes at a time.
func lowerHint(buf []byte, s string) []byte {
	if len(s) > cap(buf) {
		return nil
	}
	buf = buf[:len(s)]
	i := 0
	for ; i+8 <= len(s); i += 8 {
		w := s[i : i+8]
		x := uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
			uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
		if x&highBits != 0 {
			return nil
		}
		// Each byte gets 0x80 added when it is 'A' or more, and loses it
		// again when it is more than 'Z'; the bytes left with 0x80 are the
		// upper-case letters, which gain 0x20.
		upper := (x + 0x80*lowBits - 'A'*lowBits) &^ (x + 0x80*lowBits - ('Z'+1)*lowBits) & highBits
		binary.LittleEndian.PutUint64(buf[i:], x|upper>>2)
	}
	for ; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			return nil
		}
		buf[i] = lowerASCII(c)
	}
	return buf
}

const (
	lowBits  = 0x0101010101010101
	highBits = 0x8080808080808080
)

// matchHint is MatchPattern(pattern, s), faster when low is lowerHint of s.
func matchHint(pattern, s string, low []byte) bool {
	if low != nil {
		if match, ok := matchLower(pattern, low); ok {
			return match
		}
	}
	return MatchPattern(pattern, s)
}

// matchLower matches an ASCII pattern against lower-cased ASCII text, in
// one pass over the pattern. ok is false when it cannot tell: the pattern
// has a character outside ASCII, or a segment between stars holds `?` or is
// longer than 64 bytes. An answer given before such a character is seen is
// right whatever follows it: the parts of the pattern already read are
// ASCII, and in ASCII text an ASCII character folds only to its other case.
func matchLower(pattern string, low []byte) (match, ok bool) {
	if len(pattern) > maxPatternChars {
		return false, false // MatchPattern counts characters
	}
	n, i := len(low), 0
	// The head, before the first star, is anchored at the start.
	for ; i < len(pattern) && pattern[i] != '*'; i++ {
		c := pattern[i]
		if c >= utf8.RuneSelf {
			return false, false
		}
		if i == n || (c != '?' && lowerASCII(c) != low[i]) {
			return false, true
		}
	}
	if i == len(pattern) {
		return i == n, true
	}
	pos := i // the text the head took
	var needle [64]byte
	k, wild := 0, false
	for i++; i < len(pattern); i++ {
		c := pattern[i]
		if c >= utf8.RuneSelf {
			return false, false
		}
		if c != '*' {
			if k == len(needle) {
				return false, false
			}
			needle[k] = lowerASCII(c)
			k++
			wild = wild || c == '?'
			continue
		}
		if k == 0 {
			continue
		}
		// A segment between stars: its leftmost place is always right.
		if wild {
			return false, false
		}
		j := bytes.Index(low[pos:], needle[:k])
		if j < 0 {
			return false, true
		}
		pos += j + k
		k = 0
	}
	// The tail, after the last star, is anchored at the end.
	if n-k < pos {
		return false, true
	}
	tail := low[n-k:]
	for j, c := range needle[:k] {
		if c != '?' && c != tail[j] {
			return false, true
		}
	}
	return true, true
}
