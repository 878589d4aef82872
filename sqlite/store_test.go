package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/sqlite"
	"github.com/portcullis/portcullis/storetest"
)

// open opens a store in a fresh file of the test's temporary directory.
func open(t testing.TB, clock portcullis.Clock) portcullis.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"), sqlite.Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, open)
}
