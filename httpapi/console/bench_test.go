package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/sqlite"
)

// BenchmarkPendingPage renders the pending-approvals page (the whole page,
// and the main region a live refresh fetches) with n requests waiting,
// over the memory store and over SQLite: the store's reads, the page's
// template and its escaping, through the console's handler.
func BenchmarkPendingPage(b *testing.B) {
	for _, store := range []string{"memory", "sqlite"} {
		for _, n := range []int{10, 100} {
			for _, fragment := range []bool{false, true} {
				name := fmt.Sprintf("store=%s/pending=%d/page", store, n)
				if fragment {
					name = fmt.Sprintf("store=%s/pending=%d/refresh", store, n)
				}
				b.Run(name, func(b *testing.B) { benchPending(b, store, n, fragment) })
			}
		}
	}
}

func benchPending(b *testing.B, store string, n int, fragment bool) {
	var e *env
	if store == "memory" {
		e = newEnv(b)
	} else {
		clock := &testClock{t: time.Date(2026, 11, 21, 9, 30, 0, 0, time.UTC)}
		st, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "portcullis.db"), sqlite.Options{Clock: clock})
		must(b, err)
		b.Cleanup(func() { must(b, st.Close()) })
		e = build(b, st, clock)
		e.clock = clock
	}
	for i := range n {
		call := portcullis.Call{Tool: "send_email", Session: "s" + strconv.Itoa(i%7), Agent: "mailer",
			Args: map[string]any{"to": "user" + strconv.Itoa(i) + "@acme.com", "subject": "Report " + strconv.Itoa(i), "body": "Hello,\nthe report is attached."}}
		e.confirm(call)
	}
	c := e.client()
	c.login("bench")
	req := httptest.NewRequest(http.MethodGet, e.srv.URL+"/approvals", nil)
	req.Header.Set(sessionHeader, c.session)
	if fragment {
		req.Header.Set("X-Portcullis-Fragment", "1")
	}
	rec := httptest.NewRecorder()
	e.c.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `id="pending-list"`) {
		b.Fatalf("GET /approvals = %d without the pending list", rec.Code)
	}
	b.SetBytes(int64(rec.Body.Len()))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		rec := httptest.NewRecorder()
		e.c.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("GET /approvals = %d", rec.Code)
		}
	}
}
