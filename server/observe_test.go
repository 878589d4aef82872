package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/policy"
	"github.com/portcullis/portcullis/server"
)

func TestNewLogger(t *testing.T) {
	for format, want := range map[string]string{"": "level=INFO msg=hi\n", "text": "level=INFO msg=hi\n", "json": `"msg":"hi"`} {
		var buf bytes.Buffer
		log, err := server.NewLogger(&buf, format)
		if err != nil {
			t.Fatalf("NewLogger(%q): %v", format, err)
		}
		log.Debug("not at info")
		log.Info("hi")
		if got := buf.String(); !strings.Contains(got, want) || strings.Contains(got, "not at info") {
			t.Errorf("NewLogger(%q) logged %q; want %q at info level", format, got, want)
		}
	}
	if _, err := server.NewLogger(&bytes.Buffer{}, "xml"); err == nil || err.Error() != `log format "xml": want text or json` {
		t.Errorf("NewLogger(xml) = %v; want refused", err)
	}
}

// TestDecisionLogger: one info line per decision, with its id and
// verdict and never the call's arguments; an explanation is not logged.
func TestDecisionLogger(t *testing.T) {
	var buf bytes.Buffer
	log, err := server.NewLogger(&buf, "json")
	if err != nil {
		t.Fatal(err)
	}
	pol, _, err := policy.Parse("policy.yaml", []byte("version: 1\ntools:\n  list_elements: {endpoint: READ}\n"))
	if err != nil {
		t.Fatal(err)
	}
	obs := server.Observability{Log: log}
	g, err := gate.New(pol, obs.GateOptions()...)
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
	if len(lines) != 1 || strings.Contains(lines[0], "hunter2") {
		t.Fatalf("log = %q; want one line without the arguments", lines)
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"msg": "decision", "decisionId": d.DecisionID, "tool": "list_elements", "agent": "bot",
		"session": "s1", "outcome": string(d.Outcome), "permissionLevel": d.PermissionLevel.String(), "failClosed": false} {
		if rec[k] != want {
			t.Errorf("log %s = %v; want %v", k, rec[k], want)
		}
	}
}

func TestObservabilityOff(t *testing.T) {
	obs := server.Observability{}
	if o := obs.GatewayObservers(); len(o) != 0 {
		t.Errorf("GatewayObservers() with tracing off = %v; want none", o)
	}
	if n := len(obs.GateOptions()); n != 1 {
		t.Errorf("GateOptions() with tracing off = %d options; want the decision log alone", n)
	}
}
