package console_test

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/httpapi/console"
	"github.com/portcullis/portcullis/internal/browsertest"
	"github.com/portcullis/portcullis/sqlite"
)

// sizes are the screens the console is checked at: a laptop and a phone.
var sizes = []struct {
	name string
	w, h int64
}{{"desktop", 1366, 900}, {"phone", 390, 844}}

// logIn logs the browser into the console as alice.
func logIn(t *testing.T, ctx context.Context, base string) {
	t.Helper()
	run(t, ctx, "log in",
		chromedp.Navigate(base+"/approvals"),
		chromedp.WaitVisible("#login-form", chromedp.ByQuery),
		browsertest.Type("#token", testToken),
		browsertest.Type("#name", "alice"),
		chromedp.Submit("#login-form", chromedp.ByQuery),
		chromedp.WaitVisible("#pending-count", chromedp.ByQuery))
}

// underPoint is what a tap at the centre of sel's element would hit: the
// point, and the request and action of the button there.
func underPoint(t *testing.T, ctx context.Context, sel string) (x, y float64) {
	t.Helper()
	var pt []float64
	run(t, ctx, "find "+sel, chromedp.WaitVisible(sel, chromedp.ByQuery),
		chromedp.Evaluate(`(() => { const r = document.querySelector('`+sel+`').getBoundingClientRect(); return [r.left + r.width/2, r.top + r.height/2]; })()`, &pt))
	return pt[0], pt[1]
}

