// Package noticetest records what the gate tells people, for tests that
// need the notices (and the verification codes they carry). It is
// imported by tests only.
package noticetest

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/portcullis/portcullis"
)

// Recorder is a portcullis.Notifier that keeps every notice. It is safe
// for concurrent use.
type Recorder struct {
	mu      sync.Mutex
	notices []portcullis.Notice
}

// Notify records n.
func (r *Recorder) Notify(_ context.Context, n portcullis.Notice) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notices = append(r.notices, n)
	return nil
}

// Notices returns the notices so far, oldest first.
func (r *Recorder) Notices() []portcullis.Notice {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.notices)
}

// Codes returns the verification codes the notices so far carried.
func (r *Recorder) Codes() []string {
	var out []string
	for _, n := range r.Notices() {
		if n.Code != "" {
			out = append(out, n.Code)
		}
	}
	return out
}

// Last returns the newest notice of kind (of any kind when kind is
// empty), failing the test when there is none.
func (r *Recorder) Last(t testing.TB, kind portcullis.NoticeKind) portcullis.Notice {
	t.Helper()
	ns := r.Notices()
	for i := len(ns) - 1; i >= 0; i-- {
		if kind == "" || ns[i].Kind == kind {
			return ns[i]
		}
	}
	if kind == "" {
		t.Fatal("no notice was sent")
	}
	t.Fatalf("no %s notice was sent", kind)
	return portcullis.Notice{}
}
