package cmdutil

import (
	"cmp"
	"context"
	"errors"
	"log/slog"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/state"

	"github.com/spf13/pflag"
)

// StateFlags are the flags every stateful command takes.
type StateFlags struct {
	State string
	Store string
	// PerCall is set by commands that open the store for one decision
	// (hook, exec): SQLite's whole-file quick_check is skipped at open.
	PerCall bool
}

// Register declares --state and --store.
func (s *StateFlags) Register(fs *pflag.FlagSet) {
	fs.StringVar(&s.State, "state", "", "state `directory` (default $PORTCULLIS_STATE, else $XDG_STATE_HOME/portcullis)")
	fs.StringVar(&s.Store, "store", "", "store `URL`: sqlite:///path/portcullis.db or postgres://..., ?sync=process to trade power-loss durability for speed (default $PORTCULLIS_STORE, else SQLite in the state directory)")
}

// Place is where the flags and the environment put the state.
func (s *StateFlags) Place(env *Env) state.Place {
	return state.Place{
		State: cmp.Or(s.State, env.Getenv("PORTCULLIS_STATE")), Store: cmp.Or(s.Store, env.Getenv("PORTCULLIS_STORE")),
		StateHome: env.Getenv("XDG_STATE_HOME"), UserHome: env.Home,
	}
}

// Dir returns the state directory, creating it (0700) when create is set.
func (s *StateFlags) Dir(env *Env, create bool) (string, error) { return s.Place(env).Dir(create) }

// URL returns the store URL in force.
func (s *StateFlags) URL(env *Env) (string, error) { return s.Place(env).URL() }

// Open opens the store the flags name; a store URL that cannot be read is
// a usage error.
func (s *StateFlags) Open(ctx context.Context, env *Env, log *slog.Logger) (portcullis.Store, error) {
	st, err := s.Place(env).Open(ctx, state.OpenOptions{Logger: log, PerCall: s.PerCall})
	if ue := (*state.URLError)(nil); errors.As(err, &ue) {
		return nil, UsageError("%v", ue)
	}
	return st, err
}

// OpenState opens the store and the state directory, created.
func (s *StateFlags) OpenState(ctx context.Context, env *Env, log *slog.Logger) (portcullis.Store, string, error) {
	st, err := s.Open(ctx, env, log)
	if err != nil {
		return nil, "", err
	}
	dir, err := s.Dir(env, true)
	if err != nil {
		st.Close()
		return nil, "", err
	}
	return st, dir, nil
}
