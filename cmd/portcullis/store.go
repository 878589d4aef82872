package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/postgres"
	"github.com/portcullis/portcullis/sqlite"

	"github.com/spf13/pflag"
)

// stateFlags are the flags every stateful command takes.
type stateFlags struct {
	state string
	store string
	// perCall is set by commands that open the store for one decision
	// (hook, exec): SQLite's whole-file quick_check is skipped at open.
	perCall bool
}

func (s *stateFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&s.state, "state", "", "state `directory` (default $PORTCULLIS_STATE, else $XDG_STATE_HOME/portcullis)")
	fs.StringVar(&s.store, "store", "", "store `URL`: sqlite:///path/portcullis.db or postgres://..., ?sync=process to trade power-loss durability for speed (default $PORTCULLIS_STORE, else SQLite in the state directory)")
}

// dir returns the state directory, creating it (0700) when create is set.
func (s *stateFlags) dir(create bool) (string, error) {
	d := s.state
	if d == "" {
		d = os.Getenv("PORTCULLIS_STATE")
	}
	if d == "" {
		base := os.Getenv("XDG_STATE_HOME")
		if base == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", fmt.Errorf("find the state directory: %w (pass --state DIR)", err)
			}
			base = filepath.Join(home, ".local", "state")
		}
		d = filepath.Join(base, "portcullis")
	}
	abs, err := filepath.Abs(d)
	if err != nil {
		return "", fmt.Errorf("state directory %s: %w", d, err)
	}
	if create {
		if err := os.MkdirAll(abs, 0o700); err != nil {
			return "", fmt.Errorf("create state directory: %w", err)
		}
	}
	return abs, nil
}

// url returns the store URL in force.
func (s *stateFlags) url() (string, error) {
	if s.store != "" {
		return s.store, nil
	}
	if env := os.Getenv("PORTCULLIS_STORE"); env != "" {
		return env, nil
	}
	d, err := s.dir(false)
	if err != nil {
		return "", err
	}
	return "sqlite://" + filepath.Join(d, "portcullis.db"), nil
}

// open opens the store the flags name. SQLite files live in the state
// directory unless the URL names another path.
func (s *stateFlags) open(ctx context.Context, log *slog.Logger) (portcullis.Store, error) {
	u, err := s.url()
	if err != nil {
		return nil, err
	}
	switch {
	case strings.HasPrefix(u, "sqlite://"), strings.HasPrefix(u, "sqlite:"):
		path := strings.TrimPrefix(strings.TrimPrefix(u, "sqlite://"), "sqlite:")
		// The URL's query takes one parameter, `sync` (full or process).
		var mode sqlite.Sync
		if before, query, ok := strings.Cut(path, "?"); ok {
			path = before
			q, err := url.ParseQuery(query)
			if err != nil {
				return nil, usageError("store %q: %v", u, err)
			}
			for k := range q {
				if k != "sync" {
					return nil, usageError("store %q: unknown parameter %q (a sqlite store URL takes only sync=full or sync=process)", u, k)
				}
			}
			if mode, err = sqlite.ParseSync(strings.Join(q["sync"], ",")); err != nil {
				return nil, usageError("store %q: %v", u, err)
			}
		}
		if path == "" {
			return nil, usageError("store %q names no file (want sqlite:///path/portcullis.db)", u)
		}
		if _, err := s.dir(true); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("store %s: %w", path, err)
		}
		st, err := sqlite.Open(ctx, path, sqlite.Options{Logger: log, NoQuickCheck: s.perCall, Sync: mode})
		if err != nil {
			return nil, err
		}
		return st, nil
	case strings.HasPrefix(u, "postgres://"), strings.HasPrefix(u, "postgresql://"):
		// The schema that holds Portcullis's tables is named by the URL's
		// own `schema` parameter (default "portcullis"), the durability by
		// `sync` (full or process); they are not PostgreSQL connection
		// parameters, so they are taken out.
		dsn, schema, sync, err := splitParams(u)
		if err != nil {
			return nil, usageError("store %q: %v", redactURL(u), err)
		}
		mode, err := postgres.ParseSync(sync)
		if err != nil {
			return nil, usageError("store %q: %v", redactURL(u), err)
		}
		st, err := postgres.Open(ctx, dsn, postgres.Options{Logger: log, Schema: schema, Sync: mode})
		if err != nil {
			return nil, err
		}
		return st, nil
	}
	return nil, usageError("unknown store %q (want sqlite:///path or postgres://...)", redactURL(u))
}

// splitParams takes Portcullis's own query parameters, `schema` and
// `sync`, out of a PostgreSQL URL.
func splitParams(u string) (dsn, schema, sync string, err error) {
	pu, err := url.Parse(u)
	if err != nil {
		return "", "", "", err
	}
	q := pu.Query()
	schema, sync = q.Get("schema"), strings.Join(q["sync"], ",") // a repeated sync is refused
	q.Del("schema")
	q.Del("sync")
	pu.RawQuery = q.Encode()
	return pu.String(), schema, sync, nil
}

// redactURL hides a password in a store URL before it is shown.
func redactURL(u string) string {
	at := strings.LastIndex(u, "@")
	scheme := strings.Index(u, "://")
	if at < 0 || scheme < 0 || at < scheme {
		return u
	}
	creds := u[scheme+3 : at]
	if i := strings.Index(creds, ":"); i >= 0 {
		return u[:scheme+3] + creds[:i] + ":xxxxx" + u[at:]
	}
	return u
}

// secretFile reads a secret kept in the state directory, creating it with
// 32 random bytes (hex) and mode 0600 when it does not exist.
func secretFile(dir, name string) (string, error) {
	path := filepath.Join(dir, name)
	b, err := os.ReadFile(path)
	if err == nil {
		v := strings.TrimSpace(string(b))
		if v == "" {
			return "", fmt.Errorf("%s is empty", path)
		}
		return v, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	v := hex.EncodeToString(raw)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return secretFile(dir, name)
		}
		return "", err
	}
	if _, err := f.WriteString(v + "\n"); err != nil {
		f.Close()
		return "", err
	}
	return v, f.Close()
}

// readSecret reads a secret kept in the state directory; it does not
// create one.
func readSecret(dir, name string) (string, error) {
	path := filepath.Join(dir, name)
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	v := strings.TrimSpace(string(b))
	if v == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return v, nil
}

// cliLogger logs what a person running a command should see: warnings and
// errors, not routine events such as a migration.
func cliLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
