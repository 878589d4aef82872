package console_test

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/httpapi/console"
	"github.com/portcullis/portcullis/policy"
)

func TestPendingPage(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	c.login("")
	if body := c.page("/approvals"); !strings.Contains(body, `id="no-pending"`) {
		t.Fatalf("an empty pending page does not say so:\n%s", body)
	}
	session := e.confirm(createCall)
	single := e.confirm(deleteCall)
	body := c.page("/approvals")
	for id, wantSession := range map[string]bool{session: true, single: false} {
		card := section(t, body, "approval-"+id)
		if got := strings.Contains(card, `data-action="approve-session"`); got != wantSession {
			t.Errorf("card of %s offers a session approval: %v; want %v\n%s", id, got, wantSession, card)
		}
		for _, want := range []string{`data-action="approve-once"`, `data-action="deny"`, `name="reason"`, "writer", "s1"} {
			if !strings.Contains(card, want) {
				t.Errorf("card of %s lacks %s", id, want)
			}
		}
	}
	if !strings.Contains(body, "create persona Ada") || !strings.Contains(body, "delete notes") {
		t.Errorf("the cards do not show the action summaries:\n%s", body)
	}
	if !strings.Contains(body, `<span id="pending-count" class="count some">2</span>`) || !strings.Contains(body, "<title>(2) ") {
		t.Errorf("the badge does not count 2 pending approvals")
	}
	// A decided request leaves the list.
	if resp, _ := c.act("/approvals/"+single+"/deny", url.Values{"reason": {"no"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatal("deny failed")
	}
	if body := c.page("/approvals"); strings.Contains(body, "approval-"+single) {
		t.Errorf("a denied request is still pending")
	}
	// An expired request leaves it too.
	e.clock.Add(16 * time.Minute)
	if body := c.page("/approvals"); strings.Contains(body, "approval-"+session) {
		t.Errorf("an expired request is still pending")
	}
	if body := c.page("/approvals/decided?status=expired"); !strings.Contains(body, "/approvals/"+session) {
		t.Errorf("an expired request is not listed as expired")
	}
}

func TestFragment(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	c.login("")
	e.confirm(deleteCall)
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/approvals", nil)
	req.Header.Set("X-Portcullis-Fragment", "1")
	resp, body := c.do(req)
	if resp.StatusCode != http.StatusOK || strings.Contains(body, "<html") || !strings.Contains(body, "delete_element") {
		t.Fatalf("the live refresh = %d; want the main region only\n%s", resp.StatusCode, body)
	}
	if got := resp.Header.Get("X-Portcullis-Pending"); got != "1" {
		t.Errorf("X-Portcullis-Pending = %q; want 1", got)
	}
}

func TestApprovalDetail(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	c.login("")
	call := portcullis.Call{
		Tool: "send_email", Session: "s-42", Agent: "mailer", UserPresent: true,
		Args: map[string]any{"to": "jane@acme.com", "subject": "Q3 numbers", "password": "hunter2", "body": "Hi Jane,\nthe numbers."},
	}
	id := e.confirm(call)
	body := c.page("/approvals/" + id)
	for _, want := range []string{
		`<span class="tool">send_email</span>`,
		`id="summary">send_email: send to jane@acme.com, subject Q3 numbers</p>`,
		"<dd>mailer</dd>", "<dd>s-42</dd>",
		`id="risk">external-write</dd>`,
		"CONFIRM_SESSION",
		// the arguments, pretty-printed
		"{\n  &#34;body&#34;: &#34;Hi Jane,\\nthe numbers.&#34;,\n  &#34;password&#34;: &#34;[redacted]&#34;,",
		// the validator's opinion
		`<span class="status allow">allow</span>`, "0.93", "command judge-1",
		// the decision's trace, from its audit row
		`<span class="stage">route</span>`, `<span class="stage">validator</span> allow (confidence 0.93): the user asked for this email`,
		`<li class="decided"><span class="stage">confirmation</span>`,
		`href="/audit/1"`,
		`data-action="approve-session"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the approval's page lacks %q", want)
		}
	}
	if strings.Contains(body, "hunter2") {
		t.Errorf("the page shows a redacted argument's value")
	}
	if t.Failed() {
		t.Log(body)
	}
}

func TestApprovalDetailWithoutAuditRow(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	c.login("")
	a := portcullis.Approval{ID: "apr_orphan", DecisionID: "d-gone", Status: portcullis.ApprovalPending, Tool: "delete_element",
		Call: deleteCall, Level: portcullis.ConfirmSingleUse, Reason: "delete notes", CreatedAt: e.clock.Now(), ExpiresAt: e.clock.Now().Add(time.Minute)}
	must(t, e.st.CreateApproval(context.Background(), a))
	body := c.page("/approvals/apr_orphan")
	if !strings.Contains(body, "audit row was not found") || !strings.Contains(body, "validator was not asked") {
		t.Fatalf("an approval without its audit row:\n%s", body)
	}
}

func TestAgentTextIsInert(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	c.login("")
	call := portcullis.Call{
		Tool: "delete_element", Session: "s\u202e1", Agent: "<img src=x onerror=alert(1)>",
		Args: map[string]any{"name": "</pre><script>alert(1)</script>\u202egnp.exe", "esc": "\x1b[31mred"},
	}
	id := e.confirm(call)
	for _, p := range []string{"/approvals", "/approvals/" + id, "/audit", "/audit/1"} {
		body := c.page(p)
		for _, bad := range []string{"<script>alert", "<img src=x", "\u202e", "\x1b"} {
			if strings.Contains(body, bad) {
				t.Errorf("%s carries %q as it came", p, bad)
			}
		}
		if !strings.Contains(body, "⟨U&#43;202E⟩") { // the template escapes +
			t.Errorf("%s does not show the bidirectional override as ⟨U+202E⟩", p)
		}
	}
}

func TestHugeArguments(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	c.login("")
	big := strings.Repeat("0123456789", 90_000) // 900 kB
	call := deleteCall
	call.Args = map[string]any{"name": "x", "payload": big}
	id := e.confirm(call)
	list := c.page("/approvals")
	if len(list) > 64<<10 {
		t.Errorf("the pending list is %d bytes with one huge request; the preview should be short", len(list))
	}
	detail := c.page("/approvals/" + id)
	if !strings.Contains(detail, big) {
		t.Errorf("the approval's page does not show the whole argument")
	}
}

// fill writes n decisions: sessions a and b alternate; every 10th is
// delete_element (confirm), the rest list_elements (allow).
func fill(t *testing.T, e *env, n int) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		call := portcullis.Call{Tool: "list_elements", Session: []string{"a", "b"}[i%2], Agent: "bot", Args: map[string]any{"i": strconv.Itoa(i)}}
		if i%10 == 9 {
			call.Tool = "delete_element"
			call.Args["name"] = "needle-" + strconv.Itoa(i)
		}
		if _, err := e.g.Decide(ctx, call); err != nil {
			t.Fatal(err)
		}
	}
}

var seqRE = regexp.MustCompile(`<tr data-seq="(\d+)">`)

func seqs(body string) []int {
	var out []int
	for _, m := range seqRE.FindAllStringSubmatch(body, -1) {
		n, _ := strconv.Atoi(m[1])
		out = append(out, n)
	}
	return out
}

var linkRE = func(id string) *regexp.Regexp { return regexp.MustCompile(`href="([^"]*)" id="` + id + `"`) }

func link(body, id string) string {
	m := linkRE(id).FindStringSubmatch(body)
	if m == nil {
		return ""
	}
	return strings.ReplaceAll(m[1], "&amp;", "&")
}

func TestAuditPaging(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	c.login("")
	fill(t, e, 130)
	body := c.page("/audit")
	got := seqs(body)
	if len(got) != 50 || got[0] != 130 || got[49] != 81 {
		t.Fatalf("first page rows %v; want 130 down to 81", got)
	}
	if link(body, "newer") != "" {
		t.Errorf("the newest page links to newer rows")
	}
	var all []int
	all = append(all, got...)
	for next := link(body, "older"); next != ""; next = link(body, "older") {
		body = c.page(next)
		all = append(all, seqs(body)...)
	}
	if len(all) != 130 || all[129] != 1 {
		t.Fatalf("paging older reached %d rows ending at %v; want all 130 down to 1", len(all), all[len(all)-1])
	}
	// And back: newer from the oldest page.
	body = c.page(link(body, "newer"))
	if got := seqs(body); len(got) != 50 || got[0] != 80 || got[49] != 31 {
		t.Fatalf("newer from the oldest page = %v; want 80 down to 31", got)
	}
}

func TestAuditFilterAndSearch(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	c.login("")
	fill(t, e, 130)
	body := c.page("/audit?session=a&outcome=confirm")
	got := seqs(body)
	// Confirms are rows 10, 20, ... 130; session a has the odd rows
	// (seq i+1 with i even), and confirms are at i = 9, 19, ...: none.
	if len(got) != 0 || !strings.Contains(body, `id="no-rows"`) {
		t.Fatalf("session a, outcome confirm = %v; want none", got)
	}
	got = seqs(c.page("/audit?session=b&outcome=confirm&tool=delete_element"))
	if len(got) != 13 || got[0] != 130 || got[12] != 10 {
		t.Fatalf("session b, outcome confirm = %v; want the 13 deletions", got)
	}
	body = c.page("/audit?q=NEEDLE-99")
	if got := seqs(body); len(got) != 1 || got[0] != 100 {
		t.Fatalf("search needle-99 = %v; want row 100", got)
	}
	if !strings.Contains(body, `id="searched">Searched 130 rows`) {
		t.Errorf("the search does not say how much it read:\n%s", section(t, body, "searched"))
	}
	if resp, _ := c.get("/audit?outcome=maybe"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("an unknown outcome = %d; want 400", resp.StatusCode)
	}
	if resp, _ := c.get("/audit?before=-3"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a negative row = %d; want 400", resp.StatusCode)
	}
	body = c.page("/audit/100")
	if !strings.Contains(body, "needle-99") || !strings.Contains(body, "sha256:") {
		t.Errorf("row 100's page lacks its body or hash")
	}
	if resp, _ := c.get("/audit/100000"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a missing row = %d; want 404", resp.StatusCode)
	}
}

func TestAuditSearchIsBounded(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	c.login("")
	fill(t, e, 5200)
	// needle-9 is in the oldest row; a search reads 5000 rows per page and
	// offers to go on.
	body := c.page("/audit?q=needle-9%22")
	if got := seqs(body); len(got) != 0 || !strings.Contains(body, "older rows are not searched yet") {
		t.Fatalf("first page of a bounded search = %v\n%s", got, section(t, body, "searched"))
	}
	body = c.page(link(body, "older"))
	if got := seqs(body); len(got) != 1 || got[0] != 10 {
		t.Fatalf("the search's next page = %v; want row 10", got)
	}
}

func TestPolicyPage(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	c.login("")
	pol := e.g.Policy()
	body := c.page("/policy")
	for _, want := range []string{
		`id="policy-hash" class="hash">` + pol.Hash + "<",
		`id="policy-loaded">2026-11-21 09:30:00 UTC`,
		"delete_element", "Destructive operation", "Security Persona",
		`id="policy-source">version: 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the policy page lacks %q", want)
		}
	}
	if strings.Contains(body, "<form") && strings.Contains(body, `action="/policy`) {
		t.Errorf("the policy page offers to change the policy")
	}
	// The file changed on disk: it is not the policy in force, so it is
	// not shown as if it were.
	must(t, os.WriteFile(e.policyPath, []byte(testPolicy+"# edited\n"), 0o600))
	body = c.page("/policy")
	if strings.Contains(body, `id="policy-source"`) || !strings.Contains(body, "changed since the policy was loaded") {
		t.Errorf("a changed policy file is shown as the policy in force:\n%s", body)
	}
}

// TestPolicyPageElevatableAsTheTrace: the policy page says a tool is
// elevatable exactly when the decision's trace does; a DENY tool is never
// elevated, whatever canBeElevated says.
func TestPolicyPageElevatableAsTheTrace(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	c.login("")
	path := filepath.Join(t.TempDir(), "policy.yaml")
	must(t, os.WriteFile(path, []byte(strings.Replace(testPolicy, "tools:\n", "tools:\n  drop_table: {endpoint: DELETE, defaultLevel: DENY, canBeElevated: true}\n", 1)), 0o600))
	pol, _, err := policy.Load(path)
	must(t, err)
	must(t, e.g.SetPolicy(pol))
	body := c.page("/policy")
	for _, tool := range []string{"drop_table", "create_element", "delete_element"} {
		d, err := e.g.Decide(context.Background(), portcullis.Call{Tool: tool, Session: "s1", Agent: "a"})
		must(t, err)
		route := ""
		for _, s := range d.Trace {
			if s.Stage == "route" {
				route = s.Result
			}
		}
		want := "yes"
		if strings.Contains(route, "not elevatable") {
			want = "no"
		}
		row := regexp.MustCompile(`<tr data-tool="` + tool + `">.*?<td class="elevatable">(\w+)</td>`).FindStringSubmatch(body)
		if row == nil {
			t.Fatalf("the policy page has no row for %s", tool)
		}
		if row[1] != want {
			t.Errorf("%s: the policy page says elevatable %s; the trace says %q", tool, row[1], route)
		}
	}
}

func TestEveryPageRenders(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	c.login("")
	id := e.confirm(createCall)
	_, err := e.g.BlockAgent(context.Background(), "deploy-bot", "stop", "")
	must(t, err)
	for _, p := range []string{"/", "/approvals", "/approvals/" + id, "/approvals/decided", "/approvals/decided?status=approved",
		"/blocks", "/grants", "/grants?session=s1", "/audit", "/audit/1", "/tools", "/budgets", "/policy", "/static/console.css", "/static/favicon.svg"} {
		resp, body := c.get(p)
		if p == "/" {
			if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/approvals" {
				t.Errorf("GET / = %d to %q; want 303 to /approvals", resp.StatusCode, resp.Header.Get("Location"))
			}
			continue
		}
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s = %d\n%s", p, resp.StatusCode, body)
		}
	}
	for _, p := range []string{"/nope", "/static/nope.js", "/approvals/decided?status=weird"} {
		if resp, _ := c.get(p); resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusBadRequest {
			t.Errorf("GET %s = %d; want 404 or 400", p, resp.StatusCode)
		}
	}
}

