package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/internal/browsertest"
	"github.com/portcullis/portcullis/internal/noticetest"
	"github.com/portcullis/portcullis/policy"
	"github.com/portcullis/portcullis/sqlite"
)

// The console's end-to-end test: a real `portcullis serve` process, an
// agent's MCP client whose calls it holds, and a person in a real headless
// Chromium answering them on the console that process serves. Like the
// console's own browser tests it skips without Chromium unless
// PORTCULLIS_TEST_BROWSER=1 (CI sets it, installs Chromium, and fails on
// any skip).

// serveScreenshot, with PORTCULLIS_UPDATE_SCREENSHOTS=true, is where the
// approval page of the real serve is kept.
const serveScreenshot = "../../docs/console/serve-approval.png"

// browse runs browser actions, each step bounded so that a page that never
// shows what is awaited fails the test (with what was being done) instead
// of hanging it.
func browse(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	if err := chromedp.Run(ctx, actions...); err != nil {
		t.Fatalf("%s: %v\n%s", what, err, whereIs(ctx))
	}
}

// whereIs describes the page the browser shows, for a failure message.
func whereIs(tab context.Context) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(tab), 5*time.Second)
	defer cancel()
	var where string
	err := chromedp.Run(ctx, chromedp.Evaluate(`location.href + " (live: " + (document.getElementById("live-status") || {}).textContent + ")\n" + document.body.innerText.slice(0, 2000)`, &where))
	if err != nil {
		return "(the page could not be read: " + err.Error() + ")"
	}
	return "the page: " + where
}

// pageText waits until sel shows some text and returns it. It reads in
// one script evaluation, so a live refresh replacing the element cannot
// tear the read.
func pageText(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	var s string
	browse(t, ctx, "read "+sel, chromedp.WaitVisible(sel, chromedp.ByQuery),
		chromedp.PollFunction(`(sel) => { const e = document.querySelector(sel); return e ? e.textContent.trim() : ""; }`, &s,
			chromedp.WithPollingArgs(sel), chromedp.WithPollingTimeout(0)))
	return s
}

// press clicks sel like a person; fill types text into it. Each finds its
// element and acts on it in one step, so a live refresh cannot leave it
// holding a replaced node.
func press(sel string) chromedp.Action { return browsertest.Click(sel) }

func fill(sel, text string) chromedp.Action { return browsertest.Type(sel, text) }

// livePage opens a live console page and waits until its first live
// refresh (made when the event stream opens) has replaced the main region,
// so later clicks and keys reach the region that stays.
func livePage(url string) chromedp.Tasks {
	return chromedp.Tasks{
		chromedp.Navigate(url),
		chromedp.WaitVisible(`#live-status[data-state="on"]`, chromedp.ByQuery),
		chromedp.WaitReady(`#main[data-version]`, chromedp.ByQuery),
	}
}

// agentTraffic keeps every byte of every response the agent's MCP client
// received (headers and bodies, event streams included, as they are read).
type agentTraffic struct {
	base http.RoundTripper

	mu  sync.Mutex
	buf bytes.Buffer
}

func (a *agentTraffic) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := a.base.RoundTrip(r)
	if resp == nil {
		return resp, err
	}
	a.mu.Lock()
	if err := resp.Header.Write(&a.buf); err != nil {
		a.mu.Unlock()
		resp.Body.Close()
		return nil, err
	}
	a.mu.Unlock()
	resp.Body = &tappedBody{rc: resp.Body, a: a}
	return resp, err
}

func (a *agentTraffic) String() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.buf.String()
}

type tappedBody struct {
	rc io.ReadCloser
	a  *agentTraffic
}

func (b *tappedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 {
		b.a.mu.Lock()
		b.a.buf.Write(p[:n])
		b.a.mu.Unlock()
	}
	return n, err
}

func (b *tappedBody) Close() error { return b.rc.Close() }

