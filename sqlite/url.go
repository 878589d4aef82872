package sqlite

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// ParseURL reads a store URL that names a SQLite file —
// sqlite:///path/portcullis.db, or sqlite:path for a relative path — and
// its one query parameter, sync (full or process, see ParseSync). It
// returns the file's path and the Options the URL sets.
func ParseURL(u string) (string, Options, error) {
	opts := Options{Sync: SyncFull}
	path, ok := strings.CutPrefix(u, "sqlite://")
	if !ok {
		if path, ok = strings.CutPrefix(u, "sqlite:"); !ok {
			return "", opts, errors.New("not a sqlite URL (want sqlite:///path/portcullis.db)")
		}
	}
	if before, query, ok := strings.Cut(path, "?"); ok {
		path = before
		q, err := url.ParseQuery(query)
		if err != nil {
			return "", opts, err
		}
		for k := range q {
			if k != "sync" {
				return "", opts, fmt.Errorf("unknown parameter %q (a sqlite store URL takes only sync=full or sync=process)", k)
			}
		}
		if opts.Sync, err = ParseSync(strings.Join(q["sync"], ",")); err != nil {
			return "", opts, err
		}
	}
	if path == "" {
		return "", opts, errors.New("the URL names no file (want sqlite:///path/portcullis.db)")
	}
	return path, opts, nil
}
