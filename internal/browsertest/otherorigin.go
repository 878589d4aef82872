package browsertest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Recorder is a web server on another port of the loopback interface, the
// kind of server an agent starts (a dev server): it keeps every header of
// every request a browser sends it, cookies included. Its page also asks
// for a picture and fetches itself with credentials, so whatever a browser
// attaches to such requests is heard too.
type Recorder struct {
	// URL is its address on 127.0.0.1, another port than the console's.
	URL string
	// LocalhostURL is the same server under another *.localhost name,
	// which Chromium resolves to the loopback interface.
	LocalhostURL string

	mu    sync.Mutex
	heard []http.Header
}

// NewRecorder starts a Recorder on 127.0.0.1; it stops when the test ends.
func NewRecorder(t testing.TB) *Recorder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("recorder: %v", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	r := &Recorder{
		URL:          fmt.Sprintf("http://127.0.0.1:%d", port),
		LocalhostURL: fmt.Sprintf("http://evil-%d.localhost:%d", port, port),
	}
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }() // ends with Close below
	t.Cleanup(func() { srv.Close() })
	return r
}

// Page is the path of the recorder's page that shows the test it was
// opened (its heading says "dev server").
const Page = "/dev"

func (r *Recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	h := req.Header.Clone()
	h.Set("X-Recorded-Host", req.Host)
	h.Set("X-Recorded-Path", req.URL.RequestURI())
	r.mu.Lock()
	r.heard = append(r.heard, h)
	r.mu.Unlock()
	_, _ = io.Copy(io.Discard, io.LimitReader(req.Body, 1<<20)) // what it says is in the headers
	switch req.URL.Path {
	case "/pixel.svg":
		w.Header().Set("Content-Type", "image/svg+xml")
		fmt.Fprint(w, `<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"/>`)
	case "/echo":
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "heard")
	default:
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><title>dev server</title><h1 id="dev">dev server</h1><img src="/pixel.svg" alt="">`+
			`<p id="fetched"></p><script>fetch("/echo", {credentials: "include", method: "POST", body: "x"}).then(r => r.text()).then(t => { document.getElementById("fetched").textContent = t; });</script>`)
	}
}

// Heard returns the headers of every request the recorder received, each
// with X-Recorded-Host and X-Recorded-Path added.
func (r *Recorder) Heard() []http.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]http.Header, len(r.heard))
	for i, h := range r.heard {
		out[i] = h.Clone()
	}
	return out
}

// Replay is what a process that is not a browser can do with everything a
// Recorder heard, against the console at Base: every request it sends
// carries every cookie heard and every other header heard, the console's
// Origin and Referer; and each value heard (cookie values, header values)
// or read in a console response (form values, meta contents, codes shown)
// is tried as a session header, a bearer token, a CSRF header and the
// form's csrf field.
type Replay struct {
	Base string

	hc      *http.Client
	cookie  string      // every cookie heard, one Cookie header
	headers http.Header // every other header heard
	values  []string    // candidate credentials and tokens
	codes   []string    // verification codes read in responses
	bodies  []string    // every response body
}

// replayDrop are the headers a replay does not copy: they describe the
// recorded request itself, or are set per request.
var replayDrop = []string{"Host", "Content-Length", "Content-Type", "Connection", "Cookie", "Origin", "Referer", "X-Recorded-Host", "X-Recorded-Path", "Accept-Encoding"}

// NewReplay builds the replay of what was heard against the console at
// base ("http://127.0.0.1:port").
func NewReplay(base string, heard []http.Header) *Replay {
	r := &Replay{
		Base:    strings.TrimSuffix(base, "/"),
		headers: http.Header{},
		hc: &http.Client{
			Timeout:       10 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
	var cookies []string
	for _, h := range heard {
		for _, line := range h.Values("Cookie") {
			for _, ck := range strings.Split(line, ";") {
				ck = strings.TrimSpace(ck)
				if ck == "" || slices.Contains(cookies, ck) {
					continue
				}
				cookies = append(cookies, ck)
				if _, v, ok := strings.Cut(ck, "="); ok {
					r.addValue(v)
				}
			}
		}
		for k, vs := range h {
			if slices.Contains(replayDrop, http.CanonicalHeaderKey(k)) {
				continue
			}
			for _, v := range vs {
				if !slices.Contains(r.headers.Values(k), v) {
					r.headers.Add(k, v)
				}
				r.addValue(v)
			}
		}
	}
	r.cookie = strings.Join(cookies, "; ")
	return r
}

// Cookie is the Cookie header the replay sends ("" when nothing was heard).
func (r *Replay) Cookie() string { return r.cookie }

// Values are the candidate credentials the replay tries.
func (r *Replay) Values() []string { return slices.Clone(r.values) }

// Bodies are the bodies of every console response the replay received.
func (r *Replay) Bodies() []string { return slices.Clone(r.bodies) }

// addValue keeps a value that could be a credential: a token of at least
// 16 characters without spaces (a user agent or an Accept list is not one).
func (r *Replay) addValue(v string) {
	v = strings.TrimSpace(v)
	if len(v) < 16 || len(v) > 512 || strings.ContainsAny(v, " ,;") || slices.Contains(r.values, v) {
		return
	}
	r.values = append(r.values, v)
}

// What a console page shows that an attacker would take: form values,
// meta contents and data attributes; and the challenge codes it shows.
var (
	harvest = []*regexp.Regexp{
		regexp.MustCompile(`value="([^"]+)"`),
		regexp.MustCompile(`content="([^"]+)"`),
		regexp.MustCompile(`data-[a-z-]+="([^"]+)"`),
	}
	codeShown = regexp.MustCompile(`class="code"[^>]*>([^<]+)<`)
)

