package secret

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "admin.token")
	if err := os.WriteFile(tok, []byte("  tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if v, err := Read(tok); err != nil || v != "tok" {
		t.Errorf("Read = %q, %v; want tok", v, err)
	}
	if v, err := ReadToken(tok); err != nil || v != "tok" {
		t.Errorf("ReadToken = %q, %v; want tok", v, err)
	}
	empty := filepath.Join(dir, "empty.token")
	if err := os.WriteFile(empty, []byte(" \n\t"), 0o600); err != nil {
		t.Fatal(err)
	}
	if v, err := Read(empty); err == nil || err.Error() != empty+" is empty" {
		t.Errorf("Read(empty) = %q, %v; want it refused, naming the file", v, err)
	}
	for name, content := range map[string]string{
		"two-lines.token": "tok\nsecond line\n",
		"words.token":     "policy: x",
		"tab.token":       "to\tk",
		"nul.token":       "to\x00k",
		"nbsp.token":      "to\u00a0k",
	} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if v, err := ReadToken(p); err == nil || !strings.HasPrefix(err.Error(), p+" holds more than a token") {
			t.Errorf("ReadToken(%s) = %q, %v; want it refused, naming the file", name, v, err)
		}
		// A key is not sent anywhere: what it holds is its own.
		if v, err := Read(p); err != nil || v != strings.TrimSpace(content) {
			t.Errorf("Read(%s) = %q, %v; want the content", name, v, err)
		}
	}
	none := filepath.Join(dir, "none.token")
	if _, err := Read(none); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Read(missing) = %v; want not found", err)
	}
	if _, err := os.Stat(none); !errors.Is(err, fs.ErrNotExist) {
		t.Error("Read created the file")
	}
}

func TestReadOrCreate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "metrics.token")
	v, created, err := ReadOrCreate(path)
	if err != nil || !created || len(v) != 64 {
		t.Fatalf("ReadOrCreate of a new file = %q, %v, %v; want 64 hex digits, created", v, created, err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the new secret's file: %v, %v; want mode 0600", fi, err)
	}
	again, created, err := ReadOrCreate(path)
	if err != nil || created || again != v {
		t.Errorf("ReadOrCreate again = %q, %v, %v; want %q, not created", again, created, err, v)
	}
	empty := filepath.Join(dir, "empty.token")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, _, err := ReadOrCreate(empty); err == nil {
		t.Errorf("ReadOrCreate of an empty file = %q; want it refused, not replaced", got)
	}
	if _, _, err := ReadOrCreate(filepath.Join(dir, "no-such-dir", "x")); err == nil {
		t.Error("ReadOrCreate in a missing directory succeeded")
	}
}

// Processes that start together must end up with one secret.
func TestReadOrCreateConcurrently(t *testing.T) {
	path := filepath.Join(t.TempDir(), "admin.token")
	const n = 16
	got := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], _, errs[i] = ReadOrCreate(path)
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || got[i] != got[0] {
			t.Fatalf("caller %d: %q, %v; want %q like caller 0", i, got[i], errs[i], got[0])
		}
	}
	// Nothing but the secret is left in the directory.
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil || len(entries) != 1 || entries[0].Name() != "admin.token" {
		t.Errorf("the directory holds %v (%v); want admin.token alone", entries, err)
	}
}

// On a file system without hard links the secret is still made, 0600,
// and read back the same.
func TestReadOrCreateWithoutHardLinks(t *testing.T) {
	link = func(string, string) error { return &os.LinkError{Op: "link", Err: errors.ErrUnsupported} }
	t.Cleanup(func() { link = os.Link })
	dir := t.TempDir()
	path := filepath.Join(dir, "admin.token")
	v, created, err := ReadOrCreate(path)
	if err != nil || !created || len(v) != 64 {
		t.Fatalf("ReadOrCreate without hard links = %q, %v, %v; want a new secret", v, created, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the secret's file: %v, %v; want mode 0600", fi, err)
	}
	if again, created, err := ReadOrCreate(path); err != nil || created || again != v {
		t.Errorf("ReadOrCreate again = %q, %v, %v; want %q", again, created, err, v)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the directory holds %v; want the secret alone", entries)
	}
}
