package replay

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/portcullis/portcullis"
)

// The prose of traces written before trace entries carried facts, as the
// gate wrote it then. Only legacyTraceFacts and mayHaveLegacyFacts read it.
const (
	legacyNoUpstream = "no upstream server offers a tool named "
	legacyAnnotated  = "(MCP annotations of upstream "
	legacyChanged    = "definition changed since it was pinned"
	legacyNoVerdict  = "no verdict"
)

var (
	legacyStepFromStore = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^(?:continue|pause|stop): .*\bstep (\d+) \(run state from the store\)`)
	})
	legacyUpstreamOf = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`\(MCP annotations of upstream ("(?:[^"\\]|\\.)*"), pinned\)`)
	})
)

// mayHaveLegacyFacts reports whether a trace without facts has the words
// of a route stage that knew something of an upstream MCP tool.
func mayHaveLegacyFacts(trace []byte) bool {
	for _, m := range []string{legacyNoUpstream, legacyAnnotated, legacyChanged} {
		if bytes.Contains(trace, []byte(m)) {
			return true
		}
	}
	return false
}

// legacyTraceFacts fills in the facts of a trace written before trace
// entries carried them, from the entries' prose: an audit log keeps its
// old rows, and they replay as they did. It is the only place that reads
// a trace's prose; a trace with facts is never read this way.
func legacyTraceFacts(trace []portcullis.TraceEntry) {
	for i := range trace {
		t := &trace[i]
		switch t.Stage {
		case "route":
			switch {
			case strings.HasPrefix(t.Result, legacyNoUpstream):
				t.Facts = append(t.Facts, portcullis.FactUpstreamMissing)
				continue
			case strings.Contains(t.Result, legacyAnnotated):
				t.Facts = append(t.Facts, portcullis.FactUpstreamAnnotated)
				if m := legacyUpstreamOf().FindStringSubmatch(t.Result); m != nil {
					if s, err := strconv.Unquote(m[1]); err == nil {
						t.Upstream = s
					}
				}
			}
			if strings.Contains(t.Result, legacyChanged) {
				t.Facts = append(t.Facts, portcullis.FactDefinitionChanged)
			}
		case "validator":
			if strings.HasPrefix(t.Result, legacyNoVerdict) {
				t.Facts = append(t.Facts, portcullis.FactNoVerdict)
			}
		case "autonomy":
			if m := legacyStepFromStore().FindStringSubmatch(t.Result); m != nil {
				if n, err := strconv.Atoi(m[1]); err == nil {
					t.Step = n
					t.Facts = append(t.Facts, portcullis.FactRunStateFromStore)
				}
			}
		}
	}
}
