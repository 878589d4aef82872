package loadgen

import (
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// DefaultURL is the gateway `portcullis bench` drives when none is named.
const DefaultURL = "http://127.0.0.1:8470"

// ParseVia reads the entry points as a person names them: api, mcp or
// both.
func ParseVia(s string) ([]Via, error) {
	switch s {
	case "api":
		return []Via{API}, nil
	case "mcp":
		return []Via{MCP}, nil
	case "both":
		return []Via{API, MCP}, nil
	}
	return nil, fmt.Errorf("%q: want api, mcp or both", s)
}

// WriteProgress writes s as one line of `portcullis bench`'s progress.
func (s Snapshot) WriteProgress(w io.Writer) {
	mem := ""
	if s.RSSBytes > 0 {
		mem = fmt.Sprintf(", gateway RSS %.1f MB", float64(s.RSSBytes)/(1<<20))
	}
	fmt.Fprintf(w, "bench: %6.1fs  %d calls (%d unanswered)  %.0f/s  p50 %.2fms  p99 %.2fms%s\n",
		s.Elapsed.Seconds(), s.Calls, s.Failed, s.IntervalRate, millis(s.IntervalP50), millis(s.IntervalP99), mem)
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Write writes the report as indented JSON or as the table for people
// (WriteTable).
func (r *Report) Write(w io.Writer, asJSON bool) error {
	if !asJSON {
		return r.WriteTable(w)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
