package cmdutil_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/internal/cmd/cmdutil"
	"github.com/portcullis/portcullis/memstore"
)

// TestDecisionLogLine: one JSON line per decision at info level, with the
// decision id of the audit row, and never the call's arguments.
func TestDecisionLogLine(t *testing.T) {
	var buf bytes.Buffer
	of := cmdutil.ObsFlags{LogFormat: "json"}
	log, err := of.Logger(&buf)
	if err != nil {
		t.Fatal(err)
	}
	obs := &cmdutil.Observability{Log: log}
	st := memstore.New(nil)
	dir := t.TempDir()
	path := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(path, []byte("version: 1\ntools:\n  list_elements: {endpoint: READ}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g, err := cmdutil.BuildGate(cmdutil.StaticEnv(nil, dir), path, io.Discard, append(obs.GateOptions(), gate.WithStore(st))...)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d, err := g.Decide(ctx, portcullis.Call{Tool: "list_elements", Session: "s1", Agent: "bot", Args: map[string]any{"secret": "hunter2"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Explain(ctx, portcullis.Call{Tool: "list_elements"}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("log lines = %q; want one (explanations are not logged)", lines)
	}
	if strings.Contains(lines[0], "hunter2") {
		t.Fatal("the decision log carries the call's arguments")
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatal(err)
	}
	recs, err := st.QueryAudit(ctx, portcullis.AuditQuery{Kind: portcullis.AuditDecision})
	if err != nil || len(recs) != 1 {
		t.Fatal(recs, err)
	}
	ev, err := recs[0].Event()
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{
		"level": "INFO", "msg": "decision", "decisionId": ev.DecisionID, "tool": "list_elements", "agent": "bot",
		"session": "s1", "outcome": string(d.Outcome), "permissionLevel": d.PermissionLevel.String(), "code": string(d.Code), "policy": ev.PolicyHash,
	} {
		if rec[k] != want {
			t.Errorf("log %s = %v; want %v", k, rec[k], want)
		}
	}
	if _, ok := rec["latency"]; !ok {
		t.Error("the log line has no latency")
	}
	if ev.DecisionID != d.DecisionID {
		t.Errorf("audit row %s, decision %s", ev.DecisionID, d.DecisionID)
	}

	if _, err := (&cmdutil.ObsFlags{LogFormat: "xml"}).Logger(&buf); err == nil {
		t.Error("--log-format xml was accepted")
	}
}
