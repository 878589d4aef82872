package loadgen_test

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/portcullis/portcullis/loadgen"
)

func TestParseMix(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want map[loadgen.Kind]int
		err  string
	}{
		{"read=60,write=15,deny=15,shell=10", map[loadgen.Kind]int{loadgen.Read: 60, loadgen.Write: 15, loadgen.Deny: 15, loadgen.Shell: 10}, ""},
		{" read=1 ,, shell=0 ", map[loadgen.Kind]int{loadgen.Read: 1, loadgen.Shell: 0}, ""},
		{"", map[loadgen.Kind]int{}, ""},
		{"read=x", nil, `"read=x": want kind=weight`},
		{"read=-1", nil, `"read=-1": want kind=weight`},
		{"read", nil, `"read": want kind=weight`},
		{"fly=3", nil, `unknown kind "fly"`},
	} {
		got, err := loadgen.ParseMix(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseMix(%q) = %v, %v; want an error saying %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseMix(%q) = %v", tc.in, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("ParseMix(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
}

func TestProcessRSS(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		if rss, ok := loadgen.ProcessRSS(os.Getpid()); ok {
			t.Fatalf("ProcessRSS without /proc = %d, true; want false", rss)
		}
		return
	}
	if rss, ok := loadgen.ProcessRSS(os.Getpid()); !ok || rss < 1<<20 {
		t.Errorf("ProcessRSS(this process) = %d, %v; want at least a MiB", rss, ok)
	}
	if _, ok := loadgen.ProcessRSS(-1); ok {
		t.Error("ProcessRSS(-1) = ok; want false")
	}
}