func hitAt(t *testing.T, ctx context.Context, x, y float64) string {
	t.Helper()
	var got string
	run(t, ctx, "what is under the pointer", chromedp.Evaluate(`(() => {
		const el = document.elementFromPoint(`+ftoa(x)+`, `+ftoa(y)+`);
		const b = el && el.closest("button");
		const card = el && el.closest("[data-approval]");
		return (card ? card.dataset.approval : "-") + " " + (b ? (b.dataset.action || b.id) : "-");
	})()`, &got))
	return got
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', 2, 64) }

// TestBrowserNothingMovesUnderThePointer: in a real Chromium, at a
// laptop's and a phone's size, a request that arrives while the pending
// page is shown does not move the request under the person's finger: the
// button at the point they were about to tap is still the same request's;
// a bar says a new request came, and tapping it shows it. Every button
// names the request it acts on.
func TestBrowserNothingMovesUnderThePointer(t *testing.T) {
	for _, size := range sizes {
		t.Run(size.name, func(t *testing.T) {
			e := newBrowserEnv(t)
			ctx := browsertest.New(t, 2*time.Minute)
			base := e.srv.URL
			logIn(t, ctx, base)
			run(t, ctx, "screen size", chromedp.EmulateViewport(size.w, size.h))
			first := e.confirm(portcullis.Call{Tool: "delete_element", Session: "s1", Agent: "writer", Args: map[string]any{"name": "notes"}})
			second := e.confirm(portcullis.Call{Tool: "create_element", Session: "s1", Agent: "writer", Args: map[string]any{"name": "Ada"}})
			run(t, ctx, "open the pending page", settled(base+"/approvals"),
				chromedp.WaitVisible("#approval-"+first, chromedp.ByQuery), chromedp.WaitVisible("#approval-"+second, chromedp.ByQuery))
			btn := "#approval-" + second + ` button[data-action="approve-once"]`
			run(t, ctx, "bring the button into view", chromedp.ScrollIntoView(btn, chromedp.ByQuery))
			x, y := underPoint(t, ctx, btn)
			if got, want := hitAt(t, ctx, x, y), second+" approve-once"; got != want {
				t.Fatalf("before anything arrives, the pointer is over %q; want %q", got, want)
			}
			var label string
			run(t, ctx, "read the button's name", chromedp.AttributeValue(btn, "aria-label", &label, nil, chromedp.ByQuery))
			if !strings.Contains(label, "create_element") || !strings.Contains(label, "writer") {
				t.Errorf("the approve button's accessible name is %q; want it to name the tool and the agent", label)
			}

			// A request from an agent with fewer requests: its group sorts
			// first, above the cards shown.
			late := e.confirm(portcullis.Call{Tool: "delete_element", Session: "s3", Agent: "late", Args: map[string]any{"name": "x"}})
			var seen bool
			run(t, ctx, "the page hears of the new request", chromedp.Poll(`!!(document.querySelector("#new-requests") || document.querySelector("#approval-`+late+`"))`,
				&seen, chromedp.WithPollingTimeout(30*time.Second)))
			if got, want := hitAt(t, ctx, x, y), second+" approve-once"; got != want {
				t.Fatalf("after a request arrived, the pointer is over %q; want still %q", got, want)
			}
			if got := text(t, ctx, "#new-requests"); !strings.Contains(got, "1 new request") {
				t.Errorf("the bar says %q; want 1 new request", got)
			}
			run(t, ctx, "show the new request", browsertest.Click("#new-requests"),
				chromedp.WaitVisible("#approval-"+late, chromedp.ByQuery), chromedp.WaitNotPresent("#new-requests", chromedp.ByQuery))

			// A request answered elsewhere stays in place, greyed, its
			// buttons disabled.
			if _, err := e.g.Approve(context.Background(), first, "cli:bob", false); err != nil {
				t.Fatal(err)
			}
			run(t, ctx, "the page hears of the answer", chromedp.WaitVisible("#new-requests", chromedp.ByQuery),
				chromedp.WaitReady(`#approval-`+first+`[data-gone] button[data-action="approve-once"][disabled]`, chromedp.ByQuery))
		})
	}
}

// TestBrowserPhoneNoSidewaysScroll: in a real Chromium at a phone's size,
// no page of the console scrolls sideways (the request page with a long
// argument digest and a long argument included), the header is one row,
// and the audit table scrolls inside its own box.
func TestBrowserPhoneNoSidewaysScroll(t *testing.T) {
	e := newBrowserEnv(t)
	ctx := browsertest.New(t, 3*time.Minute)
	base := e.srv.URL
	bg := context.Background()
	logIn(t, ctx, base)
	long := portcullis.Call{Tool: "write_file", Session: "s-long-session-name-without-any-spaces-at-all-0123456789", Agent: "writer-with-a-rather-long-name-0123456789",
		Args: map[string]any{"path": "/home/someone/projects/a/very/deep/directory/structure/that/does/not/wrap/anywhere/at/all/file.txt",
			"content": "#!/bin/sh\nset -eu\nfor f in $(ls /var/log/some-service-with-a-long-name/*.log); do gzip -9 \"$f\"; done\necho done\n"}}
	id := e.confirm(long)
	grantFor := e.confirm(createCall)
	if _, err := e.g.Approve(bg, grantFor, "cli:bob", true); err != nil {
		t.Fatal(err)
	}
	if _, err := e.g.BlockAgent(bg, "deploy-bot", "retry loop: the same denied delete_element twice", "d-42"); err != nil {
		t.Fatal(err)
	}
	pages := []struct{ path, ready string }{
		{"/approvals", "#approval-" + id},
		{console.ApprovalPath(id), "#args"},
		{"/approvals/decided", "#decided-list"},
		{"/grants", "#grant-list"},
		{"/audit", "#audit-rows"},
		{"/blocks", "#block-list"},
		{"/tools", "#no-changes, #pending-pins"},
		{"/policy", "#policy-hash"},
	}
	run(t, ctx, "phone screen", chromedp.EmulateViewport(390, 844))
	for _, p := range pages {
		// The page, not the empty frame a navigation gets first: the
		// script swaps the real page in once it has fetched it.
		run(t, ctx, "open "+p.path, chromedp.Navigate(base+p.path), chromedp.WaitVisible(p.ready, chromedp.ByQuery),
			chromedp.WaitVisible("header.top nav a", chromedp.ByQuery))
		var m map[string]float64
		run(t, ctx, "measure "+p.path, chromedp.Evaluate(`(() => {
			const h = document.querySelector("header.top"), n = h.querySelector("nav a");
			return {scroll: document.documentElement.scrollWidth, header: h.getBoundingClientRect().height, row: n.getBoundingClientRect().height};
		})()`, &m))
		if m["scroll"] > 390 {
			t.Errorf("%s is %.0f px wide on a 390 px screen", p.path, m["scroll"])
		}
		if m["header"] > 2*m["row"]+1 {
			t.Errorf("%s: the header is %.0f px high, more than one row (a link is %.0f px)", p.path, m["header"], m["row"])
		}
	}
}

// TestBrowserTextArguments: in a real Chromium, a request's page shows a
// string argument that spans lines (a script to write to a file) as text
// with its line breaks, one line under the other, not as a JSON string
// with \n in it.
func TestBrowserTextArguments(t *testing.T) {
	e := newBrowserEnv(t)
	ctx := browsertest.New(t, 2*time.Minute)
	base := e.srv.URL
	logIn(t, ctx, base)
	script := "#!/bin/sh\nset -eu\nrm -rf /tmp/cache\necho done"
	id := e.confirm(portcullis.Call{Tool: "write_file", Session: "s1", Agent: "writer", Args: map[string]any{"path": "run.sh", "content": script}})
	for _, size := range sizes {
		run(t, ctx, "screen size", chromedp.EmulateViewport(size.w, size.h))
		run(t, ctx, "open the request", chromedp.Navigate(base+console.ApprovalPath(id)), chromedp.WaitVisible("#args", chromedp.ByQuery))
		sel := `pre[data-arg="content"]`
		if got := text(t, ctx, sel); got != script {
			t.Errorf("%s: the content argument shows as %q; want the script as written", size.name, got)
		}
		var lines float64
		run(t, ctx, "count its lines", chromedp.Evaluate(`(() => { const p = document.querySelector('`+sel+`'); return Math.round(p.getBoundingClientRect().height / parseFloat(getComputedStyle(p).lineHeight)); })()`, &lines))
		if lines < 4 {
			t.Errorf("%s: the script takes %.0f lines on screen; want one for each of its 4", size.name, lines)
		}
	}
}

// TestBrowserSessionApprovalSaysWhatItCovers: in a real Chromium, at both
// sizes, "Approve for this session" does not look like "Approve once", and
// says what it lets through (the tool, in the session) and for how long
// (the gate's session grant lifetime).
func TestBrowserSessionApprovalSaysWhatItCovers(t *testing.T) {
	e := newBrowserEnv(t)
	ctx := browsertest.New(t, 2*time.Minute)
	base := e.srv.URL
	logIn(t, ctx, base)
	id := e.confirm(createCall)
	for _, size := range sizes {
		run(t, ctx, "screen size", chromedp.EmulateViewport(size.w, size.h))
		for _, page := range []string{"/approvals", console.ApprovalPath(id)} {
			run(t, ctx, "open "+page, settled(base+page))
			once, session := `button[data-action="approve-once"]`, `button[data-action="approve-session"]`
			got := text(t, ctx, session)
			for _, want := range []string{"create_element", createCall.Session, "12 h"} {
				if !strings.Contains(got, want) {
					t.Errorf("%s %s: the session button reads %q; want it to say %q", size.name, page, got, want)
				}
			}
			if got := text(t, ctx, once); !strings.Contains(got, "this call only") {
				t.Errorf("%s %s: the once button reads %q; want it to say it covers this call only", size.name, page, got)
			}
			var looks []string
			run(t, ctx, "compare the buttons", chromedp.Evaluate(`[`+"`"+once+"`"+`, `+"`"+session+"`"+`].map(s => { const c = getComputedStyle(document.querySelector(s)); return c.backgroundColor + " " + c.borderStyle; })`, &looks))
			if len(looks) != 2 || looks[0] == looks[1] {
				t.Errorf("%s %s: the two approve buttons look alike: %v", size.name, page, looks)
			}
		}
	}
}

// TestBrowserStoppedWaiting: in a real Chromium, at both sizes, a request
// whose agent has stopped waiting (its call waited the policy's
// approvals.wait and got its answer without a person) says so on the
// pending page and on its own page, where it says that approving only
// lets an identical retry through.
func TestBrowserStoppedWaiting(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "portcullis.db"), sqlite.Options{})
	must(t, err)
	t.Cleanup(func() { must(t, st.Close()) })
	clock := &testClock{t: time.Now()}
	e := build(t, st, clock, func(o *console.Options, addr string) { o.AllowedHosts = []string{addr} })
	ctx := browsertest.New(t, 2*time.Minute)
	base := e.srv.URL
	logIn(t, ctx, base)
	waiting := e.confirm(deleteCall)
	clock.Add(e.g.Policy().Approvals.Wait + time.Second)
	fresh := e.confirm(createCall)
	for _, size := range sizes {
		run(t, ctx, "screen size", chromedp.EmulateViewport(size.w, size.h))
		run(t, ctx, "open the pending page", settled(base+"/approvals"), chromedp.WaitVisible("#approval-"+fresh, chromedp.ByQuery))
		var marks []string
		run(t, ctx, "read the marks", chromedp.Evaluate(`[...document.querySelectorAll("[data-approval]")].map(c => c.dataset.approval + ":" + !!c.querySelector("[data-stopped]"))`, &marks))
		if got, want := strings.Join(marks, " "), fresh+":false "+waiting+":true"; got != want && got != waiting+":true "+fresh+":false" {
			t.Errorf("%s: the cards (id:stopped waiting) = %s; want %s", size.name, got, want)
		}
		run(t, ctx, "open the stopped request", chromedp.Navigate(base+console.ApprovalPath(waiting)), chromedp.WaitVisible("#args", chromedp.ByQuery))
		var note string
		run(t, ctx, "read the note", chromedp.Evaluate(`(document.querySelector("#stopped") || {}).textContent || ""`, &note))
		if !strings.Contains(note, "stopped waiting") || !strings.Contains(note, "same arguments") {
			t.Errorf("%s: the stopped request's page says %q; want that the agent stopped waiting and only an identical retry passes", size.name, note)
		}
		run(t, ctx, "open the fresh request", chromedp.Navigate(base+console.ApprovalPath(fresh)), chromedp.WaitVisible("#args", chromedp.ByQuery))
		run(t, ctx, "read the note", chromedp.Evaluate(`(document.querySelector("#stopped") || {}).textContent || ""`, &note))
		if note != "" {
			t.Errorf("%s: a request whose agent still waits says %q", size.name, note)
		}
	}
}