// request sends one request and keeps what it answered.
func (r *Replay) request(ctx context.Context, method, path string, body url.Values, edit func(*http.Request)) (int, error) {
	var rd io.Reader
	if body != nil {
		rd = strings.NewReader(body.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, r.Base+path, rd)
	if err != nil {
		return 0, err
	}
	for k, vs := range r.headers {
		req.Header[k] = slices.Clone(vs)
	}
	if r.cookie != "" {
		req.Header.Set("Cookie", r.cookie)
	}
	req.Header.Set("Origin", r.Base)
	req.Header.Set("Referer", r.Base+"/approvals")
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if edit != nil {
		edit(req)
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil && !isTimeout(err) {
		return resp.StatusCode, err
	}
	text := string(b)
	var hdrs []string
	for k, vs := range resp.Header {
		hdrs = append(hdrs, k+": "+strings.Join(vs, ", "))
	}
	r.bodies = append(r.bodies, strings.Join(hdrs, "\n")+"\n\n"+text)
	for _, re := range harvest {
		for _, m := range re.FindAllStringSubmatch(text, -1) {
			r.addValue(m[1])
		}
	}
	for _, m := range codeShown.FindAllStringSubmatch(text, -1) {
		if c := strings.TrimSpace(m[1]); !slices.Contains(r.codes, c) {
			r.codes = append(r.codes, c)
		}
	}
	return resp.StatusCode, nil
}

// isTimeout reports whether err is the end of a read cut short on
// purpose (an event stream read for a moment).
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// variants are the ways a value is offered as a credential on a request.
func (r *Replay) variants() []func(*http.Request) {
	out := []func(*http.Request){nil, func(req *http.Request) { req.Header.Set("X-Portcullis-Fragment", "1") }}
	for _, v := range r.values {
		out = append(out, func(req *http.Request) {
			req.Header.Set("X-Portcullis-Session", v)
			req.Header.Set("Authorization", "Bearer "+v)
			req.Header.Set("X-CSRF-Token", v)
			req.Header.Set("X-Portcullis-Fragment", "1")
		})
	}
	return out
}

// Get fetches a console path (a page, a fragment, the event stream) once
// as heard and once with each candidate credential; streams are read for a
// moment. It returns the statuses.
func (r *Replay) Get(t testing.TB, path string) []int {
	t.Helper()
	var statuses []int
	for _, edit := range r.variants() {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		status, err := r.request(ctx, http.MethodGet, path, nil, edit)
		cancel()
		if err != nil && !isTimeout(err) {
			t.Fatalf("replay GET %s: %v", path, err)
		}
		statuses = append(statuses, status)
	}
	return statuses
}

// Post submits a console form: once for every pair of candidate values as
// the session credential (header, bearer token) and as the csrf field and
// header; the fields named in fill (a code) get each verification code read
// in a response in turn. It returns the statuses.
func (r *Replay) Post(t testing.TB, path string, form url.Values, fill ...string) []int {
	t.Helper()
	values := append([]string{""}, r.values...)
	fills := append([]string{""}, r.codes...)
	var statuses []int
	for _, session := range values {
		for _, csrf := range values {
			for _, f := range fills {
				body := url.Values{}
				for k, vs := range form {
					body[k] = slices.Clone(vs)
				}
				if csrf != "" {
					body.Set("csrf", csrf)
				}
				for _, name := range fill {
					body.Set(name, f)
				}
				status, err := r.request(context.Background(), http.MethodPost, path, body, func(req *http.Request) {
					if session != "" {
						req.Header.Set("X-Portcullis-Session", session)
						req.Header.Set("Authorization", "Bearer "+session)
					}
					if csrf != "" {
						req.Header.Set("X-CSRF-Token", csrf)
					}
				})
				if err != nil {
					t.Fatalf("replay POST %s: %v", path, err)
				}
				statuses = append(statuses, status)
			}
		}
	}
	return statuses
}
