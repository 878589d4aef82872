package autonomy

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/portcullis/portcullis"
)

// Tier is the safety tier of an agent's next action (the tiered
// safety system): how much human involvement it needs before it runs.
type Tier string

// The tiers, from the least to the most human involvement.
const (
	// TierAdvisory: a risk score below 31. The run continues unless the
	// score is above the agent's risk tolerance.
	TierAdvisory Tier = "advisory"
	// TierConfirm: a risk score from 31 up to 61. The run pauses for a
	// person unless the agent's risk tolerance is aggressive.
	TierConfirm Tier = "confirm"
	// TierVerify: a risk score from 61 up to 86. The run pauses and a person
	// must answer a challenge.
	TierVerify Tier = "verify"
	// TierDangerZone: a risk score of 86 or more, a danger pattern in the
	// action, or a shell command classified blocked. The agent is stopped
	// and blocked until a person clears the block.
	TierDangerZone Tier = "danger_zone"
)

// The lowest risk score of each tier above advisory (the reference's
// DEFAULT_SAFETY_CONFIG thresholds).
const (
	confirmFrom = 31
	verifyFrom  = 61
	dangerFrom  = 86
)

// TierFor returns the safety tier of an action with the given risk score.
// An action that matches a danger pattern, or that the shell classifier
// classified blocked, is in the danger zone whatever its score; otherwise
// the (sanitized) score decides: below 31 advisory, below 61 confirm, below
// 86 verify, else danger zone.
//
// The danger patterns are those of the reference, matched anywhere in the
// action and ignoring case: `rm -rf` (also -fr, -r -f, -R, --recursive
// --force, in any order, within the next 16 words of the same command),
// `DROP TABLE`, `DELETE FROM … WHERE 1=1`, `eval(`, `exec(`,
// `child_process` and `process.exit`, with any whitespace where the
// reference allows it. Like the reference, they are looked for in text, not
// parsed: `firm -rf` is caught too, and a command hidden by quoting is the
// shell classifier's to find.
func TierFor(score float64, action string, blocked bool) Tier {
	if blocked || dangerPattern(action) >= 0 {
		return TierDangerZone
	}
	return scoreTier(SanitizeRiskScore(score))
}

// scoreTier is the tier of a sanitized score alone.
func scoreTier(score float64) Tier {
	switch {
	case score >= dangerFrom:
		return TierDangerZone
	case score >= verifyFrom:
		return TierVerify
	case score >= confirmFrom:
		return TierConfirm
	}
	return TierAdvisory
}

// Score is the risk score the gate gives a call from its classification:
// DELETE 80, EXECUTE 60, UPDATE 40, CREATE 20, READ 0, and 10 more when an
// element's allow may not elevate it. An unclassified (empty) or unknown
// endpoint scores as EXECUTE: not knowing what a call does is not a reason
// to trust it. The score never exceeds 100.
func Score(e portcullis.Endpoint, elevatable bool) float64 {
	var s float64
	switch e {
	case portcullis.Read:
		s = 0
	case portcullis.Create:
		s = 20
	case portcullis.Update:
		s = 40
	case portcullis.Delete:
		s = 80
	default: // portcullis.Execute, unclassified, unknown
		s = 60
	}
	if !elevatable {
		s += 10
	}
	return min(s, 100)
}

// The danger patterns, in the reference's order; dangerPattern returns an
// index into this list.
var dangerNames = [...]string{
	"rm -rf",
	"DROP TABLE",
	"DELETE FROM … WHERE 1=1",
	"eval(",
	"exec(",
	"child_process",
	"process.exit",
}

// rmMaxWords is how many words after `rm` are searched for its flags.
const rmMaxWords = 16

// dangerStart and dangerSecond mark the bytes a danger pattern can start
// with, and those that can follow the first (rm, dr, de, ev, ex, ch, pr).
var (
	dangerStart = [256]bool{
		'r': true, 'R': true, 'd': true, 'D': true, 'e': true, 'E': true,
		'c': true, 'C': true, 'p': true, 'P': true,
	}
	dangerSecond = [256]bool{
		'm': true, 'M': true, 'r': true, 'R': true, 'e': true, 'E': true,
		'v': true, 'V': true, 'x': true, 'X': true, 'h': true, 'H': true,
	}
)

// dangerPattern returns the index in dangerNames of the first danger
// pattern (in that list's order) that s contains, or -1. It reads s once,
// plus at most one scan for the WHERE of a DELETE FROM and at most
// rmMaxWords words after each `rm`.
func dangerPattern(s string) int {
	found := -1
	deleteSeen := false
	for i := 0; i+1 < len(s); i++ {
		if !dangerStart[s[i]] || !dangerSecond[s[i+1]] {
			continue
		}
		k := -1
		// c|0x20 lower-cases an ASCII letter, and makes no other byte one.
		switch uint16(s[i]|0x20)<<8 | uint16(s[i+1]|0x20) {
		case 'r'<<8 | 'm':
			if rmRecursiveForce(s, i+2) {
				return 0 // the first pattern: nothing can come before it
			}
		case 'd'<<8 | 'r':
			if _, ok := words(s, i, "drop", "table"); ok {
				k = 1
			}
		case 'd'<<8 | 'e':
			if deleteSeen {
				break
			}
			if j, ok := words(s, i, "delete", "from"); ok {
				// Only the first DELETE FROM needs its WHERE searched: any
				// later one is followed by less text.
				deleteSeen = true
				if whereOneEqualsOne(s, j) {
					k = 2
				}
			}
		case 'e'<<8 | 'v':
			if hasFoldAt(s, i, "eval") && hasFoldAt(s, skipSpace(s, i+4), "(") {
				k = 3
			}
		case 'e'<<8 | 'x':
			if hasFoldAt(s, i, "exec") && hasFoldAt(s, skipSpace(s, i+4), "(") {
				k = 4
			}
		case 'c'<<8 | 'h':
			if hasFoldAt(s, i, "child_process") {
				k = 5
			}
		case 'p'<<8 | 'r':
			if hasFoldAt(s, i, "process.exit") {
				k = 6
			}
		}
		if k >= 0 && (found < 0 || k < found) {
			found = k
		}
	}
	return found
}