// TestStaticAssetTypes: the assets' content types are the console's own,
// whatever the machine's MIME database says.
func TestStaticAssetTypes(t *testing.T) {
	c := newEnv(t).client()
	for file, want := range map[string]string{
		"console.css": "text/css; charset=utf-8",
		"console.js":  "text/javascript; charset=utf-8",
		"favicon.svg": "image/svg+xml",
	} {
		resp, _ := c.get("/static/" + file)
		if got := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || got != want {
			t.Errorf("GET /static/%s = %d, Content-Type %q; want 200, %q", file, resp.StatusCode, got, want)
		}
	}
}

func TestRejectedPolicyBannerOnEveryPage(t *testing.T) {
	problem := ""
	e := newEnv(t, func(o *console.Options, _ string) {
		o.PolicyProblem = func() string { return problem }
	})
	c := e.client()
	c.login("ana")
	if body := c.page("/approvals"); strings.Contains(body, `id="policy-problem"`) {
		t.Fatal("a banner with no rejected policy")
	}
	problem = `policy.yaml:3: unknown level "MAYBE" <script>`
	for _, path := range []string{"/approvals", "/blocks", "/audit", "/policy"} {
		body := c.page(path)
		if !strings.Contains(body, `id="policy-problem"`) || !strings.Contains(body, "unknown level") {
			t.Fatalf("%s does not show the rejected policy's banner", path)
		}
		if strings.Contains(body, "<script>") && !strings.Contains(body, "&lt;script&gt;") {
			t.Fatalf("%s shows the problem unescaped", path)
		}
	}
}

