package mcpgw

import (
	"path/filepath"
	"strings"
)

// UpstreamName derives an upstream's name from its command: the first word
// that is not a launcher (npx, node, uvx, python, docker run ...) or a
// flag, without its npm scope and version. `npx -y
// @modelcontextprotocol/server-filesystem ~/work` is "server-filesystem".
// A command with no such word is "upstream".
func UpstreamName(cmd []string) string {
	launchers := map[string]bool{"npx": true, "node": true, "uvx": true, "uv": true, "run": true, "python": true, "python3": true,
		"deno": true, "bun": true, "bunx": true, "docker": true, "pnpm": true, "dlx": true, "yarn": true, "go": true, "java": true, "-jar": true}
	generic := map[string]bool{"index": true, "main": true, "server": true, "cli": true, "dist": true, "build": true, "lib": true, "src": true, "bin": true, "out": true}
	for _, w := range cmd {
		base := filepath.Base(w)
		if strings.HasPrefix(w, "-") || launchers[base] {
			continue
		}
		slashed := filepath.ToSlash(w)
		if i := strings.LastIndex(slashed, "node_modules/"); i >= 0 {
			// A script inside an npm package: the package names it.
			parts := strings.Split(slashed[i+len("node_modules/"):], "/")
			base = parts[0]
			if strings.HasPrefix(base, "@") && len(parts) > 1 {
				base = parts[1]
			}
		} else if generic[strings.TrimSuffix(base, filepath.Ext(base))] {
			// dist/index.js, build/main.py: the project's directory names it.
			d := filepath.Dir(w)
			for generic[filepath.Base(d)] && d != filepath.Dir(d) {
				d = filepath.Dir(d)
			}
			base = filepath.Base(d)
		}
		if i := strings.LastIndex(w, "/"); strings.HasPrefix(w, "@") && i > 0 {
			base = w[i+1:]
		}
		if i := strings.Index(base, "@"); i > 0 {
			base = base[:i]
		}
		base = strings.TrimSuffix(base, filepath.Ext(base))
		var b strings.Builder
		for _, r := range base {
			if r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
				b.WriteRune(r)
			}
		}
		if b.Len() > 0 {
			return b.String()
		}
	}
	return "upstream"
}