// heldCall makes an MCP call in the background; its result arrives on the
// returned channel.
func heldCall(cs *mcp.ClientSession, tool string, args map[string]any) <-chan heldResult {
	ch := make(chan heldResult, 1)
	go func() {
		r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
		ch <- heldResult{r, err}
	}()
	return ch
}

type heldResult struct {
	res *mcp.CallToolResult
	err error
}

// released waits for a held call's result.
func released(t *testing.T, ch <-chan heldResult) *mcp.CallToolResult {
	t.Helper()
	select {
	case h := <-ch:
		if h.err != nil {
			t.Fatalf("the held MCP call failed: %v", h.err)
		}
		return h.res
	case <-time.After(2 * time.Minute):
		t.Fatal("the held MCP call never returned")
		return nil
	}
}

// arrived waits, on the open pending page, for a new approval to appear
// without a reload, and returns its ID and the path of its page. (The
// console announces a new approval twice, from the gate's notice and from
// the store's change feed, so the card may be redrawn once more just after
// it appears: the test reads it in one script evaluation, and acts on it
// only where a redraw cannot swallow a click.)
func arrived(t *testing.T, ctx context.Context) (id, path string) {
	t.Helper()
	var card []string
	var same bool
	browse(t, ctx, "see the held call appear on the open page",
		chromedp.WaitVisible(`#pending-list li.approval`, chromedp.ByQuery),
		chromedp.PollFunction(`() => {
			const e = document.querySelector("#pending-list li.approval");
			const a = e && e.querySelector("a.tool");
			return a ? [e.getAttribute("data-approval"), a.getAttribute("href"), a.textContent.trim()] : null;
		}`, &card, chromedp.WithPollingTimeout(0)),
		chromedp.Evaluate(`window.portcullisE2E === "still this page"`, &same))
	if !same {
		t.Fatal("the page was reloaded to show the pending approval; want a live update")
	}
	if len(card) != 3 || card[0] == "" || !strings.HasPrefix(card[1], "/approvals/") {
		t.Fatalf("the pending card reads %q; want its approval ID and the link to its page", card)
	}
	if card[2] != "write_note" {
		t.Errorf("the pending card names tool %q; want write_note", card[2])
	}
	return card[0], card[1]
}

