package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/client"
)

// floodPolicy makes every delete_note and write_note a call a person must
// confirm.
const floodPolicy = `version: 1
tools:
  read_note:   {endpoint: READ}
  write_note:  {endpoint: UPDATE}
  delete_note: {endpoint: DELETE}
approvals:
  wait: 60s
`

// writeFloodConfig writes a serve configuration with two agents, bot and
// other, the test upstream, and a human webhook at hook; it returns the
// directory, the configuration's path and the agents' tokens.
func writeFloodConfig(t *testing.T, hook string) (dir, cfgPath string, tokens map[string]string) {
	t.Helper()
	dir = t.TempDir()
	tokens = map[string]string{"bot": "bot-" + strings.Repeat("a", 40), "other": "other-" + strings.Repeat("b", 40)}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte(floodPolicy), 0o600))
	for name, tok := range tokens {
		must(os.WriteFile(filepath.Join(dir, name+".token"), []byte(tok+"\n"), 0o600))
	}
	upArgs, _ := json.Marshal([]string{os.Args[0], "-test.run=^$"})
	cfg := fmt.Sprintf(`policy: policy.yaml
state: state
agents:
  - name: bot
    tokenFile: bot.token
  - name: other
    tokenFile: other.token
upstreams:
  - name: notes
    command: %s
    env: {%s: "1"}
notify:
  webhook: {url: %q, human: true}
`, upArgs, upstreamEnv, hook)
	cfgPath = filepath.Join(dir, "portcullis.yaml")
	must(os.WriteFile(cfgPath, []byte(cfg), 0o600))
	return dir, cfgPath, tokens
}

