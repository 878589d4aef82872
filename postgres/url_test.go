package postgres_test

import (
	"strings"
	"testing"

	"github.com/portcullis/portcullis/postgres"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		url, dsn, schema string
		sync             postgres.Sync
		err              string
	}{
		{url: "postgres://ana@db:5432/p", dsn: "postgres://ana@db:5432/p", sync: postgres.SyncFull},
		{url: "postgresql://ana@db/p?sslmode=disable&schema=team_a&sync=process", dsn: "postgresql://ana@db/p?sslmode=disable", schema: "team_a", sync: postgres.SyncProcess},
		{url: "postgres://db/p?schema=x&application_name=gw", dsn: "postgres://db/p?application_name=gw", schema: "x", sync: postgres.SyncFull},
		{url: "postgres://db/p?sync=off", err: `sync "off": want "full"`},
		{url: "postgres://db/p?sync=full&sync=process", err: `sync "full,process"`},
		{url: "postgres://db/p%zz", err: "invalid URL escape"},
		{url: "sqlite:///p.db", err: "not a postgres URL"},
	} {
		dsn, opts, err := postgres.ParseURL(tc.url)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParseURL(%q) = %q, %v; want an error saying %q", tc.url, dsn, err, tc.err)
		case tc.err == "" && (err != nil || dsn != tc.dsn || opts.Schema != tc.schema || opts.Sync != tc.sync):
			t.Errorf("ParseURL(%q) = %q, schema %q, sync %q, %v; want %q, schema %q, sync %q", tc.url, dsn, opts.Schema, opts.Sync, err, tc.dsn, tc.schema, tc.sync)
		}
	}
}
