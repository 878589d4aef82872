// Package state is where Portcullis keeps what outlives a process: the
// state directory, the Store a URL names in it (SQLite in the state
// directory by default, or PostgreSQL for several gateway replicas), and
// the secrets kept beside the store (tokens, the audit key).
//
// It reads neither the command line nor the environment: the caller says
// in a Place what the flags and the environment name.
package state

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/postgres"
	"github.com/portcullis/portcullis/sqlite"
)

// Place names the state directory and the store, as a person gave them.
type Place struct {
	// State is the state directory named (--state, else
	// $PORTCULLIS_STATE); "" means StateHome/portcullis.
	State string
	// Store is the store URL named (--store, else $PORTCULLIS_STORE); ""
	// means SQLite in the state directory.
	Store string
	// StateHome is $XDG_STATE_HOME; "" means ~/.local/state.
	StateHome string
	// UserHome finds the home directory (os.UserHomeDir), asked only when
	// neither State nor StateHome is given.
	UserHome func() (string, error)
}

// Dir returns the state directory, absolute, creating it (0700) when
// create is set.
func (p Place) Dir(create bool) (string, error) {
	d := p.State
	if d == "" {
		base := p.StateHome
		if base == "" {
			home, err := homeDir(p.UserHome)
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

func homeDir(f func() (string, error)) (string, error) {
	if f == nil {
		return "", errors.New("no home directory given")
	}
	return f()
}

// URL returns the store URL in force: Store, else the SQLite file
// portcullis.db in the state directory.
func (p Place) URL() (string, error) {
	if p.Store != "" {
		return p.Store, nil
	}
	d, err := p.Dir(false)
	if err != nil {
		return "", err
	}
	return "sqlite://" + filepath.Join(d, "portcullis.db"), nil
}

// OpenOptions tune Open.
type OpenOptions struct {
	Logger *slog.Logger
	// PerCall is set by a command that opens the store for one decision
	// (hook, exec): SQLite's whole-file quick_check is skipped at open.
	PerCall bool
}

// URLError is a store URL that names no store Open can open: a mistake of
// the person who gave it. Its URL has any password hidden.
type URLError struct {
	URL string
	Err error // nil: the scheme is unknown
}

func (e *URLError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("unknown store %q (want sqlite:///path or postgres://...)", e.URL)
	}
	return fmt.Sprintf("store %q: %v", e.URL, e.Err)
}

func (e *URLError) Unwrap() error { return e.Err }

// Open opens the store the place names. A SQLite file lives in the state
// directory unless the URL names another path; the state directory and
// the file's directory are created (0700). A URL Open cannot read is a
// *URLError.
func (p Place) Open(ctx context.Context, o OpenOptions) (portcullis.Store, error) {
	u, err := p.URL()
	if err != nil {
		return nil, err
	}
	switch {
	case strings.HasPrefix(u, "sqlite:"):
		path, opts, err := sqlite.ParseURL(u)
		if err != nil {
			return nil, &URLError{URL: u, Err: err}
		}
		if _, err := p.Dir(true); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("store %s: %w", path, err)
		}
		opts.Logger, opts.NoQuickCheck = o.Logger, o.PerCall
		st, err := sqlite.Open(ctx, path, opts)
		if err != nil {
			return nil, err
		}
		return st, nil
	case strings.HasPrefix(u, "postgres://"), strings.HasPrefix(u, "postgresql://"):
		dsn, opts, err := postgres.ParseURL(u)
		if err != nil {
			return nil, &URLError{URL: RedactURL(u), Err: err}
		}
		opts.Logger = o.Logger
		st, err := postgres.Open(ctx, dsn, opts)
		if err != nil {
			return nil, err
		}
		return st, nil
	}
	return nil, &URLError{URL: RedactURL(u)}
}

// Missing returns os.Stat's error for a SQLite store file that does not
// exist, for a command that reads only an existing store and must not
// create an empty one; nil for any other store, or when there is no URL.
func (p Place) Missing() error {
	u, err := p.URL()
	if err != nil || !strings.HasPrefix(u, "sqlite:") {
		return nil
	}
	_, err = os.Stat(strings.TrimPrefix(strings.TrimPrefix(u, "sqlite://"), "sqlite:"))
	return err
}

// RedactURL hides a password in a store URL before it is shown.
func RedactURL(u string) string {
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
