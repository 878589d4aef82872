package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/server"
	"github.com/portcullis/portcullis/state"

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

// place is where the flags and the environment put the state.
func (s *stateFlags) place() state.Place {
	return state.Place{
		State: firstNonEmpty(s.state, os.Getenv("PORTCULLIS_STATE")), Store: firstNonEmpty(s.store, os.Getenv("PORTCULLIS_STORE")),
		StateHome: os.Getenv("XDG_STATE_HOME"), UserHome: os.UserHomeDir,
	}
}

// dir returns the state directory, creating it (0700) when create is set.
func (s *stateFlags) dir(create bool) (string, error) { return s.place().Dir(create) }

// url returns the store URL in force.
func (s *stateFlags) url() (string, error) { return s.place().URL() }

// open opens the store the flags name; a store URL that cannot be read is
// a usage error.
func (s *stateFlags) open(ctx context.Context, log *slog.Logger) (portcullis.Store, error) {
	st, err := s.place().Open(ctx, state.OpenOptions{Logger: log, PerCall: s.perCall})
	if ue := (*state.URLError)(nil); errors.As(err, &ue) {
		return nil, usageError("%v", ue)
	}
	return st, err
}

// redactURL hides a password in a store URL before it is shown.
func redactURL(u string) string { return state.RedactURL(u) }

// secretFile reads a secret kept in the state directory, creating it
// (0600) when it does not exist (server.SecretFile).
func secretFile(dir, name string) (string, error) { return server.SecretFile(dir, name) }

// readSecret reads a secret kept in the state directory; it does not
// create one.
func readSecret(dir, name string) (string, error) { return state.ReadSecret(dir, name) }

// cliLogger logs what a person running a command should see: warnings and
// errors, not routine events such as a migration.
func cliLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
