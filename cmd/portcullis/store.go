package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/postgres"
	"github.com/portcullis/portcullis/sqlite"
)

// stateFlags are the flags every stateful command takes.
type stateFlags struct {
	state string
	store string
	// perCall is set by commands that open the store for one decision
	// (hook, exec): SQLite's whole-file quick_check is skipped at open.
	perCall bool
}

func (s *stateFlags) register(fs *flag.FlagSet) {
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
	case strings.HasPrefix(u, "sqlite:"):
		path, opts, err := sqlite.ParseURL(u)
		if err != nil {
			return nil, usageError("store %q: %v", u, err)
		}
		if _, err := s.dir(true); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("store %s: %w", path, err)
		}
		opts.Logger, opts.NoQuickCheck = log, s.perCall
		st, err := sqlite.Open(ctx, path, opts)
		if err != nil {
			return nil, err
		}
		return st, nil
	case strings.HasPrefix(u, "postgres://"), strings.HasPrefix(u, "postgresql://"):
		dsn, opts, err := postgres.ParseURL(u)
		if err != nil {
			return nil, usageError("store %q: %v", redactURL(u), err)
		}
		opts.Logger = log
		st, err := postgres.Open(ctx, dsn, opts)
		if err != nil {
			return nil, err
		}
		return st, nil
	}
	return nil, usageError("unknown store %q (want sqlite:///path or postgres://...)", redactURL(u))
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
