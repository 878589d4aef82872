package server_test

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/portcullis/portcullis/server"
)

func TestWitnessSources(t *testing.T) {
	if s, err := server.WitnessSources(nil, "missing-token-file", io.Discard); err != nil || s != nil {
		t.Errorf("WitnessSources(none) = %v, %v; want none, the token unread", s, err)
	}
	dir := t.TempDir()
	tok := filepath.Join(dir, "witness.token")
	if err := os.WriteFile(tok, []byte("wt\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "heads.jsonl")
	s, err := server.WitnessSources([]string{"https://witness.example/heads/gw1", file}, tok, io.Discard)
	if err != nil || len(s) != 2 {
		t.Fatalf("WitnessSources = %v, %v; want two", s, err)
	}
	for _, tt := range []struct {
		specs     []string
		tokenFile string
		want      string
	}{
		{[]string{file}, filepath.Join(dir, "missing"), "--witness-token-file: witness token: "},
		{[]string{"stderr"}, "", "--witness stderr: give the file the supervisor kept the lines in"},
		{[]string{""}, "", "--witness: "},
	} {
		if _, err := server.WitnessSources(tt.specs, tt.tokenFile, io.Discard); err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("WitnessSources(%q, %q) = %v; want %q", tt.specs, tt.tokenFile, err, tt.want)
		}
	}
}
