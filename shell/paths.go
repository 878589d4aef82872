package shell

import (
	"path"
	"strings"
	"sync"
)

// builtinProtected are Portcullis's default state directories, protected
// whatever the options say.
var builtinProtected = []string{"~/.local/state/portcullis", "$XDG_STATE_HOME/portcullis"}

// protectedPath is one of Portcullis's own files or directories.
type protectedPath struct {
	norm  string
	comps []string
}

func newProtectedPath(p, home string) protectedPath {
	n := normPath(p, home)
	return protectedPath{norm: n, comps: splitPath(n)}
}

// mayBeProtected reports whether s holds the last component of some
// protected path, as every path naming one (or one beneath it) does.
func (c *Classifier) mayBeProtected(s string) bool {
	for _, name := range c.protectedNames {
		if strings.Contains(s, name) {
			return true
		}
	}
	return false
}

func cleanHome(h string) string {
	h = strings.TrimSpace(h)
	if h == "" || h == "/" {
		return ""
	}
	return path.Clean(h)
}

// normPath cleans a path and writes the home directory as ~, whether it was
// written as ~, $HOME or in full.
func normPath(s, home string) string {
	switch {
	case s == "":
		return ""
	case s == "$HOME":
		s = "~"
	case strings.HasPrefix(s, "$HOME/"):
		s = "~" + s[len("$HOME"):]
	case home != "" && (s == home || strings.HasPrefix(s, home+"/")):
		s = "~" + s[len(home):]
	}
	return path.Clean(s)
}

func (c *Classifier) normPath(s string) string { return normPath(s, c.home) }

func splitPath(p string) []string {
	if p == "/" {
		return []string{""}
	}
	return strings.Split(p, "/")
}

// rooted reports whether a normalized path does not depend on the working
// directory.
func rooted(p string) bool {
	return strings.HasPrefix(p, "/") || strings.HasPrefix(p, "~") || strings.HasPrefix(p, "$")
}

// pathCandidates returns the paths an argument may name: itself, the value
// of --opt=value or of=value, curl's @file, a docker volume's host side.
func pathCandidates(s string) []string {
	out := []string{s}
	if i := strings.IndexByte(s, '='); i >= 0 && i+1 < len(s) {
		v := s[i+1:]
		out = append(out, v)
		if strings.HasPrefix(v, "@") {
			out = append(out, v[1:])
		}
	}
	if strings.HasPrefix(s, "@") && len(s) > 1 {
		out = append(out, s[1:])
	}
	if i := strings.IndexByte(s, ':'); i > 0 && !strings.Contains(s, "://") {
		out = append(out, s[:i])
	}
	return out
}

// compEq compares one path component with a name, as a glob pattern when
// the component came from an unquoted glob.
func compEq(comp, name string, glob bool) bool {
	if comp == name {
		return true
	}
	if !glob || !strings.ContainsAny(comp, "*?[") {
		return false
	}
	ok, err := path.Match(comp, name)
	return ok || err != nil && comp == "*"
}

// under reports whether path components p name the path q or something
// beneath it.
func under(p, q []string, glob bool) bool {
	if len(p) < len(q) {
		return false
	}
	for i := range q {
		if !compEq(p[i], q[i], glob) {
			return false
		}
	}
	return true
}

// touchesProtected reports whether a field names one of Portcullis's own
// files, or a path beneath one.
func (w *walker) touchesProtected(f field) bool {
	if !f.glob && w.cwd == "" && !w.c.mayBeProtected(f.s) {
		return false
	}
	for _, cand := range pathCandidates(f.s) {
		if w.protectedPath(cand, f.glob) {
			return true
		}
	}
	return false
}

func (w *walker) protectedPath(s string, glob bool) bool {
	p := w.c.normPath(s)
	if p == "" || p == "." {
		return false
	}
	pc := splitPath(p)
	var joined []string
	if !rooted(p) && w.cwd != "" {
		joined = splitPath(path.Join(w.cwd, p))
	}
	for _, pp := range w.c.protected {
		if rooted(p) {
			if under(pc, pp.comps, glob) {
				return true
			}
			continue
		}
		if joined != nil && under(joined, pp.comps, glob) {
			return true
		}
		// A relative path of two or more components that ends a protected
		// path and goes on beneath it: state/portcullis/grants.db.
		for j := min(len(pc), len(pp.comps)); j >= 2; j-- {
			if under(pc[:j], pp.comps[len(pp.comps)-j:], glob) {
				return true
			}
		}
	}
	return false
}

// isSecret reports whether a field names a file that holds secrets.
func (w *walker) isSecret(f field) bool {
	if !f.glob && w.cwd == "" && (!strings.ContainsAny(f.s, "./") && !strings.Contains(f.s, "id_") || !containsAnyOf(f.s, secretMarkers...)) {
		return false
	}
	for _, cand := range pathCandidates(f.s) {
		p := w.c.normPath(cand)
		if secretPath(p, f.glob) {
			return true
		}
		if !rooted(p) && w.cwd != "" && secretPath(w.c.normPath(path.Join(w.cwd, p)), f.glob) {
			return true
		}
	}
	return false
}