// TestPendingPageGroupsByAgent: a flood of one agent's requests does not
// hide another agent's request. The page groups the requests by agent with
// their counts, the quietest agent first, and shows a flooding agent's
// newest few with a link to all of them.
func TestPendingPageGroupsByAgent(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	c.login("")
	real := e.confirm(createCall) // agent writer
	flood := make([]string, 0, portcullis.DefaultMaxPending)
	for i := range portcullis.DefaultMaxPending + 10 {
		call := portcullis.Call{Tool: "delete_element", Session: "s9", Agent: "flooder", Args: map[string]any{"name": "n" + strconv.Itoa(i)}}
		d, err := e.g.Decide(context.Background(), call)
		must(t, err)
		if d.ChallengeID != "" {
			flood = append(flood, d.ChallengeID)
		}
	}
	if len(flood) != portcullis.DefaultMaxPending {
		t.Fatalf("the flood made %d requests; want the cap, %d", len(flood), portcullis.DefaultMaxPending)
	}
	body := c.page("/approvals")
	i := strings.Index(body, `id="pending-agents"`)
	if i < 0 {
		t.Fatalf("the pending page has no counts by agent:\n%s", body)
	}
	counts, _, _ := strings.Cut(body[i:], "</ul>")
	for _, want := range []string{`writer</a> <span class="count some">1</span>`, `flooder</a> <span class="count some">50</span>`} {
		if !strings.Contains(counts, want) {
			t.Errorf("the counts by agent lack %s:\n%s", want, counts)
		}
	}
	wi, fi := strings.Index(body, `data-agent="writer"`), strings.Index(body, `data-agent="flooder"`)
	if wi < 0 || fi < 0 || wi > fi {
		t.Fatalf("groups: writer at %d, flooder at %d; want both, the quieter writer first", wi, fi)
	}
	if !strings.Contains(body[wi:fi], `id="approval-`+real+`"`) {
		t.Errorf("the writer's group does not show its request %s", real)
	}
	group := body[fi:]
	if n := strings.Count(group, `class="card approval"`); n != 10 {
		t.Errorf("the flooder's group shows %d cards; want its newest 10", n)
	}
	if !strings.Contains(group, `<a href="/approvals?agent=flooder">40 more from agent flooder →</a>`) {
		t.Errorf("the flooder's group does not link to its 40 other requests:\n%s", group)
	}
	if !strings.Contains(body, `<span id="pending-count" class="count some">51</span>`) {
		t.Errorf("the badge does not count all 51 waiting requests")
	}

	only := c.page("/approvals?agent=flooder")
	if n := strings.Count(only, `class="card approval"`); n != portcullis.DefaultMaxPending {
		t.Errorf("the flooder's own list shows %d cards; want all %d", n, portcullis.DefaultMaxPending)
	}
	if strings.Contains(only, "approval-"+real) || !strings.Contains(only, `id="pending-filter"`) {
		t.Errorf("the flooder's own list shows another agent's request, or does not say it is filtered")
	}
	if none := c.page("/approvals?agent=nobody"); !strings.Contains(none, `id="no-pending"`) || !strings.Contains(none, "Nothing from agent nobody") {
		t.Errorf("an agent with nothing waiting does not say so")
	}
}

// The budgets page shows each counter's use from the store, its limit,
// what is left and when the window reopens; agent text is escaped.
func TestBudgetsPage(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	c.login("")
	if body := c.page("/budgets"); !strings.Contains(body, `id="no-budgets"`) {
		t.Errorf("budgets page with no use: want the empty note\n%s", body)
	}
	start, end := portcullis.WindowOf(e.clock.Now(), time.Hour)
	_, err := e.st.TakeBudget(context.Background(), []portcullis.BudgetCharge{
		{Budget: "payments", Agent: "<b>buyer</b>", Start: start, End: end, Limit: portcullis.Units(500), Cost: portcullis.Amount(480_500_000)},
	}, portcullis.BudgetTakeIfFits, e.clock.Now())
	must(t, err)
	body := c.page("/budgets")
	for _, want := range []string{`id="budget-list"`, "payments", "&lt;b&gt;buyer&lt;/b&gt;", "<td>480.5</td>", "<td>500</td>", "<td>19.5</td>", `aria-current="page">Budgets`} {
		if !strings.Contains(body, want) {
			t.Errorf("budgets page: want %q\n%s", want, body)
		}
	}
}
