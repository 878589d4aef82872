package console

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/portcullis/portcullis"
)

//go:embed assets
var assetFS embed.FS

// asset is an embedded static file.
type asset struct {
	body  []byte
	ctype string
	etag  string
}

// assetVersion names this build's assets in their URLs, so a browser never
// mixes a new page with an old script.
var assetVersion string

// assetTypes are the content types of the assets' extensions. They are
// spelled out rather than asked of mime.TypeByExtension, whose first call
// reads the machine's MIME database (half a megabyte of heap in every
// console, for three files whose types are known).
var assetTypes = map[string]string{
	".css": "text/css; charset=utf-8",
	".js":  "text/javascript; charset=utf-8",
	".svg": "image/svg+xml",
}

func loadAssets() (map[string]asset, error) {
	names, err := fs.Glob(assetFS, "assets/static/*")
	if err != nil {
		return nil, fmt.Errorf("console: assets: %w", err)
	}
	out := map[string]asset{}
	all := sha256.New()
	for _, n := range names {
		b, err := assetFS.ReadFile(n)
		if err != nil {
			return nil, fmt.Errorf("console: asset %s: %w", n, err)
		}
		sum := sha256.Sum256(b)
		all.Write(sum[:])
		ctype, ok := assetTypes[path.Ext(n)]
		if !ok {
			return nil, fmt.Errorf("console: asset %s: no content type for %q (add it to assetTypes)", n, path.Ext(n))
		}
		out[path.Base(n)] = asset{body: b, ctype: ctype, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
	}
	assetVersion = hex.EncodeToString(all.Sum(nil)[:6])
	return out, nil
}

// static serves an embedded asset. Assets are public: they hold nothing
// but the console's style and script.
func (c *Console) static(w http.ResponseWriter, r *http.Request) {
	a, ok := c.assets[r.PathValue("file")]
	if !ok {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	h.Set("Content-Type", a.ctype)
	h.Set("ETag", a.etag)
	h.Set("Cache-Control", "no-cache")
	if r.Header.Get("If-None-Match") == a.etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Length", strconv.Itoa(len(a.body)))
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(a.body) // a failed write is the client's: nothing to do
}

func parseTemplates(funcs template.FuncMap) (map[string]*template.Template, error) {
	base, err := template.New("layout").Funcs(funcs).ParseFS(assetFS, "assets/templates/layout.html")
	if err != nil {
		return nil, fmt.Errorf("console: templates: %w", err)
	}
	files, err := fs.Glob(assetFS, "assets/templates/pages/*.html")
	if err != nil {
		return nil, fmt.Errorf("console: templates: %w", err)
	}
	pages := map[string]*template.Template{}
	for _, f := range files {
		t, err := base.Clone()
		if err != nil {
			return nil, fmt.Errorf("console: templates: %w", err)
		}
		if _, err := t.ParseFS(assetFS, f); err != nil {
			return nil, fmt.Errorf("console: template %s: %w", f, err)
		}
		pages[strings.TrimSuffix(path.Base(f), ".html")] = t
	}
	return pages, nil
}

// view is what every page's template gets.
type view struct {
	Title   string
	Nav     string // the page's name, to mark its link
	Live    string // the change kinds that refresh the page (data-live)
	User    string // the actor name; "" before login
	CSRF    string
	Flash   *flash
	Pending int // pending approvals, for the badge; -1 unknown
	// PolicyProblem says why the newest version of the policy file was
	// rejected while the last good one stays in force; "" when none.
	PolicyProblem string
	Asset         string
	Data          any
}

// pageInfo names a page's template, title and live change kinds.
type pageInfo struct {
	name, title, live string
}

// pendingCounter is implemented by page data that may already know how
// many approvals are pending (-1: it does not), so rendering does not ask
// the store again.
type pendingCounter interface{ pendingCount() int }

const pendingCountLimit = 1000

func (c *Console) pendingCount(ctx context.Context) int {
	as, err := c.store.Approvals(ctx, portcullis.ApprovalFilter{Status: portcullis.ApprovalPending, Limit: pendingCountLimit})
	if err != nil {
		c.log.Error("console: count pending approvals", "err", err)
		return -1
	}
	return len(as)
}

// render writes a page: the whole page, or only its main region when the
// page's script refreshes it.
func (c *Console) render(w http.ResponseWriter, r *http.Request, s *session, status int, p pageInfo, data any) {
	pages, err := c.pages()
	if err != nil {
		c.log.Error("console: templates", "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	t := pages[p.name]
	if t == nil {
		c.log.Error("console: no template", "page", p.name)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	v := view{Title: p.title, Nav: p.name, Live: p.live, Pending: -1, Asset: assetVersion, Data: data}
	if s != nil {
		v.User, v.CSRF = s.actor(), s.csrf
		v.Pending = -1
		if pc, ok := data.(pendingCounter); ok {
			v.Pending = pc.pendingCount()
		}
		if v.Pending < 0 {
			v.Pending = c.pendingCount(r.Context())
		}
	}
	name := "layout"
	if isFragment(r) {
		name = "main"
		w.Header().Set("X-Portcullis-Pending", strconv.Itoa(v.Pending))
	} else if s != nil {
		v.Flash = c.takeFlash(s)
		if c.policyProblem != nil {
			v.PolicyProblem = c.policyProblem()
		}
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, name, v); err != nil {
		c.log.Error("console: render", "page", p.name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Add("Vary", "X-Portcullis-Session, X-Portcullis-Fragment")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes()) // a failed write is the client's: nothing to do
}

type errorView struct {
	Message string
	Back    string
}

// refuse answers with an error page.
func (c *Console) refuse(w http.ResponseWriter, r *http.Request, status int, msg string) {
	back := "/approvals"
	if ref, err := url.Parse(r.Referer()); err == nil && strings.EqualFold(ref.Host, r.Host) {
		back = localPath(ref.RequestURI(), back)
	}
	c.render(w, r, c.currentSession(r), status, pageInfo{name: "error", title: http.StatusText(status)}, errorView{Message: msg, Back: back})
}

// fail answers an action that went wrong: a coded error a person may read
// with its status, anything else as a short internal error (logged).
func (c *Console) fail(w http.ResponseWriter, r *http.Request, what string, err error) {
	status := http.StatusInternalServerError
	msg := what + " failed: internal error (see the gateway's log)."
	switch portcullis.ErrorCode(err) {
	case portcullis.CodeNotFound:
		status, msg = http.StatusNotFound, err.Error()
	case portcullis.CodeConflict:
		status, msg = http.StatusConflict, err.Error()
	case portcullis.CodeInvalidRequest:
		status, msg = http.StatusBadRequest, err.Error()
	case portcullis.CodeVerificationFailed:
		status, msg = http.StatusForbidden, err.Error()
	case portcullis.CodeRateLimited:
		status, msg = http.StatusTooManyRequests, err.Error()
	default:
		c.log.Error("console: "+what, "err", err)
	}
	c.refuse(w, r, status, msg)
}

func (c *Console) funcs() template.FuncMap {
	return template.FuncMap{
		"clean":   func(s string) string { return visible(s, false) },
		"cleanML": func(s string) string { return visible(s, true) },
		"short":   short,
		"time":    fmtTime,
		"iso": func(t time.Time) string {
			if t.IsZero() {
				return ""
			}
			return t.UTC().Format(time.RFC3339)
		},
		"ago":        func(t time.Time) string { return ago(c.clock.Now(), t) },
		"until":      func(t time.Time) string { return until(c.clock.Now(), t) },
		"path":       url.PathEscape,
		"query":      url.QueryEscape,
		"levelClass": levelClass,
		"isSession":  func(l portcullis.Level) bool { return l == portcullis.ConfirmSession },
	}
}

// levelClass names a level's style.
func levelClass(l portcullis.Level) string {
	switch l {
	case portcullis.AutoApprove:
		return "auto"
	case portcullis.ConfirmSession:
		return "session"
	case portcullis.ConfirmSingleUse:
		return "single"
	case portcullis.Deny:
		return "deny"
	}
	return "none"
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

func ago(now, t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := now.Sub(t)
	if d < 0 {
		return "just now"
	}
	return roughly(d) + " ago"
}

func until(now, t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	d := t.Sub(now)
	if d <= 0 {
		return "expired"
	}
	return "in " + roughly(d)
}

func roughly(d time.Duration) string {
	switch {
	case d < time.Minute:
		return strconv.Itoa(int(d/time.Second)) + "s"
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + "m"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d/time.Hour)) + "h"
	}
	return strconv.Itoa(int(d/(24*time.Hour))) + "d"
}

// short cuts s to n characters.
func short(n int, s string) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}

// visible makes text that may come from an agent safe to read: control
// and format characters (terminal escapes, bidirectional overrides,
// zero-width characters) are shown as ⟨U+XXXX⟩ instead of acting on the
// text around them. HTML escaping is the template's.
func visible(s string, keepNewlines bool) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	bad := func(r rune) bool {
		if keepNewlines && (r == '\n' || r == '\t') {
			return false
		}
		return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029'
	}
	if strings.IndexFunc(s, bad) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if bad(r) {
			fmt.Fprintf(&b, "⟨U+%04X⟩", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