// secretMarkers are substrings every secret path holds; a path without any
// of them is not checked further.
var secretMarkers = []string{".ssh", ".gnupg", ".aws", ".azure", ".password-store", ".kube", ".config", ".docker",
	"shadow", "master.passwd", "sudoers", "ssh_host_", "env", "netrc", "pgpass", "credentials", "npmrc", "pypirc",
	"vault-token", "my.cnf", ".boto", "s3cfg", "id_", ".key", "history", "keyrings", "logins", "key4", "Login", "ookies"}

// readsDisk returns the raw disk device a field names (if=/dev/sda), or "".
func (w *walker) readsDisk(f field) string {
	if !strings.Contains(f.s, "/dev/") {
		return ""
	}
	for _, cand := range pathCandidates(f.s) {
		if p := w.c.normPath(cand); isDiskDevice(p) {
			return p
		}
	}
	return ""
}

var secretDirs = sync.OnceValue(func() map[string]bool {
	return map[string]bool{".ssh": true, ".gnupg": true, ".aws": true, ".azure": true, ".password-store": true, ".kube": true}
})

var secretNames = sync.OnceValue(func() map[string]bool {
	return map[string]bool{
		".netrc": true, ".pgpass": true, ".git-credentials": true, ".npmrc": true, ".pypirc": true,
		".vault-token": true, "credentials.tfrc.json": true, ".my.cnf": true, ".boto": true, ".s3cfg": true,
		".envrc": true, ".bash_history": true, ".zsh_history": true, ".psql_history": true, ".mysql_history": true,
		".python_history": true, ".node_repl_history": true, "logins.json": true, "key4.db": true, "Login Data": true,
		"Cookies": true, "cookies.sqlite": true,
		"id_rsa": true, "id_dsa": true, "id_ecdsa": true, "id_ed25519": true,
	}
})

var envExamples = sync.OnceValue(func() map[string]bool {
	return map[string]bool{".env.example": true, ".env.sample": true, ".env.template": true, ".env.dist": true, ".env.defaults": true, ".env.schema": true}
})

func secretPath(p string, glob bool) bool {
	if p == "" || p == "." {
		return false
	}
	comps := splitPath(p)
	base := comps[len(comps)-1]
	next := func(i int) string {
		if i+1 < len(comps) {
			return comps[i+1]
		}
		return ""
	}
	for i, c := range comps {
		// The secret directory itself: cp -r ~/.ssh, tar ~/.aws.
		if i == len(comps)-1 && secretDirs()[c] {
			return true
		}
		n := next(i)
		switch {
		case compEq(c, ".ssh", glob) && n != "":
			if privateKeyName(n, glob) {
				return true
			}
		case compEq(c, ".aws", glob) && n != "":
			if compEq(n, "credentials", glob) || compEq(n, "sso", glob) || compEq(n, "cli", glob) {
				return true
			}
		case compEq(c, ".config", glob) && n != "":
			if compEq(n, "gcloud", glob) {
				return true
			}
			if compEq(n, "gh", glob) && i+2 < len(comps) && compEq(comps[i+2], "hosts.yml", glob) {
				return true
			}
		case compEq(c, ".kube", glob) && n != "":
			if compEq(n, "config", glob) {
				return true
			}
		case compEq(c, ".docker", glob) && n != "":
			if compEq(n, "config.json", glob) {
				return true
			}
		case (compEq(c, ".gnupg", glob) || compEq(c, ".azure", glob) || compEq(c, ".password-store", glob) || compEq(c, "keyrings", glob)) && n != "":
			return true
		case c == "etc" && n != "":
			switch {
			case compEq(n, "shadow", glob), compEq(n, "gshadow", glob), compEq(n, "master.passwd", glob),
				compEq(n, "sudoers", glob) && i+2 == len(comps), compEq(n, "shadow-", glob):
				return true
			case n == "ssh" && i+2 < len(comps):
				k := comps[i+2]
				if strings.HasPrefix(k, "ssh_host_") && strings.HasSuffix(k, "_key") || glob && compEq(k, "ssh_host_rsa_key", glob) {
					return true
				}
			}
		case c == "proc" && i+2 < len(comps):
			if compEq(comps[i+2], "environ", glob) {
				return true
			}
		}
	}
	if secretNames()[base] || glob && (compEq(base, "id_rsa", glob) || compEq(base, ".netrc", glob)) {
		return true
	}
	if strings.HasSuffix(base, ".key") && !strings.HasSuffix(base, ".pub.key") {
		return true
	}
	return envFile(base, glob)
}

func privateKeyName(n string, glob bool) bool {
	if glob && strings.ContainsAny(n, "*?[") {
		return compEq(n, "id_rsa", true) || compEq(n, "id_ed25519", true)
	}
	if strings.HasSuffix(n, ".pub") {
		return false
	}
	return strings.HasPrefix(n, "id_") || n == "identity" || strings.HasSuffix(n, ".pem") || strings.HasSuffix(n, ".key")
}