// hasFoldAt reports whether s holds word (lower-case ASCII) at i, ignoring
// ASCII case.
func hasFoldAt(s string, i int, word string) bool {
	if i < 0 || len(s)-i < len(word) {
		return false
	}
	for k := 0; k < len(word); k++ {
		if lowerASCII(s[i+k]) != word[k] {
			return false
		}
	}
	return true
}

// isSpace is the reference's \s: Unicode white space and the byte order mark.
func isSpace(r rune) bool { return unicode.IsSpace(r) || r == '\uFEFF' }

// skipSpace returns the index of the first character at or after i that is
// not white space.
func skipSpace(s string, i int) int {
	for i < len(s) {
		if c := s[i]; c < utf8.RuneSelf {
			if c != ' ' && (c < '\t' || c > '\r') {
				return i
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if !isSpace(r) {
			return i
		}
		i += n
	}
	return i
}

// words reports whether s holds, at i, the word first, white space, and the
// word second, and returns the index after second.
func words(s string, i int, first, second string) (int, bool) {
	if !hasFoldAt(s, i, first) {
		return 0, false
	}
	j := skipSpace(s, i+len(first))
	if j == i+len(first) || !hasFoldAt(s, j, second) {
		return 0, false
	}
	return j + len(second), true
}

// whereOneEqualsOne reports whether s holds, at or after i, `WHERE 1=1`
// (with white space as the reference allows it: after WHERE, and around =).
func whereOneEqualsOne(s string, i int) bool {
	for ; i < len(s); i++ {
		if lowerASCII(s[i]) != 'w' {
			continue
		}
		j, ok := words(s, i, "where", "1")
		if !ok {
			continue
		}
		j = skipSpace(s, j)
		if !hasFoldAt(s, j, "=") {
			continue
		}
		if hasFoldAt(s, skipSpace(s, j+1), "1") {
			return true
		}
	}
	return false
}

// rmRecursiveForce reports whether the `rm` that ends at i is followed by
// white space and then, within rmMaxWords words of the same command, by
// flags asking for both recursion and force: short flags in any grouping
// (-rf, -fr, -r -f, -Rf, -rfv; case is ignored, as the reference ignores
// it) or the long --recursive and --force (or unambiguous prefixes of them).
// The first word may come after a newline, as in the reference's pattern;
// later words end at a newline or at ; & | ( ) ` < >.
func rmRecursiveForce(s string, i int) bool {
	j := skipSpace(s, i)
	if j == i {
		return false
	}
	recursive, force := false, false
	for w := 0; w < rmMaxWords && j < len(s); w++ {
		start := j
		for j < len(s) {
			if c := s[j]; c < utf8.RuneSelf {
				if endsWord(c) {
					break
				}
				j++
				continue
			}
			r, n := utf8.DecodeRuneInString(s[j:])
			if isSpace(r) {
				break
			}
			j += n
		}
		word := trimQuotes(s[start:j])
		switch {
		case len(word) > 2 && word[0] == '-' && word[1] == '-':
			long := word[2:]
			if k := strings.IndexByte(long, '='); k >= 0 {
				long = long[:k]
			}
			recursive = recursive || isFoldPrefix(long, "recursive")
			force = force || isFoldPrefix(long, "force")
		case len(word) > 1 && word[0] == '-':
			for k := 1; k < len(word); k++ {
				switch lowerASCII(word[k]) {
				case 'r':
					recursive = true
				case 'f':
					force = true
				}
			}
		}
		if recursive && force {
			return true
		}
		// Move to the next word of the same command.
		for j < len(s) {
			c := s[j]
			if c == '\n' || isSeparator(c) {
				return false
			}
			if c < utf8.RuneSelf {
				if c != ' ' && (c < '\t' || c > '\r') {
					break
				}
				j++
				continue
			}
			r, n := utf8.DecodeRuneInString(s[j:])
			if !isSpace(r) {
				break
			}
			j += n
		}
	}
	return false
}

// endsWord reports whether the byte c ends a word after rm: ASCII white
// space or a shell separator. (Non-ASCII white space is checked by the caller.)
func endsWord(c byte) bool {
	return c == ' ' || ('\t' <= c && c <= '\r') || isSeparator(c)
}

func isSeparator(c byte) bool {
	switch c {
	case ';', '&', '|', '(', ')', '`', '<', '>':
		return true
	}
	return false
}

func trimQuotes(w string) string {
	for len(w) > 0 && (w[0] == '\'' || w[0] == '"') {
		w = w[1:]
	}
	for len(w) > 0 && (w[len(w)-1] == '\'' || w[len(w)-1] == '"') {
		w = w[:len(w)-1]
	}
	return w
}

// isFoldPrefix reports whether p is a non-empty prefix of the lower-case
// ASCII word, ignoring ASCII case.
func isFoldPrefix(p, word string) bool {
	return p != "" && len(p) <= len(word) && hasFoldAt(p, 0, word[:len(p)])
}
