package client_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/portcullis/portcullis/client"
)

func TestReadToken(t *testing.T) {
	dir := t.TempDir()
	good, empty := filepath.Join(dir, "good"), filepath.Join(dir, "empty")
	if err := os.WriteFile(good, []byte("  tok_1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if tok, err := client.ReadToken(good); err != nil || tok != "tok_1" {
		t.Errorf("ReadToken(good) = %q, %v; want tok_1", tok, err)
	}
	if _, err := client.ReadToken(empty); err == nil || err.Error() != "read the agent token: "+empty+" is empty" {
		t.Errorf("ReadToken(empty) = %v; want it to say the file is empty", err)
	}
	if _, err := client.ReadToken(filepath.Join(dir, "none")); err == nil || !strings.HasPrefix(err.Error(), "read the agent token: ") {
		t.Errorf("ReadToken(missing) = %v; want a read error", err)
	}
}