// envFile reports whether a file name is a dotenv file: .env, .env.local,
// prod.env — but not .env.example and its kin.
func envFile(base string, glob bool) bool {
	if envExamples()[base] {
		return false
	}
	if base == ".env" || strings.HasPrefix(base, ".env.") || strings.HasSuffix(base, ".env") && len(base) > len(".env") {
		return true
	}
	return glob && compEq(base, ".env", true)
}

func isNetDevice(p string) bool {
	return strings.HasPrefix(p, "/dev/tcp/") || strings.HasPrefix(p, "/dev/udp/")
}

func harmlessDevice(p string) bool {
	switch p {
	case "/dev/null", "/dev/zero", "/dev/stdout", "/dev/stderr", "/dev/stdin", "/dev/tty", "/dev/random", "/dev/urandom", "/dev/full":
		return true
	}
	return strings.HasPrefix(p, "/dev/fd/") || strings.HasPrefix(p, "/dev/pts/")
}

var diskPrefixes = []string{"/dev/sd", "/dev/hd", "/dev/vd", "/dev/xvd", "/dev/nvme", "/dev/mmcblk", "/dev/disk", "/dev/rdisk", "/dev/dm-", "/dev/md", "/dev/mapper/", "/dev/mem", "/dev/kmem", "/dev/port", "/dev/root", "/dev/sr", "/dev/nbd"}

func isDiskDevice(p string) bool {
	for _, pre := range diskPrefixes {
		if strings.HasPrefix(p, pre) {
			return true
		}
	}
	return false
}

var systemDirs = sync.OnceValue(func() map[string]bool {
	return map[string]bool{
		"etc": true, "boot": true, "bin": true, "sbin": true, "usr": true, "lib": true, "lib32": true, "lib64": true,
		"libx32": true, "sys": true, "proc": true, "root": true, "var": true, "dev": true, "System": true, "Library": true,
	}
})

// isSystemPath reports whether an absolute path lies in the operating
// system's own directories (not /tmp, /var/tmp, /home or the user's).
func isSystemPath(p string) bool {
	if !strings.HasPrefix(p, "/") || p == "/" {
		return false
	}
	comps := strings.Split(p[1:], "/")
	if comps[0] == "private" && len(comps) > 1 {
		comps = comps[1:]
	}
	if !systemDirs()[comps[0]] {
		return false
	}
	if comps[0] == "var" && len(comps) > 1 && (comps[1] == "tmp" || comps[1] == "folders") {
		return false
	}
	return true
}

var startupNames = sync.OnceValue(func() map[string]bool {
	return map[string]bool{
		".bashrc": true, ".bash_profile": true, ".bash_login": true, ".bash_logout": true, ".profile": true,
		".zshrc": true, ".zprofile": true, ".zshenv": true, ".zlogin": true, ".zlogout": true, ".xinitrc": true,
		".xprofile": true, "authorized_keys": true, "authorized_keys2": true, ".gitconfig": true, "config.fish": true,
	}
})

// isStartupFile reports whether a path is read at login or by ssh, so that
// writing it plants code or access for later.
func isStartupFile(p string) bool {
	comps := splitPath(p)
	base := comps[len(comps)-1]
	if startupNames()[base] {
		return true
	}
	n := len(comps)
	if n >= 2 && comps[n-2] == ".ssh" && (base == "rc" || base == "config") {
		return true
	}
	for i, c := range comps {
		if c == "LaunchAgents" || c == "LaunchDaemons" || c == "autostart" && i > 0 && comps[i-1] == ".config" {
			return true
		}
		if c == "crontabs" || c == "cron.d" {
			return true
		}
		if c == "config" && i > 0 && comps[i-1] == ".git" && i+1 == len(comps) {
			return true // core.fsmonitor, core.hooksPath and aliases run commands
		}
		if c == "hooks" && i > 0 && comps[i-1] == ".git" && i+1 < len(comps) {
			return true // git runs it at the next commit, checkout or push
		}
	}
	return false
}

var topDirs = sync.OnceValue(func() map[string]bool {
	return map[string]bool{
		"bin": true, "boot": true, "dev": true, "etc": true, "home": true, "lib": true, "lib64": true, "opt": true,
		"proc": true, "root": true, "sbin": true, "srv": true, "sys": true, "usr": true, "var": true, "mnt": true,
		"media": true, "Users": true, "System": true, "Library": true, "Applications": true,
	}
})

// isCritical reports whether deleting a path destroys a system or a home:
// /, ~, /etc, ., *, and the like.
func isCritical(p string) bool {
	switch p {
	case "/", "/*", "~", "~/*", "~/.*", ".", "..", "*", ".*", "./*", "../*", "/.*":
		return true
	}
	p = strings.TrimSuffix(p, "/*")
	if strings.HasPrefix(p, "/") && !strings.Contains(p[1:], "/") && topDirs()[p[1:]] {
		return true
	}
	return p == "~" || p == "$HOME"
}
