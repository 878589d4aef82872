package autonomy

// DangerPattern names the first danger pattern the text contains, in the
// reference's order, or returns "".
func DangerPattern(s string) string {
	if i := dangerPattern(s); i >= 0 {
		return dangerNames[i]
	}
	return ""
}
