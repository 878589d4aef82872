// Package secret reads and creates the secrets Portcullis keeps in files:
// the human and agent tokens, the metrics token, the audit key. A secret
// is the file's content without surrounding space; an empty one is an
// error, never a secret that anything matches.
package secret

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Read reads the secret kept in the file at path. Errors name the file:
// the operating system's own, or "PATH is empty".
func Read(path string) (string, error) {
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

// ReadToken reads a token kept in the file at path: a secret that travels
// in an HTTP header (Authorization: Bearer …), which cannot carry a line
// break, and in which a space would make two words. Such a file (often
// the wrong file named) is refused here, naming it, rather than met later
// as a malformed request.
func ReadToken(path string) (string, error) {
	v, err := Read(path)
	if err != nil {
		return "", err
	}
	if i := strings.IndexFunc(v, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }); i >= 0 {
		r, _ := utf8.DecodeRuneInString(v[i:])
		return "", fmt.Errorf("%s holds more than a token: a token is one word, and this file has %q inside it", path, r)
	}
	return v, nil
}

// ReadOrCreate reads the secret kept in the file at path, creating the
// file when it does not exist: 32 random bytes in hex, readable and
// writable by its owner only (0600). created says it was made now.
// Processes that start together agree on one secret, and none reads a
// half-written one: the secret is written to a file of its own first,
// then linked to path, which fails for all but the first.
func ReadOrCreate(path string) (v string, created bool, err error) {
	v, err = Read(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return v, false, err
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", false, err
	}
	v = hex.EncodeToString(raw[:])
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".new-*")
	if err != nil {
		return "", false, err
	}
	defer os.Remove(f.Name())
	_, err = f.WriteString(v + "\n")
	if err == nil {
		err = f.Chmod(0o600)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", false, err
	}
	switch err := link(f.Name(), path); {
	case errors.Is(err, fs.ErrExist):
		v, err = Read(path)
		return v, false, err
	case err != nil:
		// A file system without hard links: create the file exclusively
		// and write it, as before, where a process starting at the same
		// instant may find it still empty (and says so).
		if err := createExclusive(path, v); errors.Is(err, fs.ErrExist) {
			v, err = Read(path)
			return v, false, err
		} else if err != nil {
			return "", false, err
		}
		return v, true, nil
	}
	return v, true, nil
}

// link is os.Link; a test stands in a file system without hard links.
var link = os.Link

// createExclusive writes v to a new file at path, 0600, failing if the
// file exists.
func createExclusive(path, v string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(v + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
