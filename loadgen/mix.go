package loadgen

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ParseMix reads a mix of kinds and their weights as a person writes
// it: "read=60,write=15,deny=15,shell=10". Empty parts are skipped.
func ParseMix(s string) (map[Kind]int, error) {
	out := map[Kind]int{}
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		n, err := strconv.Atoi(v)
		if !ok || err != nil || n < 0 {
			return nil, fmt.Errorf("%q: want kind=weight, e.g. read=60", part)
		}
		kind := Kind(k)
		known := false
		for _, kk := range Kinds {
			known = known || kk == kind
		}
		if !known {
			return nil, fmt.Errorf("unknown kind %q (want read, write, deny or shell)", k)
		}
		out[kind] = n
	}
	return out, nil
}

// ProcessRSS reads a process's resident memory from /proc, for
// Config.Sample; ok is false where there is no /proc (not Linux) or no
// such process.
func ProcessRSS(pid int) (rss int64, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}
