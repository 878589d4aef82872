package postgres

import (
	"errors"
	"net/url"
	"strings"
)

// ParseURL reads a store URL that names a PostgreSQL database
// (postgres://... or postgresql://...). Two of its query parameters are
// Portcullis's own, not PostgreSQL connection parameters: schema, the
// schema that holds the tables (Options.Schema), and sync (full or
// process, see ParseSync). ParseURL takes them out and returns the
// connection string that remains and the Options they set. A repeated
// sync is refused.
func ParseURL(u string) (string, Options, error) {
	var opts Options
	if !strings.HasPrefix(u, "postgres://") && !strings.HasPrefix(u, "postgresql://") {
		return "", opts, errors.New("not a postgres URL (want postgres://user@host:port/database)")
	}
	pu, err := url.Parse(u)
	if err != nil {
		return "", opts, err
	}
	q := pu.Query()
	opts.Schema = q.Get("schema")
	if opts.Sync, err = ParseSync(strings.Join(q["sync"], ",")); err != nil {
		return "", opts, err
	}
	q.Del("schema")
	q.Del("sync")
	pu.RawQuery = q.Encode()
	return pu.String(), opts, nil
}
