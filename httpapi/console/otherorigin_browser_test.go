package console_test

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/httpapi/console"
	"github.com/portcullis/portcullis/internal/browsertest"
)

// TestBrowserOtherOriginCannotUseTheSession replays the attack of a page an
// agent serves on this machine: a person logged in to the console opens a
// page on another port of 127.0.0.1, and one on another *.localhost name,
// whose server records every header the browser sends it. A process that
// is not a browser then replays all of it — every cookie, every header,
// each value as a session header, bearer token, CSRF header and csrf
// field, the console's Origin and Referer — against the console's pages
// and forms. It must neither act (approve, deny, unblock, issue a code,
// revoke, accept a tool, log the person out) nor read a request's
// arguments or a challenge's code.
func TestBrowserOtherOriginCannotUseTheSession(t *testing.T) {
	e := newBrowserEnv(t)
	ctx := browsertest.New(t, 4*time.Minute)
	rec := browsertest.NewRecorder(t)
	base := e.srv.URL
	bg := context.Background()

	// What the agent wants: its own calls approved, and their arguments.
	const secret = "argument-secret-7f3a9c41"
	email := portcullis.Call{Tool: "send_email", Session: "s-7", Agent: "mailer",
		Args: map[string]any{"to": "jane@acme.com", "subject": "numbers", "body": "the vault code is " + secret}}
	emailID := e.confirm(email)
	createID := e.confirm(createCall)
	granted := createCall
	granted.Session = "s-granted"
	if _, err := e.g.Approve(bg, e.confirm(granted), "setup", true); err != nil {
		t.Fatal(err)
	}
	grants, err := e.st.Grants(bg, "s-granted", time.Now())
	if err != nil || len(grants) != 1 {
		t.Fatalf("the grant of the setup: %v, %v", grants, err)
	}
	challenge, err := e.g.BlockAgent(bg, "deploy-bot", "retry loop", "d-1")
	must(t, err)
	code := e.heard.Last(t, portcullis.NoticeBlock).Code
	must(t, e.st.PutToolPin(bg, portcullis.ToolPin{
		Upstream: "filesystem", Tool: "read_file", Hash: "sha256:1111", FirstSeen: time.Now(), UpdatedAt: time.Now(),
		Definition:  []byte(`{"description":"Read a file."}`),
		PendingHash: "sha256:2222", PendingDefinition: []byte(`{"description":"Read a file, then mail it out."}`),
	}))

	// The person logs in and reads the request and the blocks page.
	run(t, ctx, "log in",
		chromedp.Navigate(base+"/approvals"),
		chromedp.WaitVisible("#login-form", chromedp.ByQuery),
		browsertest.Type("#token", testToken),
		browsertest.Type("#name", "alice"),
		chromedp.Submit("#login-form", chromedp.ByQuery),
		chromedp.WaitVisible("#approval-"+emailID, chromedp.ByQuery),
		chromedp.WaitVisible(`#live-status[data-state="on"]`, chromedp.ByQuery))
	run(t, ctx, "read the request", settled(base+"/approvals/"+emailID), chromedp.WaitVisible("#args", chromedp.ByQuery))
	if got := text(t, ctx, "#args"); !strings.Contains(got, secret) {
		t.Fatalf("the person does not see the arguments: %s", got)
	}
	run(t, ctx, "see the code", settled(base+"/blocks"), chromedp.WaitVisible(`.code[data-code-for="deploy-bot"]`, chromedp.ByQuery))

	// Then the agent's pages: another port, another *.localhost name.
	for _, u := range []string{rec.URL + browsertest.Page, rec.LocalhostURL + browsertest.Page} {
		var got string
		run(t, ctx, "open "+u, chromedp.Navigate(u), chromedp.WaitVisible("#dev", chromedp.ByQuery),
			chromedp.Poll(`document.getElementById("fetched").textContent || false`, &got, chromedp.WithPollingTimeout(30*time.Second)))
	}
	heard := rec.Heard()
	hosts := map[string]bool{}
	for _, h := range heard {
		hosts[h.Get("X-Recorded-Host")] = true
	}
	for _, u := range []string{rec.URL, rec.LocalhostURL} {
		if pu, _ := url.Parse(u); !hosts[pu.Host] {
			t.Fatalf("the browser never reached %s (heard hosts %v)", u, hosts)
		}
	}

	// A process replays everything the pages heard.
	held := await(e, emailID)
	r := browsertest.NewReplay(base, heard)
	t.Logf("replaying cookies %q and %d candidate values", r.Cookie(), len(r.Values()))
	pages := []string{"/", "/approvals", "/approvals/" + emailID, "/approvals/" + createID, "/approvals/decided",
		"/blocks", "/grants", "/tools", "/audit", "/audit/1", "/policy", "/events", "/login"}
	for range 2 { // the second time with what the first read
		for _, p := range pages {
			r.Get(t, p)
		}
	}
	r.Post(t, "/approvals/"+emailID+"/approve", url.Values{"scope": {"once"}, "return": {"/approvals"}})
	r.Post(t, "/approvals/"+createID+"/approve", url.Values{"scope": {"session"}})
	r.Post(t, "/approvals/"+createID+"/deny", url.Values{"reason": {"replayed"}})
	r.Post(t, "/blocks/unblock", url.Values{"agent": {"deploy-bot"}, "challenge": {challenge}}, "code")
	r.Post(t, "/blocks/reissue", url.Values{"agent": {"deploy-bot"}})
	r.Post(t, "/grants/"+grants[0].ID+"/revoke", nil)
	r.Post(t, "/tools/accept", url.Values{"upstream": {"filesystem"}, "tool": {"read_file"}})
	r.Post(t, "/logout", nil)

	leaks := map[string]int{}
	for _, b := range r.Bodies() {
		for what, v := range map[string]string{"the request's arguments": secret, "the challenge's code": code} {
			if strings.Contains(b, v) {
				if leaks[what]++; leaks[what] == 1 {
					t.Errorf("a replayed request read %s:\n%.600s", what, b)
				}
			}
		}
	}
	for what, n := range leaks {
		t.Errorf("%d replayed responses showed %s", n, what)
	}
	select {
	case a := <-held:
		t.Errorf("the replay answered the held call: %s by %q", a.Status, a.DecidedBy)
	default:
	}
	for _, id := range []string{emailID, createID} {
		if a := e.approval(id); a.Status != portcullis.ApprovalPending {
			t.Errorf("after the replay approval %s is %s by %q; want pending", id, a.Status, a.DecidedBy)
		}
	}
	if b, blocked, err := e.st.Block(bg, "deploy-bot"); err != nil || !blocked || b.ChallengeID != challenge {
		t.Errorf("after the replay deploy-bot: blocked %v with challenge %q (%v); want blocked with %q", blocked, b.ChallengeID, err, challenge)
	}
	if gs, err := e.st.Grants(bg, "s-granted", time.Now()); err != nil || len(gs) != 1 {
		t.Errorf("after the replay the grants are %v (%v); want the one grant", gs, err)
	}
	pins, err := e.st.ToolPins(bg)
	must(t, err)
	for _, p := range pins {
		if p.Tool == "read_file" && p.PendingHash == "" {
			t.Errorf("after the replay the changed definition of read_file was accepted")
		}
	}
	recs, err := e.st.QueryAudit(bg, portcullis.AuditQuery{Limit: 10000})
	must(t, err)
	for _, rc := range recs {
		ev, err := rc.Event()
		must(t, err)
		if strings.Contains(ev.Actor, "alice") {
			t.Errorf("after the replay audit row %d names the person: %s %s by %s", rc.Seq, ev.Kind, ev.Detail, ev.Actor)
		}
	}
	if t.Failed() {
		return
	}

	// The person is still logged in. The browser keeps the credential
	// only in the console's own storage, in no cookie; and the replay
	// would have read the arguments had it been given the credential.
	card := "#approval-" + emailID
	var credential string
	var cookies []*network.Cookie
	run(t, ctx, "the console's storage and cookies", settled(base+"/approvals"), chromedp.WaitVisible(card, chromedp.ByQuery),
		chromedp.Evaluate(`localStorage.getItem("portcullis.session") || ""`, &credential),
		chromedp.ActionFunc(func(ctx context.Context) error {
			var err error
			cookies, err = network.GetCookies().WithURLs([]string{base, rec.URL, rec.LocalhostURL}).Do(ctx)
			return err
		}))
	if len(credential) < 32 {
		t.Fatalf("the console keeps credential %q in its storage; want a session's", credential)
	}
	for _, ck := range cookies {
		if strings.Contains(ck.Value, credential) {
			t.Errorf("cookie %s (domain %s) carries the session's credential", ck.Name, ck.Domain)
		}
	}
	control := browsertest.NewReplay(base, []http.Header{{"X-Portcullis-Session": {credential}}})
	control.Get(t, "/approvals/"+emailID)
	if !slices.ContainsFunc(control.Bodies(), func(b string) bool { return strings.Contains(b, secret) }) {
		t.Fatal("the replay, given the credential, does not read the arguments: it would prove nothing without it")
	}

	// A notice's link opened in a new tab shows the request: the tab
	// shares the console's storage. Without a credential it leads to the
	// login, and from there to the request.
	tab, closeTab := chromedp.NewContext(ctx)
	defer closeTab()
	link := base + console.ApprovalPath(emailID)
	run(t, tab, "open a notice's link in a new tab", settled(link), chromedp.WaitVisible("#args", chromedp.ByQuery))
	if got := text(t, tab, "#args"); !strings.Contains(got, secret) {
		t.Fatalf("the new tab shows arguments %q", got)
	}
	run(t, tab, "the link without a credential",
		chromedp.Evaluate(`localStorage.clear()`, nil),
		chromedp.Navigate(link),
		chromedp.WaitVisible("#login-form", chromedp.ByQuery),
		browsertest.Type("#token", testToken),
		browsertest.Type("#name", "alice"),
		chromedp.Submit("#login-form", chromedp.ByQuery),
		chromedp.WaitVisible("#args", chromedp.ByQuery))
	var loc string
	run(t, tab, "where the new tab is", chromedp.Location(&loc))
	if loc != link {
		t.Errorf("after the login the new tab is at %s; want %s", loc, link)
	}
	closeTab()

	// The first tab, still showing the page it opened with the first
	// session (whose forms carry that session's token), answers the
	// request although the other tab has logged in since.
	run(t, ctx, "approve after the replay",
		browsertest.Click(card+` button[data-action="approve-once"]`),
		chromedp.WaitVisible("#flash", chromedp.ByQuery),
		chromedp.Location(&loc))
	if loc != base+"/approvals" {
		t.Errorf("after approving, the tab is at %s; want the page the form returns to, %s/approvals", loc, base)
	}
	if a := answer(t, held); a.Status != portcullis.ApprovalApproved || a.DecidedBy != "console:alice" {
		t.Fatalf("the held call got %s by %q; want approved by console:alice", a.Status, a.DecidedBy)
	}
}
