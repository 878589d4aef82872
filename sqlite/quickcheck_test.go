package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/sqlite"
	"github.com/portcullis/portcullis/storetest"
)

// TestNoQuickCheck: with Options.NoQuickCheck a store whose audit pages
// are damaged opens (the check that reads every page is skipped), and the
// damage is found by the first query that reads those pages — an error,
// which the gate turns into a deny. Without the option Open refuses it.
func TestNoQuickCheck(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "portcullis.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	noErr(t, err)
	clock := storetest.NewClock()
	for i := range 20 {
		evs := make([]portcullis.AuditEvent, 100)
		for j := range evs {
			evs[j] = event(i*100+j, clock.Now(), fmt.Sprintf("s%d", j))
		}
		r(s.AppendAudit(ctx, evs...)).must(t)
	}
	noErr(t, s.Close())

	// A healthy file opens either way.
	s, err = sqlite.Open(ctx, path, sqlite.Options{NoQuickCheck: true})
	noErr(t, err)
	if recs := r(s.QueryAudit(ctx, portcullis.AuditQuery{Limit: 5000})).must(t); len(recs) != 2000 {
		t.Fatalf("QueryAudit = %d rows; want 2000", len(recs))
	}
	noErr(t, s.Close())

	st := r(os.Stat(path)).must(t)
	f := r(os.OpenFile(path, os.O_RDWR, 0)).must(t)
	junk := []byte(strings.Repeat("\xa5", 4096))
	for page := int64(10); page*4096 < st.Size()-4096; page += 7 {
		r(f.WriteAt(junk, page*4096)).must(t)
	}
	noErr(t, f.Close())

	if _, err := sqlite.Open(ctx, path, sqlite.Options{}); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("Open(damaged) with quick_check = %v; want it refused", err)
	}
	s, err = sqlite.Open(ctx, path, sqlite.Options{NoQuickCheck: true})
	if err != nil {
		t.Fatalf("Open(damaged) without quick_check = %v; want it opened", err)
	}
	defer s.Close()
	if _, err := s.QueryAudit(ctx, portcullis.AuditQuery{Limit: 5000}); err == nil {
		t.Errorf("reading the damaged audit pages: no error; want one")
	}
}
