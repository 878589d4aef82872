package autonomy

// DangerPattern names the first danger pattern the text contains, in the
// reference's order, or returns "".
func DangerPattern(s string) string {
	if i := dangerPattern(s); i >= 0 {
		return dangerNames[i]
	}
	return ""
}

// FindDirect and FindShiftAnd are the two searches for a segment between
// stars; the fuzzer checks that they agree.
func FindDirect(seg, s string) (int, bool)   { return findDirect(seg, s, 1<<62) }
func FindShiftAnd(seg, s string) (int, bool) { return findShiftAnd(seg, s, 0) }

// MatchHint is the evaluator's way of matching a pattern against the hint.
func MatchHint(pattern, s string) bool {
	var buf [maxLowerHint]byte
	return matchHint(pattern, s, lowerHint(buf[:0], s))
}

// EvaluateWithHook is Evaluate with a function called as each check
// begins ("sanitize", "steps", "outcome", "patterns", "tier", "threshold").
func EvaluateWithHook(in Input, hook func(check string)) Directive { return evaluate(in, hook) }

// LowerHint is the evaluator's lower-casing of an ASCII hint ("", false
// when it declines).
func LowerHint(s string) (string, bool) {
	var buf [maxLowerHint]byte
	low := lowerHint(buf[:0], s)
	return string(low), low != nil
}
