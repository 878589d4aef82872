package mcpgw_test

import (
	"testing"

	"github.com/portcullis/portcullis/mcpgw"
)

func TestUpstreamName(t *testing.T) {
	cases := []struct {
		cmd  []string
		want string
	}{
		{[]string{"npx", "-y", "@modelcontextprotocol/server-filesystem", "/home/me/work"}, "server-filesystem"},
		{[]string{"npx", "-y", "@modelcontextprotocol/server-everything@2026.8.31"}, "server-everything"},
		{[]string{"node", "/opt/e2e/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js", "/tmp"}, "server-filesystem"},
		{[]string{"node", "/srv/notes-server/dist/index.js"}, "notes-server"},
		{[]string{"uvx", "mcp-server-git", "--repository", "."}, "mcp-server-git"},
		{[]string{"./bin/my_server"}, "my_server"},
		{[]string{"python3", "-m"}, "upstream"},
	}
	for _, c := range cases {
		if got := mcpgw.UpstreamName(c.cmd); got != c.want {
			t.Errorf("UpstreamName(%q) = %q; want %q", c.cmd, got, c.want)
		}
	}
}
