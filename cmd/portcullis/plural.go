package main

import "fmt"

// plural writes a count with its noun: "1 upstream", "2 upstreams",
// "0 upstreams". The noun is regular (its plural adds an s); every count
// the commands print goes through it.
func plural[N int | int64](n N, noun string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
