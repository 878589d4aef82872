package server

import (
	"fmt"
	"io"
	"path/filepath"
)

// WriteBanner writes what `portcullis serve` tells its terminal once the
// server is open: the agents' tokens it created, where it serves MCP, the
// console and the metrics, with the files of their credentials, and each
// tool held because its definition changed since it was pinned.
func (s *Server) WriteBanner(w io.Writer) {
	for _, c := range s.CreatedTokens() {
		fmt.Fprintf(w, "portcullis: created the token of agent %s (0600); clients send it as Authorization: Bearer <token>\n", c)
	}
	base, dir := s.URL(), s.StateDir()
	fmt.Fprintf(w, "portcullis: serving MCP on %s/mcp (%s, %s); state in %s\n", base, count(s.Upstreams(), "upstream"), count(s.Agents(), "agent"), dir)
	fmt.Fprintf(w, "portcullis: console on %s/ (log in with the token in %s)\n", base, filepath.Join(dir, "admin.token"))
	fmt.Fprintf(w, "portcullis: metrics on %s/metrics (bearer token in %s)\n", base, filepath.Join(dir, "metrics.token"))
	for _, t := range s.Gateway().Tools() {
		if t.Changed {
			fmt.Fprintf(w, "portcullis: tool %s of upstream %s changed since it was pinned; calls are held until `portcullis tools accept %s %s`\n", t.Tool, t.Upstream, t.Upstream, t.Tool)
		}
	}
}

// count writes n with its regular noun: "1 upstream", "2 upstreams".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
