package hostconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// readForUpdate reads a file to be rewritten: nil when it does not exist,
// and the mode to write it back with.
func readForUpdate(path string) ([]byte, fs.FileMode, error) {
	old, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, 0o644, nil
	case err != nil:
		return nil, 0, err
	}
	mode := fs.FileMode(0o644)
	if st, err := os.Stat(path); err == nil {
		mode = st.Mode().Perm()
	}
	return old, mode, nil
}

// writeWithBackup replaces path with updated atomically, keeping old (if
// any) as <path>.bak, and reports whether the file changed.
func writeWithBackup(path string, old, updated []byte, mode fs.FileMode) (bool, error) {
	if old != nil && bytes.Equal(updated, old) {
		return false, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return false, err
	}
	if old != nil {
		if err := os.WriteFile(path+".bak", old, mode); err != nil {
			return false, fmt.Errorf("back up %s: %w", path, err)
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(updated); err != nil {
		tmp.Close()
		return false, err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return false, err
	}
	if err := tmp.Close(); err != nil {
		return false, err
	}
	return true, os.Rename(tmp.Name(), path)
}

// indent lays a JSON document out as the clients' own files are: two
// spaces, a final newline.
func indent(doc []byte) ([]byte, error) {
	var out bytes.Buffer
	if err := json.Indent(&out, doc, "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// marshal encodes v without escaping <, > and &, which the clients' files
// keep as they are (a shell command often has them).
func marshal(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
