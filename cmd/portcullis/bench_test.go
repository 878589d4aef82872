package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/portcullis/portcullis/loadgen"
)

// TestBenchShortSoak is the short version of the soak run in
// docs/OPERATIONS.md: `portcullis bench` drives a real `portcullis serve`
// on SQLite through the decision API and the MCP endpoint for a few
// seconds, approves the writes as a person, and finds every decision it was
// answered in the audit log, whose chain verifies.
func TestBenchShortSoak(t *testing.T) {
	g := newLoadGateway(t, "", loadPolicy)
	g.start(t, "127.0.0.1:0")
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"bench",
		"--gateway", g.url, "--token-file", filepath.Join(g.dir, "bot.token"),
		"--state", filepath.Join(g.dir, "state"),
		"--via", "both", "--sessions", "6", "--duration", "4s",
		"--shell", "run_shell", "--gateway-pid", strconv.Itoa(g.proc.Process.Pid),
		"--json"}, nil, &stdout, &stderr)
	if err != nil {
		t.Fatalf("bench: %v\n%s\ngateway log:\n%s", err, stderr.String(), g.log())
	}
	var rep loadgen.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("bench --json wrote %q: %v", stdout.String(), err)
	}
	if rep.Answered == 0 || rep.Audit == nil {
		t.Fatalf("bench report = %+v; want answered calls and an audit check", rep)
	}
	if !rep.Audit.Complete() || rep.Audit.Found == 0 || rep.Audit.Unrecorded != 0 {
		t.Fatalf("audit check = %+v; want every answered decision found and the chain verified", rep.Audit)
	}
	byKind := map[string]loadgen.Stats{}
	for _, s := range rep.Rows {
		byKind[string(s.Via)+"/"+s.Kind] = s
	}
	for _, k := range []string{"api/read", "mcp/read", "/read", "/write", "/deny", "/shell"} {
		if byKind[k].Calls == 0 {
			t.Errorf("no %s calls in the report: %+v", k, rep.Rows)
		}
	}
	if s := byKind["/deny"]; s.Allow != 0 || s.Deny != s.Calls-s.Failed {
		t.Errorf("deny calls = %+v; want every answered one denied", s)
	}
	if s := byKind["/read"]; s.Allow != s.Calls-s.Failed {
		t.Errorf("read calls = %+v; want every answered one allowed", s)
	}
	if s := byKind["/write"]; s.Allow == 0 || rep.Approvals == 0 {
		t.Errorf("write calls = %+v, %d approvals; want writes allowed once a person approved their session", s, rep.Approvals)
	}
	if len(rep.Timeline) == 0 || rep.Timeline[len(rep.Timeline)-1].RSSBytes == 0 {
		t.Errorf("timeline = %+v; want progress with the gateway's memory", rep.Timeline)
	}
	calls := g.checkNothingRefusedForwarded(t)
	if len(calls) == 0 {
		t.Error("the upstream received no call")
	}
	if stderr.Len() == 0 {
		t.Error("bench printed no progress on stderr")
	}
}

func TestBenchFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"bad via", []string{"--via", "smoke"}},
		{"bad mix", []string{"--mix", "read=x"}},
		{"unknown kind", []string{"--mix", "fly=3"}},
		{"no token", []string{"--token-file", filepath.Join(t.TempDir(), "none")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("PORTCULLIS_AGENT_TOKEN", "")
			var stderr bytes.Buffer
			err := run(context.Background(), append([]string{"bench"}, tc.args...), nil, &bytes.Buffer{}, &stderr)
			if exitCode(err, &stderr) != 2 {
				t.Fatalf("bench %v = %v; want exit 2", tc.args, err)
			}
		})
	}
}
