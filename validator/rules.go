package validator

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// maxRulesBytes bounds a rules file; a larger one is a fail-closed deny
// rather than a prompt the model may read only in part.
const maxRulesBytes = 256 << 10

// rulesFile is a rules file (the ground rules or the prose policy), read
// again whenever its modification time or size changes.
type rulesFile struct {
	path string

	mu      sync.Mutex
	loaded  bool
	modTime time.Time
	size    int64
	text    string
	hash    [sha256.Size]byte
	problem error // the file is empty or too large (as of modTime and size)
}

// load returns the file's text and its hash, or an error saying in words
// fit for a verdict why there are no rules (the file's base name only, never
// its directory).
func (r *rulesFile) load() (string, [sha256.Size]byte, error) {
	name := filepath.Base(r.path)
	if r.path == "" {
		return "", [sha256.Size]byte{}, errors.New("no rules file is configured for this mode")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	fi, err := os.Stat(r.path)
	if err != nil {
		r.loaded = false
		if errors.Is(err, fs.ErrNotExist) {
			return "", [sha256.Size]byte{}, fmt.Errorf("the rules file %s does not exist", name)
		}
		return "", [sha256.Size]byte{}, fmt.Errorf("the rules file %s cannot be read", name)
	}
	if r.loaded && fi.ModTime().Equal(r.modTime) && fi.Size() == r.size {
		return r.text, r.hash, r.problem
	}
	r.loaded = false
	if !fi.Mode().IsRegular() {
		return "", [sha256.Size]byte{}, fmt.Errorf("the rules file %s is not a regular file", name)
	}
	f, err := os.Open(r.path)
	if err != nil {
		return "", [sha256.Size]byte{}, fmt.Errorf("the rules file %s cannot be read", name)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxRulesBytes+1))
	if err != nil {
		return "", [sha256.Size]byte{}, fmt.Errorf("the rules file %s cannot be read", name)
	}
	r.loaded, r.modTime, r.size = true, fi.ModTime(), fi.Size()
	r.text, r.hash, r.problem = string(b), sha256.Sum256(b), nil
	switch {
	case len(b) > maxRulesBytes:
		r.problem = fmt.Errorf("the rules file %s is larger than %d KiB", name, maxRulesBytes>>10)
	case strings.TrimSpace(r.text) == "":
		r.problem = fmt.Errorf("the rules file %s is empty", name)
	}
	if r.problem != nil {
		r.text = ""
	}
	return r.text, r.hash, r.problem
}