// pendingByAgent lists the requests waiting for a person, as the person's
// approvals API shows them, counted by agent.
func pendingByAgent(t *testing.T, srv *serveProc, dir string) map[string]int {
	t.Helper()
	humanToken, err := os.ReadFile(filepath.Join(dir, "state", "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	person, err := client.New(srv.url, strings.TrimSpace(string(humanToken)))
	if err != nil {
		t.Fatal(err)
	}
	pending, err := person.Approvals(context.Background(), portcullis.ApprovalFilter{Status: portcullis.ApprovalPending, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	byAgent := map[string]int{}
	for _, a := range pending {
		byAgent[a.Call.Agent]++
	}
	return byAgent
}

// TestServeFloodOfApprovalRequestsIsCapped replays an agent's flood of
// approval requests against a real `portcullis serve` on its SQLite store: agent bot
// makes 4,000 concurrent calls needing a person, each with its own
// arguments, through the decision API. At most 50 requests (the default
// cap) wait for a person, the rest are refused with a reason the agent can
// act on, the person is told of the flood exactly once, and another
// agent's request is still made and listed.
func TestServeFloodOfApprovalRequestsIsCapped(t *testing.T) {
	sink := newWebhookSink(t)
	dir, cfgPath, tokens := writeFloodConfig(t, sink.srv.URL)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	srv := startServe(t, cfgPath)
	ctx := context.Background()

	bot, err := client.New(srv.url, tokens["bot"])
	must(err)
	const calls, workers, limit = 4000, 32, portcullis.DefaultMaxPending
	var (
		mu                 sync.Mutex
		confirmed, refused int
		unexpected         []string
		wg                 sync.WaitGroup
	)
	next := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				d, err := bot.Decide(ctx, portcullis.Call{Tool: "delete_note", Session: fmt.Sprintf("s%d", i%7), Args: map[string]any{"id": i}})
				mu.Lock()
				switch {
				case err != nil:
					unexpected = append(unexpected, err.Error())
				case d.Outcome == portcullis.OutcomeConfirm && d.ChallengeID != "":
					confirmed++
				case d.Outcome == portcullis.OutcomeDeny && d.Code == portcullis.CodePendingLimit && !d.FailClosed && d.ChallengeID == "" &&
					strings.Contains(d.Reason, fmt.Sprintf(`%d requests from agent "bot" are already waiting for a person`, limit)):
					refused++
				default:
					unexpected = append(unexpected, fmt.Sprintf("%s/%s failClosed=%v: %s", d.Outcome, d.Code, d.FailClosed, d.Reason))
				}
				mu.Unlock()
			}
		}()
	}
	for i := range calls {
		next <- i
	}
	close(next)
	wg.Wait()
	if len(unexpected) > 0 {
		t.Fatalf("%d of the flood's decisions were neither a request nor a PENDING_LIMIT refusal; the first: %s", len(unexpected), unexpected[0])
	}
	if confirmed != limit || refused != calls-limit {
		t.Fatalf("a flood of %d calls: %d requests made, %d refused; want %d and %d", calls, confirmed, refused, limit, calls-limit)
	}

	// Another agent is still heard, and the person sees its request.
	other, err := client.New(srv.url, tokens["other"])
	must(err)
	d, err := other.Decide(ctx, portcullis.Call{Tool: "delete_note", Session: "s0", Args: map[string]any{"id": "real"}})
	must(err)
	if d.Outcome != portcullis.OutcomeConfirm || d.ChallengeID == "" {
		t.Fatalf("another agent's call during the flood = %s/%s (%s); want confirm with a request", d.Outcome, d.Code, d.Reason)
	}
	if byAgent := pendingByAgent(t, srv, dir); byAgent["bot"] != limit || byAgent["other"] != 1 || len(byAgent) != 2 {
		t.Fatalf("pending requests by agent = %v; want bot %d and other 1", byAgent, limit)
	}

	// The webhook delivers in order: once the other agent's request has
	// arrived, every notice of the flood has too.
	deadline := time.Now().Add(time.Minute)
	var kinds map[portcullis.NoticeKind]int
	var capNotices []portcullis.Notice
	for {
		kinds, capNotices = map[portcullis.NoticeKind]int{}, nil
		sawOther := false
		for _, b := range sink.received() {
			var n portcullis.Notice
			must(json.Unmarshal([]byte(b), &n))
			kinds[n.Kind]++
			if n.Kind == portcullis.NoticePendingLimit {
				capNotices = append(capNotices, n)
			}
			if n.Kind == portcullis.NoticeApproval && n.Agent == "other" {
				sawOther = true
			}
		}
		if sawOther {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the webhook did not receive the other agent's request within a minute; received %v", kinds)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if kinds[portcullis.NoticeApproval] != limit+1 || len(capNotices) != 1 {
		t.Fatalf("notices received = %v; want %d approval requests and exactly one pending-limit notice", kinds, limit+1)
	}
	n := capNotices[0]
	if n.Agent != "bot" || !strings.Contains(n.Reason, fmt.Sprintf("%d approval requests waiting for you", limit)) || n.Link != srv.url+"/approvals?agent="+url.QueryEscape("bot") {
		t.Fatalf("pending-limit notice = %+v; want one about agent bot's %d requests, linked to its requests in the console", n, limit)
	}
}

// TestServeMCPFloodOfHeldCallsIsCapped: the same flood through the MCP
// endpoint, where a call that needs a person is held open while it waits.
// Of 300 concurrent calls of one session, 50 are held; the rest end at
// once with an error result that tells the agent why and what to do.
func TestServeMCPFloodOfHeldCallsIsCapped(t *testing.T) {
	sink := newWebhookSink(t)
	dir, cfgPath, tokens := writeFloodConfig(t, sink.srv.URL)
	srv := startServe(t, cfgPath)
	cs := connectHTTP(t, srv.url, tokens["bot"])
	const calls, limit = 300, portcullis.DefaultMaxPending
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		text string
		err  error
	}
	results := make(chan result, calls)
	for i := range calls {
		go func() {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "write_note", Arguments: map[string]any{"id": i}})
			r := result{err: err}
			if err == nil {
				for _, c := range res.Content {
					if tc, ok := c.(*mcp.TextContent); ok {
						r.text += tc.Text
					}
				}
				if !res.IsError {
					r.err = fmt.Errorf("call %d was forwarded: %s", i, r.text)
				}
			}
			results <- r
		}()
	}
	// The refused calls end at once; the held ones wait for a person.
	for range calls - limit {
		r := <-results
		if r.err != nil {
			t.Fatal(r.err)
		}
		if !strings.Contains(r.text, fmt.Sprintf(`%d requests from agent "bot" are already waiting for a person`, limit)) || !strings.Contains(r.text, "try again") {
			t.Fatalf("a refused call's result = %q; want the reason and what to do", r.text)
		}
	}
	if byAgent := pendingByAgent(t, srv, dir); byAgent["bot"] != limit || len(byAgent) != 1 {
		t.Fatalf("pending requests by agent = %v; want bot %d", byAgent, limit)
	}
	select {
	case r := <-results:
		t.Fatalf("more than %d calls were refused, or a held call ended: %+v", calls-limit, r)
	default:
	}
	other := connectHTTP(t, srv.url, tokens["other"])
	go other.CallTool(ctx, &mcp.CallToolParams{Name: "write_note", Arguments: map[string]any{"id": "real"}})
	deadline := time.Now().Add(time.Minute)
	for pendingByAgent(t, srv, dir)["other"] != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the other agent's held call made no request within a minute")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
