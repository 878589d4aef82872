package policy

import (
	"fmt"
	"strings"
)

// suggest returns a hint for an unknown key: the known key it probably
// meant, as ` (did you mean "x"?)`, a special explanation, or "".
func suggest(key string, known []string) string {
	norm := normalizeKey(key)
	switch norm {
	case "apikey":
		return ": the API key never lives in the policy file; put the name of the environment variable that holds it in apiKeyEnv"
	case "<<":
		return ": YAML merge keys are not supported; repeat the keys, or alias the whole value"
	}
	if len(key) > 64 {
		return ""
	}
	best, bestDist := "", -1
	for _, k := range known {
		if normalizeKey(k) == norm {
			return fmt.Sprintf(" (did you mean %q?)", k)
		}
		d := editDistance(strings.ToLower(key), strings.ToLower(k))
		if bestDist < 0 || d < bestDist {
			best, bestDist = k, d
		}
	}
	if best != "" && (bestDist <= 2 || bestDist <= len(best)/3) && bestDist < len(best) {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	return ""
}

// normalizeKey lowercases a key and drops separators, so that can_be_elevated,
// CanBeElevated and can-be-elevated all meet canBeElevated.
func normalizeKey(s string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case '_', '-', ' ', '.':
			return -1
		}
		return r
	}, strings.ToLower(s))
}

// editDistance is the Levenshtein distance between a and b, in runes.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
