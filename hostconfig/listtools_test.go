package hostconfig_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/portcullis/portcullis/hostconfig"
)

// TestListToolsFilesystem lists the tools of the real server-filesystem
// from npm (PORTCULLIS_TEST_E2E=1, after `npm ci --prefix e2e`) and
// classifies them: its reads are READ, its writes are not, and the ones
// with a path argument carry it.
func TestListToolsFilesystem(t *testing.T) {
	if os.Getenv("PORTCULLIS_TEST_E2E") != "1" {
		t.Skip("PORTCULLIS_TEST_E2E is not 1: the end-to-end tests need Node and `npm ci --prefix e2e`")
	}
	server, err := filepath.Abs("../e2e/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(server); err != nil {
		t.Fatalf("PORTCULLIS_TEST_E2E=1 but server-filesystem is missing: run `npm ci --prefix e2e` (%v)", err)
	}
	tools, err := hostconfig.ListTools(context.Background(), []string{"node", server, t.TempDir()}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]hostconfig.Classified{}
	for _, c := range hostconfig.ClassifyTools(tools) {
		got[c.Name] = c
	}
	for name, want := range map[string]string{"read_text_file": "READ", "list_directory": "READ", "search_files": "READ", "write_file": "UPDATE", "edit_file": "UPDATE", "create_directory": "CREATE"} {
		if c, ok := got[name]; !ok || c.Endpoint != want {
			t.Errorf("%s = %+v (listed %v); want %s", name, c, ok, want)
		}
	}
	if c := got["write_file"]; c.PathArg != "path" || !c.NotElevatable {
		t.Errorf("write_file = %+v; want pathArg path and not elevatable (the server says destructiveHint)", c)
	}
}