// TestBrowserDenyAndGlossary: in a real Chromium, denying needs a reason
// (as the CLI's deny --reason does), a denial's confirmation is not styled
// as a success, and the console's terms explain themselves on hover.
func TestBrowserDenyAndGlossary(t *testing.T) {
	e := newBrowserEnv(t)
	ctx := browsertest.New(t, 2*time.Minute)
	base := e.srv.URL
	logIn(t, ctx, base)
	id := e.confirm(deleteCall)
	approved := e.confirm(createCall)
	card := "#approval-" + id
	run(t, ctx, "deny without a reason", settled(base+"/approvals"),
		browsertest.Click(card+` button[data-action="deny"]`), chromedp.Sleep(500*time.Millisecond))
	if a := e.approval(id); a.Status != portcullis.ApprovalPending {
		t.Fatalf("a denial without a reason went through: %s", a.Status)
	}
	run(t, ctx, "approve another", browsertest.Click("#approval-"+approved+` button[data-action="approve-once"]`),
		chromedp.WaitVisible("#flash", chromedp.ByQuery))
	var approvedLook string
	run(t, ctx, "read the approval's look", chromedp.Evaluate(`getComputedStyle(document.querySelector("#flash")).backgroundColor`, &approvedLook))
	run(t, ctx, "deny with a reason", settled(base+"/approvals"),
		browsertest.Type(card+` input[name="reason"]`, "use archive_element"),
		browsertest.Click(card+` button[data-action="deny"]`),
		chromedp.WaitVisible("#flash", chromedp.ByQuery), chromedp.WaitNotPresent(card, chromedp.ByQuery))
	var deniedLook string
	run(t, ctx, "read the denial's look", chromedp.Evaluate(`getComputedStyle(document.querySelector("#flash")).backgroundColor`, &deniedLook))
	if deniedLook == approvedLook {
		t.Errorf("a denial's confirmation looks like an approval's (%s)", deniedLook)
	}
	for _, p := range []struct{ path, terms string }{
		{console.ApprovalPath(id), "endpoint risk user present"},
		{"/policy", "mode endpoint elevatable risk"},
		{"/blocks", "danger zone"},
	} {
		var explained []string
		run(t, ctx, "open "+p.path, chromedp.Navigate(base+p.path), chromedp.WaitVisible("main h1", chromedp.ByQuery),
			chromedp.Evaluate(`[...document.querySelectorAll("main [title]")].filter(e => e.title.length > 20).map(e => e.textContent.trim())`, &explained))
		have := " " + strings.Join(explained, " ") + " "
		for _, term := range []string{"endpoint", "risk", "user present", "mode", "elevatable", "danger zone"} {
			if strings.Contains(p.terms, term) && !strings.Contains(have, " "+term+" ") {
				t.Errorf("%s: %q has no explanation on hover (explained: %v)", p.path, term, explained)
			}
		}
	}
}
