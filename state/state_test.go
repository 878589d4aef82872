package state_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/portcullis/portcullis/state"
)

func noHome() (string, error) { return "", errors.New("no home here") }

func TestDir(t *testing.T) {
	tmp := t.TempDir()
	home := func() (string, error) { return filepath.Join(tmp, "home"), nil }
	for _, tc := range []struct {
		name  string
		place state.Place
		want  string
	}{
		{"named", state.Place{State: filepath.Join(tmp, "s"), UserHome: noHome}, filepath.Join(tmp, "s")},
		{"XDG state home", state.Place{StateHome: filepath.Join(tmp, "xdg"), UserHome: noHome}, filepath.Join(tmp, "xdg", "portcullis")},
		{"home", state.Place{UserHome: home}, filepath.Join(tmp, "home", ".local", "state", "portcullis")},
	} {
		got, err := tc.place.Dir(false)
		if err != nil || got != tc.want {
			t.Errorf("Dir(%s) = %q, %v; want %q", tc.name, got, err, tc.want)
		}
		if _, err := os.Stat(got); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("Dir(%s, create=false) made the directory (%v)", tc.name, err)
		}
	}
	if _, err := (state.Place{UserHome: noHome}).Dir(false); err == nil || !strings.Contains(err.Error(), "pass --state DIR") {
		t.Errorf("Dir with no home = %v; want an error saying to pass --state", err)
	}
	d, err := state.Place{State: filepath.Join(tmp, "new", "state")}.Dir(true)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(d); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Errorf("Dir(create) made %v, %v; want a directory of mode 0700", fi, err)
	}
}

func TestURL(t *testing.T) {
	dir := t.TempDir()
	if u, err := (state.Place{State: dir, Store: "postgres://db/p"}).URL(); err != nil || u != "postgres://db/p" {
		t.Errorf("URL(store named) = %q, %v", u, err)
	}
	if u, err := (state.Place{State: dir}).URL(); err != nil || u != "sqlite://"+filepath.Join(dir, "portcullis.db") {
		t.Errorf("URL(state only) = %q, %v; want SQLite in the state directory", u, err)
	}
}

func TestMissing(t *testing.T) {
	dir := t.TempDir()
	if err := (state.Place{State: dir}).Missing(); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Missing(no store yet) = %v; want not found", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "portcullis.db"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := (state.Place{State: dir}).Missing(); err != nil {
		t.Errorf("Missing(store there) = %v", err)
	}
	if err := (state.Place{Store: "sqlite:" + filepath.Join(dir, "other.db")}).Missing(); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Missing(sqlite:path) = %v; want not found", err)
	}
	if err := (state.Place{Store: "postgres://db/p"}).Missing(); err != nil {
		t.Errorf("Missing(postgres) = %v; want nil", err)
	}
}

func TestOpen(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "state")
	st, err := state.Place{State: dir}.Open(ctx, state.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "portcullis.db")); err != nil {
		t.Errorf("the default store is not SQLite in the state directory: %v", err)
	}
	for _, tc := range []struct{ store, want string }{
		{"mysql://ana:s3cret@db/p", `unknown store "mysql://ana:xxxxx@db/p" (want sqlite:///path or postgres://...)`},
		{"sqlite://" + filepath.Join(dir, "p.db") + "?sync=normal", `sync "normal": want "full"`},
		{"postgres://ana:s3cret@127.0.0.1:1/p?sync=off", `store "postgres://ana:xxxxx@127.0.0.1:1/p?sync=off": `},
	} {
		st, err := state.Place{State: dir, Store: tc.store}.Open(ctx, state.OpenOptions{})
		var ue *state.URLError
		if !errors.As(err, &ue) || st != nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%s) = %v, %v; want a URLError saying %s", tc.store, st, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Open(%s) showed the password: %v", tc.store, err)
		}
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://ana:s3cret@db:5432/p": "postgres://ana:xxxxx@db:5432/p",
		"postgres://ana@db:5432/p":        "postgres://ana@db:5432/p",
		"sqlite:///var/lib/p.db":          "sqlite:///var/lib/p.db",
		"https://hooks.example/x":         "https://hooks.example/x",
	} {
		if got := state.RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q; want %q", in, got, want)
		}
	}
}
