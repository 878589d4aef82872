package guard

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"time"
)

// Guard is the guard of one server: its Sites and its count of wrong
// credentials, shared by every handler it serves.
type Guard struct {
	Sites    *Sites
	Failures *Failures
}

// Options configure a Guard: see NewSites and FailureOptions.
type Options struct {
	Hosts    []string
	Origins  []string
	Failures FailureOptions
}

// New makes a Guard.
func New(o Options) (*Guard, error) {
	s, err := NewSites(o.Hosts, o.Origins)
	if err != nil {
		return nil, err
	}
	return &Guard{Sites: s, Failures: NewFailures(o.Failures)}, nil
}

// CloseAfter marks the response so the server closes the connection once
// it is written and does not read the rest of the request's body. Every
// refusal (401, 403, 413, 429) calls it before writing, so a client that
// is refused cannot keep the connection by trickling a body.
func CloseAfter(w http.ResponseWriter) { w.Header().Set("Connection", "close") }

// BodyDeadline bounds the time a client may take to send a request's body:
// the connection's read deadline is set to now + d when the handler starts,
// and cleared once the body has been read to its end (so a long answer —
// a stream of events, a wait for a person — is not cut). A client that
// sends its body slower than that gets a read error, and the connection
// is closed. d <= 0 returns h unchanged.
func BodyDeadline(h http.Handler, d time.Duration) http.Handler {
	if d <= 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(d)); err != nil {
			// Not a connection whose deadline can be set (a test
			// recorder): serve as is.
			h.ServeHTTP(w, r)
			return
		}
		r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
		h.ServeHTTP(w, r)
	})
}

// deadlineBody clears the connection's read deadline once the body has been
// read whole, or the handler closes it.
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	once sync.Once
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		b.clear()
	}
	return n, err
}

func (b *deadlineBody) Close() error {
	err := b.ReadCloser.Close()
	b.clear()
	return err
}

func (b *deadlineBody) clear() {
	b.once.Do(func() { _ = b.rc.SetReadDeadline(time.Time{}) })
}