func TestConsoleEndToEnd(t *testing.T) {
	ctx := browsertest.New(t, 0)
	cfg, agentToken := writeServeConfig(t, "")
	s := startServe(t, cfg)
	state := filepath.Join(filepath.Dir(cfg), "state")
	raw, err := os.ReadFile(filepath.Join(state, "admin.token"))
	if err != nil {
		t.Fatalf("the human token serve created: %v", err)
	}
	loginToken := strings.TrimSpace(string(raw))

	// The agent: the Go SDK's Streamable HTTP client with its bearer
	// token, every response it receives kept.
	traffic := &agentTraffic{base: http.DefaultTransport}
	tr := &mcp.StreamableClientTransport{Endpoint: s.url + "/mcp", HTTPClient: &http.Client{Transport: bearer{agentToken, traffic}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "console-e2e-agent", Version: "1"}, nil).Connect(context.Background(), tr, nil)
	if err != nil {
		t.Fatalf("connect the agent to serve: %v", err)
	}
	t.Cleanup(func() { cs.Close() })

	// The store serve keeps its state in, opened beside it: where the
	// test reads what was decided, and where another process blocks the
	// agent.
	bg := context.Background()
	st, err := sqlite.Open(bg, filepath.Join(state, "portcullis.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })

	// A person logs in with the token serve wrote.
	browse(t, ctx, "log in",
		chromedp.Navigate(s.url+"/approvals"),
		chromedp.WaitVisible("#login-form", chromedp.ByQuery),
		fill("#token", loginToken),
		fill("#name", "ana"),
		chromedp.Submit("#login-form", chromedp.ByQuery),
		chromedp.WaitVisible("#no-pending", chromedp.ByQuery),
		chromedp.WaitVisible(`#live-status[data-state="on"]`, chromedp.ByQuery))

	var codes []string // every verification code issued in the test
	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"approve a held call", func(t *testing.T) {
			browse(t, ctx, "open the pending page", livePage(s.url+"/approvals"), chromedp.WaitVisible("#no-pending", chromedp.ByQuery),
				chromedp.Evaluate(`window.portcullisE2E = "still this page"`, nil))
			held := heldCall(cs, "write_note", map[string]any{"id": 7, "text": "ship it"})
			id, path := arrived(t, ctx)

			// The person opens the request (the card's link) and reads it.
			browse(t, ctx, "open the request", livePage(s.url+path), chromedp.WaitVisible("#trace", chromedp.ByQuery))
			if got := pageText(t, ctx, "#args"); !strings.Contains(got, "ship it") {
				t.Errorf("the request's page shows arguments %q", got)
			}
			if got := pageText(t, ctx, "#status"); got != "pending" {
				t.Errorf("the request's page shows status %q; want pending", got)
			}
			if screenshotUpdate(t) {
				var png []byte
				browse(t, ctx, "screenshot the approval page", chromedp.FullScreenshot(&png, 100))
				if err := os.WriteFile(serveScreenshot, png, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			browse(t, ctx, "approve once",
				press(`#approval button[data-action="approve-once"]`),
				chromedp.WaitVisible("#flash", chromedp.ByQuery))
			res := released(t, held)
			if got := resultText(res); res.IsError || !strings.HasPrefix(got, "write_note ") || !strings.Contains(got, "ship it") {
				t.Fatalf("the approved write_note returned isError=%v %q; want the upstream's result", res.IsError, got)
			}
			a, err := st.Approval(bg, id)
			if err != nil {
				t.Fatal(err)
			}
			if a.Status != portcullis.ApprovalApproved || a.DecidedBy != "console:ana" {
				t.Errorf("approval %s is %s by %q; want approved by console:ana", id, a.Status, a.DecidedBy)
			}
		}},
		{"deny with a reason", func(t *testing.T) {
			browse(t, ctx, "open the pending page", livePage(s.url+"/approvals"), chromedp.WaitVisible("#no-pending", chromedp.ByQuery),
				chromedp.Evaluate(`window.portcullisE2E = "still this page"`, nil))
			held := heldCall(cs, "write_note", map[string]any{"id": 8, "text": "wipe the archive"})
			id, path := arrived(t, ctx)

			// Denied on the card where it appeared: once the reason field
			// holds text the page stops redrawing it (the person is typing).
			card := "#approval-" + id
			const reason = "Not the archive: ask me before deleting anything"
			browse(t, ctx, "deny with a reason",
				fill(card+` form.deny input[name="reason"]`, reason),
				press(card+` button[data-action="deny"]`),
				chromedp.WaitVisible("#flash", chromedp.ByQuery),
				chromedp.WaitNotPresent(card, chromedp.ByQuery))
			res := released(t, held)
			if got := resultText(res); !res.IsError || !strings.Contains(got, reason) {
				t.Fatalf("the denied write_note returned isError=%v %q; want an error with the person's reason", res.IsError, got)
			}
			browse(t, ctx, "open the decided request", livePage(s.url+path), chromedp.WaitVisible("#deny-reason", chromedp.ByQuery))
			if got := pageText(t, ctx, "#deny-reason"); got != reason {
				t.Errorf("the request's page shows the reason %q; want %q", got, reason)
			}
			if got := pageText(t, ctx, "#decided-by"); !strings.HasPrefix(got, "console:ana") {
				t.Errorf("the request's page says it was decided by %q; want console:ana", got)
			}
		}},
		{"pages on other origins cannot use the session", func(t *testing.T) {
			// The person, logged in, opens pages the agent serves on
			// another port of 127.0.0.1 and on another *.localhost name,
			// which record every header the browser sends; a process
			// replays all of it against serve.
			browse(t, ctx, "open the pending page", livePage(s.url+"/approvals"), chromedp.WaitVisible("#no-pending", chromedp.ByQuery),
				chromedp.Evaluate(`window.portcullisE2E = "still this page"`, nil))
			const secret = "e2e-argument-secret-51c9"
			held := heldCall(cs, "write_note", map[string]any{"id": 9, "text": "publish " + secret})
			id, path := arrived(t, ctx)
			browse(t, ctx, "open the request", livePage(s.url+path), chromedp.WaitVisible("#args", chromedp.ByQuery))
			if got := pageText(t, ctx, "#args"); !strings.Contains(got, secret) {
				t.Fatalf("the request's page shows arguments %q", got)
			}
			newest, err := st.QueryAudit(bg, portcullis.AuditQuery{Newest: true, Limit: 1})
			if err != nil || len(newest) != 1 {
				t.Fatalf("the newest audit row: %v, %v", newest, err)
			}
			rec := browsertest.NewRecorder(t)
			for _, u := range []string{rec.URL + browsertest.Page, rec.LocalhostURL + browsertest.Page} {
				var got string
				browse(t, ctx, "open "+u, chromedp.Navigate(u), chromedp.WaitVisible("#dev", chromedp.ByQuery),
					chromedp.Poll(`document.getElementById("fetched").textContent || false`, &got, chromedp.WithPollingTimeout(30*time.Second)))
			}
			r := browsertest.NewReplay(s.url, rec.Heard())
			for range 2 { // the second time with what the first read
				for _, p := range []string{"/", "/approvals", path, "/approvals/decided", "/audit", "/blocks", "/events"} {
					r.Get(t, p)
				}
			}
			r.Post(t, path+"/approve", url.Values{"scope": {"once"}})
			r.Post(t, path+"/deny", url.Values{"reason": {"replayed"}})
			r.Post(t, "/logout", nil)
			for _, b := range r.Bodies() {
				if strings.Contains(b, secret) {
					t.Fatalf("a replayed request read the held call's arguments:\n%.600s", b)
				}
			}
			select {
			case h := <-held:
				t.Fatalf("the replay answered the held call: %v %v", resultText(h.res), h.err)
			default:
			}
			if a, err := st.Approval(bg, id); err != nil || a.Status != portcullis.ApprovalPending {
				t.Fatalf("after the replay approval %s is %s by %q (%v); want pending", id, a.Status, a.DecidedBy, err)
			}
			recs, err := st.QueryAudit(bg, portcullis.AuditQuery{AfterSeq: newest[0].Seq, Limit: 10000})
			if err != nil {
				t.Fatal(err)
			}
			for _, rc := range recs {
				if ev, err := rc.Event(); err != nil || strings.Contains(ev.Actor, "ana") {
					t.Fatalf("after the replay audit row %d names the person: %s by %s (%v)", rc.Seq, ev.Kind, ev.Actor, err)
				}
			}

			// The person is still logged in, and answers.
			browse(t, ctx, "approve after the replay", livePage(s.url+path),
				press(`#approval button[data-action="approve-once"]`),
				chromedp.WaitVisible("#flash", chromedp.ByQuery))
			if res := released(t, held); res.IsError || !strings.Contains(resultText(res), secret) {
				t.Fatalf("the approved write_note returned isError=%v %q; want the upstream's result", res.IsError, resultText(res))
			}
		}},
		{"unblock with the code", func(t *testing.T) {
			// Another process (this test, on the same store) stops the
			// agent in the danger zone; its code goes to that process's
			// notifier, not to serve's console.
			caught := &noticetest.Recorder{}
			pol, _, err := policy.Parse("policy.yaml", []byte(servePolicy))
			if err != nil {
				t.Fatal(err)
			}
			other, err := gate.New(pol, gate.WithStore(st), gate.WithNotifier(caught))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := other.BlockAgent(bg, "bot", "retry loop: the same denied write_note twice", "d-e2e"); err != nil {
				t.Fatal(err)
			}
			codes = append(codes, caught.Codes()...)
			if len(codes) != 1 {
				t.Fatalf("blocking the agent issued %d codes; want 1", len(codes))
			}

			res, err := cs.CallTool(bg, &mcp.CallToolParams{Name: "read_note", Arguments: map[string]any{"id": 1}})
			if err != nil {
				t.Fatal(err)
			}
			if got := resultText(res); !res.IsError || !strings.Contains(got, "blocked") {
				t.Fatalf("a blocked agent's read_note returned isError=%v %q; want refused as blocked", res.IsError, got)
			}

			// The person asks serve for a new code and sees it there.
			agentCard := `li[data-agent="bot"]`
			codeSel := `.code[data-code-for="bot"]`
			browse(t, ctx, "issue a new code",
				livePage(s.url+"/blocks"),
				chromedp.WaitVisible(agentCard, chromedp.ByQuery),
				press(agentCard+` button[data-action="reissue"]`),
				chromedp.WaitVisible("#flash", chromedp.ByQuery))
			code := pageText(t, ctx, codeSel)
			if !codePattern.MatchString(code) {
				t.Fatalf("the blocks page shows code %q; want 6 characters of 0-9A-Z without I and O", code)
			}
			codes = append(codes, code)

			// The first code was replaced: it no longer unblocks.
			if code != codes[0] {
				browse(t, ctx, "unblock with the replaced code",
					livePage(s.url+"/blocks"),
					chromedp.WaitVisible(agentCard, chromedp.ByQuery),
					fill(agentCard+` input[name="code"]`, codes[0]),
					press(agentCard+` button[data-action="unblock"]`),
					chromedp.WaitVisible("#error-message", chromedp.ByQuery))
				if _, blocked, err := st.Block(bg, "bot"); err != nil || !blocked {
					t.Fatalf("the replaced code unblocked the agent (blocked=%v, %v)", blocked, err)
				}
			}

			browse(t, ctx, "unblock with the code",
				livePage(s.url+"/blocks"),
				chromedp.WaitVisible(codeSel, chromedp.ByQuery),
				fill(agentCard+` input[name="code"]`, code),
				press(agentCard+` button[data-action="unblock"]`),
				chromedp.WaitVisible("#no-blocks", chromedp.ByQuery))
			var loc string
			browse(t, ctx, "where the browser is", chromedp.Location(&loc))
			if strings.Contains(loc, code) {
				t.Errorf("the code is in the URL: %s", loc)
			}

			res, err = cs.CallTool(bg, &mcp.CallToolParams{Name: "read_note", Arguments: map[string]any{"id": 1}})
			if err != nil {
				t.Fatal(err)
			}
			if got := resultText(res); res.IsError || !strings.HasPrefix(got, "read_note ") {
				t.Fatalf("the unblocked agent's read_note returned isError=%v %q; want the upstream's result", res.IsError, got)
			}
		}},
	}
	for _, step := range steps {
		if !t.Run(step.name, step.run) {
			return
		}
	}

	t.Run("no code reaches the agent", func(t *testing.T) {
		seen := traffic.String()
		for _, want := range []string{"write_note", "Not the archive", "blocked", "read_note"} {
			if !strings.Contains(seen, want) {
				t.Fatalf("the agent's recorded traffic lacks %q: the recording is incomplete", want)
			}
		}
		for _, code := range codes {
			if strings.Contains(seen, code) {
				t.Errorf("the agent received the verification code %s", code)
			}
		}
	})
}

// screenshotUpdate reports whether PORTCULLIS_UPDATE_SCREENSHOTS asks for
// the screenshots in docs/console to be rewritten.
func screenshotUpdate(t *testing.T) bool {
	t.Helper()
	v := os.Getenv("PORTCULLIS_UPDATE_SCREENSHOTS")
	if v == "" {
		return false
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		t.Fatalf("PORTCULLIS_UPDATE_SCREENSHOTS=%q: want true or false", v)
	}
	return b
}
