package loadgen_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/portcullis/portcullis/loadgen"
)

func TestParseVia(t *testing.T) {
	for in, want := range map[string][]loadgen.Via{
		"api":  {loadgen.API},
		"mcp":  {loadgen.MCP},
		"both": {loadgen.API, loadgen.MCP},
	} {
		if got, err := loadgen.ParseVia(in); err != nil || !slices.Equal(got, want) {
			t.Errorf("ParseVia(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if got, err := loadgen.ParseVia("smoke"); err == nil || err.Error() != `"smoke": want api, mcp or both` {
		t.Errorf("ParseVia(smoke) = %v, %v; want an error naming the choices", got, err)
	}
}

func TestSnapshotWriteProgress(t *testing.T) {
	s := loadgen.Snapshot{Elapsed: 2500 * time.Millisecond, Calls: 120, Failed: 1, IntervalRate: 48.4,
		IntervalP50: 1250 * time.Microsecond, IntervalP99: 7 * time.Millisecond}
	var b strings.Builder
	s.WriteProgress(&b)
	if want := "bench:    2.5s  120 calls (1 unanswered)  48/s  p50 1.25ms  p99 7.00ms\n"; b.String() != want {
		t.Errorf("WriteProgress = %q; want %q", b.String(), want)
	}
	b.Reset()
	s.RSSBytes = 3 << 20
	s.WriteProgress(&b)
	if !strings.HasSuffix(b.String(), "p99 7.00ms, gateway RSS 3.0 MB\n") {
		t.Errorf("WriteProgress with RSS = %q; want the gateway's RSS at the end", b.String())
	}
}

func TestReportWriteJSON(t *testing.T) {
	rep := &loadgen.Report{Throughput: 12.5}
	var b strings.Builder
	if err := rep.Write(&b, true); err != nil {
		t.Fatal(err)
	}
	var back loadgen.Report
	if err := json.Unmarshal([]byte(b.String()), &back); err != nil || back.Throughput != 12.5 || !strings.Contains(b.String(), "\n  ") {
		t.Errorf("Write(json) = %q, %v; want the report as indented JSON", b.String(), err)
	}
}
