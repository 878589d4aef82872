// Package english holds the one rule of English grammar the commands'
// reports need: a count agrees with its noun.
package english

import "strconv"

// Count is n with its noun: "1 row", "0 rows", "2 rows". The noun must be
// regular (its plural adds an s); every count a report prints goes
// through it, so that none says "1 upstreams".
func Count[N ~int | ~int64](n N, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.FormatInt(int64(n), 10) + " " + noun + "s"
}
