package sqlite_test

import (
	"strings"
	"testing"

	"github.com/portcullis/portcullis/sqlite"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		url, path string
		sync      sqlite.Sync
		err       string
	}{
		{url: "sqlite:///var/lib/portcullis/portcullis.db", path: "/var/lib/portcullis/portcullis.db", sync: sqlite.SyncFull},
		{url: "sqlite:state/portcullis.db", path: "state/portcullis.db", sync: sqlite.SyncFull},
		{url: "sqlite:///p.db?sync=process", path: "/p.db", sync: sqlite.SyncProcess},
		{url: "sqlite:///p.db?sync=full", path: "/p.db", sync: sqlite.SyncFull},
		{url: "sqlite:///p.db?sync=normal", err: `sync "normal": want "full"`},
		{url: "sqlite:///p.db?sync=process&cache=shared", err: `unknown parameter "cache"`},
		{url: "sqlite:///p.db?sync=full&sync=process", err: `sync "full,process"`},
		{url: "sqlite:///p.db?sync=%zz", err: "invalid URL escape"},
		{url: "sqlite://", err: "names no file"},
		{url: "sqlite:?sync=full", err: "names no file"},
		{url: "postgres://db/p", err: "not a sqlite URL"},
	} {
		path, opts, err := sqlite.ParseURL(tc.url)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParseURL(%q) = %q, %v; want an error saying %q", tc.url, path, err, tc.err)
		case tc.err == "" && (err != nil || path != tc.path || opts.Sync != tc.sync):
			t.Errorf("ParseURL(%q) = %q, sync %q, %v; want %q, sync %q", tc.url, path, opts.Sync, err, tc.path, tc.sync)
		}
	}
}
