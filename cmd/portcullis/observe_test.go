package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func getMetrics(t *testing.T, url, auth string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func readToken(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestServeMetricsAndHotReload runs `portcullis serve`, makes real MCP
// calls, scrapes /metrics over HTTP, then changes and breaks the policy
// file under the running gateway.
func TestServeMetricsAndHotReload(t *testing.T) {
	cfg, token := writeServeConfig(t, "")
	dir := filepath.Dir(cfg)
	state := filepath.Join(dir, "state")
	s := startServe(t, cfg)
	cs := connectHTTP(t, s.url, token)
	ctx := context.Background()
	callRead := func() *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_note", Arguments: map[string]any{"id": 1}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := callRead(); res.IsError {
		t.Fatalf("read_note = %+v; want it forwarded", res)
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "no_such_tool"}); err != nil || !res.IsError {
		t.Fatalf("no_such_tool = %+v, %v; want a denial", res, err)
	}

	metricsToken := readToken(t, filepath.Join(state, "metrics.token"))
	for _, auth := range []string{"", "Bearer " + token, "Bearer " + readToken(t, filepath.Join(state, "admin.token")), "Bearer " + metricsToken + "x"} {
		if code, _ := getMetrics(t, s.url, auth); code != http.StatusUnauthorized {
			t.Errorf("GET /metrics with %q = %d; want 401", auth, code)
		}
	}
	code, body := getMetrics(t, s.url, "Bearer "+metricsToken)
	if code != http.StatusOK {
		t.Fatalf("GET /metrics = %d: %s", code, body)
	}
	for _, want := range []string{
		`portcullis_decisions_total{code="",level="AUTO_APPROVE",outcome="allow",stage="elements",tool="read_note"} 1`,
		`portcullis_decisions_total{code="UNKNOWN_OPERATION",level="DENY",outcome="deny",stage="route",tool="other"} 1`,
		`portcullis_mcp_calls_total{result="forwarded"} 1`,
		`portcullis_mcp_calls_total{result="denied"} 1`,
		`portcullis_upstream_calls_total{result="ok",upstream="notes"} 1`,
		`portcullis_upstream_call_duration_seconds_count{upstream="notes"} 1`,
		`portcullis_stage_duration_seconds_count{stage="audit"} 2`,
		`portcullis_store_operation_duration_seconds_count{op="append_audit"} 2`,
		`portcullis_approvals_pending 0`,
		`portcullis_blocks_active 0`,
		`portcullis_policy_reload_failures_total 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the scrape has no %q", want)
		}
	}
	if strings.Contains(body, "no_such_tool") {
		t.Error("a tool name the policy does not know became a label")
	}

	// Change the policy under the running gateway: read_note is denied.
	policyPath := filepath.Join(dir, "policy.yaml")
	replacePolicy(t, policyPath, servePolicy+`elements:
  - name: Lockdown
    type: persona
    active: true
    gatekeeper: {deny: [read_note]}
`)
	deadline := time.Now().Add(20 * time.Second)
	for !callRead().IsError {
		if time.Now().After(deadline) {
			t.Fatal("the changed policy was not put in force")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Break it: the last good policy (the lockdown) stays in force.
	replacePolicy(t, policyPath, "version: 1\ntools: {read_note: {endpoint: NOPE}}\n")
	for {
		_, body = getMetrics(t, s.url, "Bearer "+metricsToken)
		if strings.Contains(body, "portcullis_policy_reload_failures_total 1") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the broken policy's rejection was not counted:\n%s", body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(body, "portcullis_policy_reloads_total 1") {
		t.Error("the good reload was not counted")
	}
	if res := callRead(); !res.IsError {
		t.Fatal("read_note was forwarded after a broken policy: the last good policy must stay in force")
	}

	// Both are in the audit log.
	var out bytes.Buffer
	if err := run(ctx, []string{"audit", "query", "--state", state, "--kind", "policy", "--json"}, nil, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if !strings.Contains(got, `"detail":"reloaded `) || !strings.Contains(got, `"detail":"rejected a new version of `) {
		t.Errorf("policy audit rows:\n%s\nwant a reload and a rejection", got)
	}
}

// TestServeExportsTraces runs `portcullis serve` with the OTEL_* variables
// pointing at a real HTTP endpoint: an MCP call arrives there as a
// tools/call span with the decision's span and its stages.
func TestServeExportsTraces(t *testing.T) {
	var mu sync.Mutex
	var got []byte
	otlp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/v1/traces" {
			mu.Lock()
			got = append(got, body...)
			mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer otlp.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp.URL)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	cfg, token := writeServeConfig(t, "")
	s := startServe(t, cfg)
	cs := connectHTTP(t, s.url, token)
	if res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "read_note", Arguments: map[string]any{"id": 1}}); err != nil || res.IsError {
		t.Fatalf("read_note = %+v, %v", res, err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		body := string(got)
		mu.Unlock()
		if strings.Contains(body, "tools/call") && strings.Contains(body, "portcullis.decide") &&
			strings.Contains(body, "portcullis.stage elements") && strings.Contains(body, "upstream tools/call") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the spans did not arrive; received %d bytes", len(body))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestMCPMetricsAddr: the stdio wrapper serves the same metrics on
// --metrics-addr, behind the metrics token, and logs one JSON line per
// decision with --log-format json.
func TestMCPMetricsAddr(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	policyPath := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policyPath, []byte(servePolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "mcp.log")
	cmd := wrapperCmd(t, "--policy", policyPath, "--state", state, "--metrics-addr", "127.0.0.1:0", "--log", logPath, "--log-format", "json",
		"--", "env", upstreamEnv+"=1", os.Args[0], "-test.run=^$")
	cmd.Stderr = os.Stderr
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "metrics-test", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_note", Arguments: map[string]any{"id": 1}}); err != nil || res.IsError {
		t.Fatalf("read_note = %+v, %v", res, err)
	}
	logs, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	var url, decisionID string
	for _, line := range strings.Split(strings.TrimSpace(string(logs)), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q is not JSON: %v", line, err)
		}
		switch rec["msg"] {
		case "serving metrics":
			url, _ = rec["url"].(string)
		case "decision":
			decisionID, _ = rec["decisionId"].(string)
		}
	}
	if url == "" || decisionID == "" {
		t.Fatalf("the log has no metrics address or no decision line:\n%s", logs)
	}
	base := strings.TrimSuffix(url, "/metrics")
	if code, _ := getMetrics(t, base, ""); code != http.StatusUnauthorized {
		t.Errorf("GET /metrics without the token = %d; want 401", code)
	}
	code, body := getMetrics(t, base, "Bearer "+readToken(t, filepath.Join(state, "metrics.token")))
	if code != http.StatusOK {
		t.Fatalf("GET /metrics = %d", code)
	}
	for _, want := range []string{
		`portcullis_decisions_total{code="",level="AUTO_APPROVE",outcome="allow",stage="elements",tool="read_note"} 1`,
		`portcullis_upstream_calls_total{result="ok",upstream=`,
		`portcullis_mcp_calls_total{result="forwarded"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the scrape has no %q", want)
		}
	}

	// The wrapper reloads its policy file too.
	replacePolicy(t, policyPath, servePolicy+"elements:\n  - {name: Lockdown, type: persona, active: true, gatekeeper: {deny: [read_note]}}\n")
	deadline := time.Now().Add(20 * time.Second)
	for {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_note", Arguments: map[string]any{"id": 2}})
		if err != nil {
			t.Fatal(err)
		}
		if res.IsError {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the wrapper did not put the changed policy in force")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// replacePolicy writes a new version of a policy file the way editors and
// configuration managers do: to a temporary file, renamed over.
func replacePolicy(t *testing.T, path, src string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
