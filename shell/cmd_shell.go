package shell

import (
	"path"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/syntax"
)

// Read-only everyday commands.
var safeNames = []string{
	"ls", "dir", "vdir", "cat", "tac", "nl", "head", "tail", "grep", "egrep", "fgrep", "rg", "ag",
	"ack", "wc", "pwd", "true", "false", ":", "cal", "whoami", "id", "groups", "uname", "uptime", "which",
	"whereis", "type", "file", "stat", "du", "df", "free", "ps", "pgrep", "pidof", "pstree", "top", "htop",
	"cut", "tr", "column", "paste", "join", "fold", "fmt", "expand", "unexpand", "comm", "cmp", "diff",
	"diff3", "sdiff", "basename", "dirname", "realpath", "readlink", "tree", "locate", "jq", "yq", "od", "hexdump",
	"strings", "md5sum", "sha1sum", "sha224sum", "sha256sum", "sha384sum", "sha512sum", "b2sum", "cksum", "shasum",
	"sum", "test", "[", "sleep", "seq", "nproc", "lscpu", "lsblk", "lsusb", "lspci", "lsof", "w", "who", "last",
	"dig", "nslookup", "host", "ping", "ping6", "traceroute", "tracepath", "whois", "info", "help", "history",
	"popd", "dirs", "set", "shopt", "read", "wait", "jobs", "fg", "bg", "exit", "return", "break", "continue",
	"shift", "getopts", "unset", "umask", "tput", "clear", "locale", "zcat", "zless", "zgrep", "bzcat", "xzcat",
	"expr", "bc", "factor", "numfmt", "fd", "fzf", "bat", "exa", "eza", "lsd", "delta", "tldr", "arch", "getconf",
	"tty", "ss", "netstat", "iostat", "vmstat", "mpstat", "dmesg", "ulimit", "pytest", "cmake",
	"export", "declare", "local", "readonly", "typeset", "let", "yes", "look", "iconv", "md5", "xmllint",
	"shellcheck", "gofmt", "nm", "objdump", "ldd", "readelf", "lsattr", "getfacl", "id", "logname", "users",
	"hostnamectl", "envsubst", "tsort", "split", "csplit", "shuf", "ruff", "mypy", "pylint",
	"flake8", "black", "isort", "eslint", "tsc", "golint", "staticcheck", "golangci-lint", "govulncheck",
}

// registerShell registers the handlers of the safe names, the shell's builtins and the wrappers (see loadHandlers).
func registerShell() {
	for _, n := range safeNames {
		safeSet[n] = struct{}{}
		if _, ok := handlers[n]; !ok {
			register(func(*cmd) {}, n) // a handler of its own (fd -x) wins
		}
	}
	register(echoCmd, "echo", "printf")
	register(catCmd, "cat")
	register(cdCmd, "cd", "pushd")
	register(encodeCmd, "base64", "base32", "basenc", "xxd", "uudecode", "rev")
	register(shellCmd, "sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "csh", "tcsh", "rbash", "yash")
	register(sudoCmd, "sudo", "doas", "pkexec", "sudoedit")
	register(suCmd, "su")
	register(runuserCmd, "runuser")
	register(envCmd, "env")
	register(timeoutCmd, "timeout", "gtimeout")
	register(niceCmd, "nice")
	register(skipCmd("", nil), "nohup", "builtin", "setsid", "unbuffer", "catchsegv", "torsocks", "proxychains",
		"proxychains4", "tsocks", "firejail", "busybox", "caffeinate", "chronic", "pv")
	register(skipCmd("ioe", []string{"--input", "--output", "--error"}), "stdbuf")
	register(ioniceCmd, "ionice")
	register(skipCmd("of", []string{"--output", "--format"}), "time")
	register(commandCmd, "command")
	register(skipCmd("a", nil), "exec")
	register(xargsCmd, "xargs")
	register(parallelCmd, "parallel")
	register(watchCmd, "watch")
	register(chrootCmd, "chroot")
	register(flockCmd, "flock")
	register(namespaceCmd, "unshare", "nsenter")
	register(traceCmd, "strace", "ltrace")
	register(scriptCmd, "script")
	register(sgCmd, "sg")
	register(evalCmd, "eval")
	register(sourceCmd, "source", ".")
	register(trapCmd, "trap")
	register(aliasCmd, "alias")
	register(func(c *cmd) {
		if len(c.argv) > 1 {
			c.moderate(scoreModerate, c.name+" changes how later commands are found")
		}
	}, "hash", "enable", "unalias")
	register(portcullisCmd, "portcullis")
	register(pagerCmd, "less", "more", "most", "man")
	register(outputFileCmd, "sort", "uniq")
	register(printenvCmd, "printenv")
}

func echoCmd(c *cmd) {
	if name := expandsSecret(c.argv[1:]); name != "" {
		c.danger(scoreDangerous, false, c.name+" prints the secret environment variable $"+name)
	}
	for _, f := range c.argv {
		if !f.static {
			return
		}
	}
	if out, ok := printed(strs(c.argv)); ok {
		c.flags.text, c.flags.hasText = out, true
	}
}

func catCmd(c *cmd) {
	ops := operands(c.args())
	if len(ops) == 0 && c.in.known && c.in.secret != "" {
		c.danger(scoreDangerous, false, "cat prints the secret environment variable $"+c.in.secret)
	}
	if (len(ops) == 0 || len(ops) == 1 && ops[0].s == "-") && c.in.known {
		c.flags.text, c.flags.hasText = c.in.text, true
	}
}

// cdCmd follows a literal cd, so relative paths after it resolve.
func cdCmd(c *cmd) {
	ops := operands(c.args())
	if len(ops) == 0 {
		c.w.cwd = "~"
		c.w.cwdMoved = true
		return
	}
	d := ops[0]
	if !d.static || d.s == "-" {
		c.w.cwd = ""
		c.w.cwdMoved = true
		return
	}
	if !insideWorkdir(d.s) {
		c.w.cwdMoved = true // somewhere outside the working directory
	}
	p := c.w.c.normPath(d.s)
	switch {
	case rooted(p):
		c.w.cwd = p
	case c.w.cwd != "":
		c.w.cwd = path.Join(c.w.cwd, p)
	}
}

// encodeCmd is safe, but decoding feeds hidden text into a pipeline.
func encodeCmd(c *cmd) {
	switch c.name {
	case "uudecode", "rev":
		c.flags.decoder = true
	case "xxd":
		c.flags.decoder = flagged(c.args(), "r", "--revert")
	default:
		c.flags.decoder = flagged(c.args(), "dD", "--decode")
	}
}

// shellCmd judges a shell: its -c code, its script, or the code it reads
// on stdin.
func shellCmd(c *cmd) {
	if c.name == "busybox" {
		c.run(c.argv[1:])
		return
	}
	opts, i := scanOpts(c.argv, 1, "oO", "--rcfile", "--init-file")
	if len(opts) > 0 && i == len(c.argv) && has(opts, "--version", "--help") {
		return
	}
	if has(opts, "-c", "--command") {
		if i >= len(c.argv) {
			c.moderate(scoreModerate, c.name+" -c without code")
			return
		}
		c.code(c.argv[i], c.name+" -c")
		return
	}
	if has(opts, "-n") && !has(opts, "-i") {
		return // noexec: reads the commands and checks their syntax, runs none
	}
	if has(opts, "-i") {
		c.flags.shellI = true
	}
	if i < len(c.argv) && !has(opts, "-s") && c.argv[i].s != "-" && c.argv[i].s != "/dev/stdin" {
		c.scriptFile(c.argv[i])
		return
	}
	c.stdinCode(sinkShell)
}

// scriptFile judges running a script file.
func (c *cmd) scriptFile(f field) {
	switch {
	case fetchesNetwork(f.word) && hasSubst(f.word):
		c.danger(scoreDangerHigh+5, false, c.name+" runs code downloaded from the network")
	case c.w.downloaded[path.Clean(f.s)]:
		c.danger(scoreDangerHigh+5, false, c.name+" runs "+f.s+", downloaded in the same command")
	case hasSubst(f.word):
		c.moderate(scoreModerateHigh, c.name+" runs code produced by a process substitution")
	default:
		c.moderate(scoreModerate, c.name+" runs the script "+f.s)
	}
}

// stdinCode judges a program that reads code (or SQL) on its standard input.
func (c *cmd) stdinCode(kind int) {
	what := c.name
	switch {
	case c.in.known:
		switch kind {
		case sinkShell:
			c.script = true
			c.w.nested(c.in.text)
		case sinkInterp:
			c.findings = append(c.findings, inlineCode(what, c.in.text))
		case sinkSQL:
			c.findings = append(c.findings, sqlFinding(what, c.in.text))
		}
	case c.in.net:
		c.danger(scoreDangerHigh+5, false, what+" runs code downloaded from the network")
	case c.in.file != "":
		if c.w.downloaded[path.Clean(c.in.file)] {
			c.danger(scoreDangerHigh+5, false, what+" runs "+c.in.file+", downloaded in the same command")
		} else {
			c.moderate(scoreModerate, what+" runs code from the file "+c.in.file)
		}
	case c.in.redir:
		c.moderate(scoreModerateHigh, what+" reads code from a redirected descriptor")
	case c.w.stage != nil:
		c.flags.shell, c.flags.sink, c.flags.sinkKind = true, what, kind
	case c.w.procOut > 0:
		c.moderate(scoreModerateHigh, what+" runs code written to a process substitution")
	case kind == sinkSQL:
		c.moderate(scoreModerate, "opens an interactive "+what+" session")
	default:
		c.moderate(scoreModerate, "starts an interactive "+what)
	}
}

func sudoCmd(c *cmd) {
	if c.name == "sudoedit" {
		c.danger(scoreDangerHigh, false, "edits files as root (sudoedit)")
		return
	}
	var opts []opt
	var i int
	switch c.name {
	case "doas":
		opts, i = scanOpts(c.argv, 1, "uC")
	case "pkexec":
		opts, i = scanOpts(c.argv, 1, "", "--user")
	default:
		opts, i = scanOpts(c.argv, 1, "CDghpRrtTUu", "--close-from", "--chdir", "--group", "--host", "--prompt",
			"--chroot", "--role", "--type", "--command-timeout", "--other-user", "--user")
	}
	for i < len(c.argv) && isAssignment(c.argv[i].s) {
		c.envAssign(c.argv[i])
		i++
	}
	if has(opts, "-e", "--edit") {
		c.danger(scoreDangerHigh, false, "edits files as root ("+c.name+" -e)")
		return
	}
	if i >= len(c.argv) {
		if has(opts, "-i", "-s", "--login", "--shell") {
			c.danger(scoreDangerHigh, false, "opens a root shell ("+c.name+")")
		} else {
			c.moderate(scoreModerate, c.name+" without a command: lists or refreshes privileges")
		}
		return
	}
	if u, ok := value(opts, "-u", "--user"); ok && u.val != "root" && u.val != "0" && u.val != "#0" {
		c.danger(scoreDangerous+5, false, "runs as another user ("+c.name+" -u "+u.val+")")
	} else {
		c.danger(scoreDangerous+5, false, "runs as root ("+c.name+")")
	}
	c.run(c.argv[i:])
}

// isAssignment reports whether a word is NAME=value.
func isAssignment(s string) bool {
	name, _, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return false
	}
	for i, r := range name {
		if r != '_' && !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// envAssign judges a NAME=value given to env or sudo.
func (c *cmd) envAssign(f field) {
	name, val, _ := strings.Cut(f.s, "=")
	if _, runs := envUses()[name]; runs {
		c.skipField(f)
		c.findings = append(c.findings, c.w.runsEnv(name, val, f.static)...)
		return
	}
	switch name {
	case "LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH", "DYLD_INSERT_LIBRARIES", "DYLD_LIBRARY_PATH":
		c.danger(scoreDangerous, false, "sets "+name+", loading other code into programs")
	case "PATH", "BASH_ENV", "ENV", "PROMPT_COMMAND", "GIT_SSH_COMMAND", "NODE_OPTIONS", "PERL5OPT", "PYTHONSTARTUP":
		c.moderate(scoreModerate, "sets "+name+", changing what the command runs")
	}
}

func suCmd(c *cmd) {
	for i, f := range c.argv[1:] {
		switch {
		case f.s == "-c" || f.s == "--command":
			if i+2 < len(c.argv) {
				c.danger(scoreDangerHigh, false, "runs as another user (su)")
				c.code(c.argv[i+2], "su -c")
				return
			}
		case strings.HasPrefix(f.s, "--command="):
			c.danger(scoreDangerHigh, false, "runs as another user (su)")
			c.code(field{s: strings.TrimPrefix(f.s, "--command="), id: f.id, static: f.static, word: f.word}, "su -c")
			return
		}
	}
	c.danger(scoreDangerHigh, false, "switches user (su)")
}

func runuserCmd(c *cmd) {
	opts, i := scanOpts(c.argv, 1, "ugGcsw", "--user", "--group", "--supp-group", "--command", "--shell", "--whitelist-environment")
	c.danger(scoreDangerous+5, false, "runs as another user (runuser)")
	if o, ok := value(opts, "-c", "--command"); ok {
		c.code(o.f, "runuser -c")
		return
	}
	if has(opts, "-u", "--user") {
		c.run(c.argv[i:])
	}
}

func envCmd(c *cmd) {
	opts, i := scanOpts(c.argv, 1, "uCSP", "--unset", "--chdir", "--split-string")
	for i < len(c.argv) && isAssignment(c.argv[i].s) {
		c.envAssign(c.argv[i])
		i++
	}
	if o, ok := value(opts, "-S", "--split-string"); ok {
		rest := append([]string{o.val}, strs(c.argv[i:])...)
		c.code(field{s: strings.Join(rest, " "), id: o.f.id, static: o.f.static, word: o.f.word}, "env -S")
		return
	}
	if i >= len(c.argv) {
		c.moderate(scoreModerate, "prints the environment, which may hold secrets")
		return
	}
	c.run(c.argv[i:])
}

func timeoutCmd(c *cmd) {
	_, i := scanOpts(c.argv, 1, "sk", "--signal", "--kill-after")
	if i+1 < len(c.argv) {
		c.run(c.argv[i+1:])
	}
}

func niceCmd(c *cmd) {
	_, i := scanOpts(c.argv, 1, "n", "--adjustment")
	c.run(c.argv[i:])
}

func ioniceCmd(c *cmd) {
	opts, i := scanOpts(c.argv, 1, "cnpPu", "--class", "--classdata", "--pid", "--pgid", "--uid")
	if has(opts, "-p", "-P", "-u", "--pid", "--pgid", "--uid") {
		c.moderate(scoreModerate, "changes the I/O priority of running processes")
		return
	}
	c.run(c.argv[i:])
}

// skipCmd builds the handler of a wrapper that runs its operands as a
// command after options.
func skipCmd(shortVal string, longVal []string) handler {
	return func(c *cmd) {
		_, i := scanOpts(c.argv, 1, shortVal, longVal...)
		c.run(c.argv[i:])
	}
}

func commandCmd(c *cmd) {
	opts, i := scanOpts(c.argv, 1, "")
	if has(opts, "-v", "-V") {
		return // looks a name up
	}
	c.run(c.argv[i:])
}

func xargsCmd(c *cmd) {
	_, i := scanOpts(c.argv, 1, "aEdILnPs", "--arg-file", "--delimiter", "--max-args", "--max-procs", "--max-chars", "--process-slot-var")
	c.run(c.argv[i:])
}

func parallelCmd(c *cmd) {
	_, i := scanOpts(c.argv, 1, "jSNnLaI", "--jobs", "--sshlogin", "--delay", "--timeout", "--arg-file")
	end := len(c.argv)
	for k := i; k < len(c.argv); k++ {
		if strings.HasPrefix(c.argv[k].s, ":::") {
			end = k
			break
		}
	}
	run := c.argv[i:end]
	if len(run) == 1 && strings.ContainsAny(run[0].s, " \t;|&") {
		c.code(run[0], "parallel")
		return
	}
	c.run(run)
}

func watchCmd(c *cmd) {
	opts, i := scanOpts(c.argv, 1, "nq", "--interval", "--equexit")
	if i >= len(c.argv) {
		return
	}
	if has(opts, "-x", "--exec") {
		c.run(c.argv[i:])
		return
	}
	rest := c.argv[i:]
	f := field{s: strings.Join(strs(rest), " "), id: rest[0].id, static: true, word: rest[0].word}
	for _, r := range rest {
		f.static = f.static && r.static
		c.skipField(r)
	}
	c.code(f, "watch")
}

func chrootCmd(c *cmd) {
	_, i := scanOpts(c.argv, 1, "", "--userspec", "--groups")
	c.danger(scoreDangerous, false, "runs in another root directory (chroot)")
	if i+1 < len(c.argv) {
		c.run(c.argv[i+1:])
	}
}

func flockCmd(c *cmd) {
	opts, i := scanOpts(c.argv, 1, "wEc", "--timeout", "--conflict-exit-code", "--command")
	if o, ok := value(opts, "-c", "--command"); ok {
		c.code(o.f, "flock -c")
		return
	}
	if i+1 < len(c.argv) {
		if c.argv[i+1].s == "-c" && i+2 < len(c.argv) {
			c.code(c.argv[i+2], "flock -c")
			return
		}
		c.run(c.argv[i+1:])
	}
}

func namespaceCmd(c *cmd) {
	_, i := scanOpts(c.argv, 1, "tSGw", "--target", "--setuid", "--setgid", "--wd")
	c.moderate(scoreModerate, c.name+" runs in other namespaces")
	c.run(c.argv[i:])
}

func traceCmd(c *cmd) {
	opts, i := scanOpts(c.argv, 1, "oepsuEIOSabXP", "--output")
	if has(opts, "-p") {
		c.danger(scoreDangerous, false, c.name+" attaches to a running process and can read its memory")
	} else {
		c.moderate(scoreModerate, c.name+" traces a program")
	}
	c.run(c.argv[i:])
}

func scriptCmd(c *cmd) {
	opts, _ := scanOpts(c.argv, 1, "cTBEmIO", "--command", "--timing", "--log-in", "--log-out", "--log-io", "--echo", "--logging-format")
	if o, ok := value(opts, "-c", "--command"); ok {
		c.code(o.f, "script -c")
		return
	}
	c.moderate(scoreModerate, "script starts a recorded shell")
}

func sgCmd(c *cmd) {
	_, i := scanOpts(c.argv, 1, "")
	if i+1 >= len(c.argv) {
		c.moderate(scoreModerate, "sg starts a shell with another group")
		return
	}
	k := i + 1
	if c.argv[k].s == "-c" {
		k++
	}
	if k < len(c.argv) {
		c.code(joinFields(c.argv[k:]), "sg")
	}
}

// joinFields joins fields into one, as a shell that runs its arguments
// joined with spaces sees them (eval, watch, ssh).
func joinFields(fs []field) field {
	if len(fs) == 0 {
		return field{id: -1, static: true}
	}
	f := field{id: fs[0].id, static: true, word: fs[0].word}
	parts := make([]string, len(fs))
	for i, x := range fs {
		parts[i] = x.s
		if !x.static {
			f.static = false
			f.word = x.word
		}
	}
	f.s = strings.Join(parts, " ")
	return f
}

func evalCmd(c *cmd) {
	if len(c.argv) < 2 {
		return
	}
	for _, f := range c.argv[1:] {
		c.skipField(f)
		if fetchesNetwork(f.word) {
			c.danger(scoreDangerHigh+5, false, "eval runs code downloaded from the network")
		}
	}
	c.code(joinFields(c.argv[1:]), "eval")
}

func sourceCmd(c *cmd) {
	ops := operands(c.args())
	if len(ops) == 0 {
		return
	}
	f := ops[0]
	switch {
	case f.s == "/dev/stdin" || f.s == "-":
		c.stdinCode(sinkShell)
	default:
		c.scriptFile(f)
	}
}

func trapCmd(c *cmd) {
	ops := operands(c.args())
	if len(ops) < 2 || ops[0].s == "-" {
		return
	}
	c.code(ops[0], "trap")
}

func aliasCmd(c *cmd) {
	for _, f := range c.args() {
		if _, val, ok := strings.Cut(f.s, "="); ok {
			c.moderate(scoreModerate, "defines an alias, so later commands may not be what they seem")
			c.skipField(f)
			c.w.nested(val)
		}
	}
}

// portcullisCmd judges Portcullis's own command line: reading commands are
// safe, the human-only ones (approve, deny, unblock, grants, approvals,
// tools accept, policy edits, hook install, audit prune) are blocked, exec
// and mcp are looked through.
func portcullisCmd(c *cmd) {
	sub, k := subcommand(c.argv, 1, "", "--state", "--policy", "--config", "--log-level", "--addr", "--listen")
	for _, a := range c.args() {
		if humanOnly()[a.s] && a.s != sub {
			c.block("runs `portcullis ... " + a.s + "`, which only a person may run: an agent must not approve itself")
			return
		}
	}
	switch sub {
	case "", "help", "version", "decide", "explain", "classify", "--help", "-h", "--version":
	case "policy":
		if s2, _ := subcommand(c.argv, k, ""); s2 != "lint" && s2 != "test" {
			c.block("runs `portcullis policy " + s2 + "`: an agent must not change its own policy")
		}
	case "audit":
		switch s2, _ := subcommand(c.argv, k, ""); s2 {
		case "verify":
		case "prune":
			c.block("runs `portcullis audit prune`: an agent must not remove rows of its own audit log")
		default:
			c.moderate(scoreModerate, "reads Portcullis's audit log")
		}
	case "tools":
		if s2, _ := subcommand(c.argv, k, ""); s2 == "accept" || s2 == "pin" || s2 == "trust" {
			c.block("runs `portcullis tools " + s2 + "`, which only a person may run: an agent must not approve itself")
		} else {
			c.moderate(scoreModerate, "runs `portcullis tools "+s2+"`")
		}
	case "exec", "mcp":
		_, i := scanOpts(c.argv, k, "", "--policy", "--state")
		c.run(c.argv[i:])
	case "hook":
		if s2, _ := subcommand(c.argv, k, ""); s2 == "install" {
			// It rewrites which policy and store the host's hook uses (and
			// Codex's trust of it): the agent's own gate.
			c.block("runs `portcullis hook install`: an agent must not change how its own calls are gated")
			return
		}
		c.moderate(scoreModerate, "starts `portcullis hook`")
	case "serve":
		c.moderate(scoreModerate, "starts `portcullis serve`")
	default:
		if humanOnly()[sub] {
			c.block("runs `portcullis " + sub + "`, which only a person may run: an agent must not approve itself")
			return
		}
		c.moderate(scoreModerate, "runs an unknown portcullis subcommand: "+sub)
	}
}

// humanOnly are Portcullis's subcommands for people only: approving,
// denying, unblocking, granting.
var humanOnly = sync.OnceValue(func() map[string]bool {
	return map[string]bool{
		"approve": true, "deny": true, "unblock": true, "grants": true, "grant": true, "revoke": true,
		"approvals": true, "token": true, "admin": true, "reset": true,
	}
})

// printenvCmd: printing the whole environment may show secrets; one
// variable is safe unless its name says it holds a secret.
func printenvCmd(c *cmd) {
	ops := operands(c.args())
	if len(ops) == 0 {
		c.moderate(scoreModerate, "prints the environment, which may hold secrets")
		return
	}
	for _, o := range ops {
		if secretName(o.s) {
			c.danger(scoreDangerous, false, "prints the secret environment variable "+o.s)
			return
		}
	}
}

// secretName reports whether a variable's name says it holds a secret.
func secretName(name string) bool {
	u := strings.ToUpper(name)
	return containsAnyOf(u, "SECRET", "TOKEN", "PASSWORD", "PASSWD", "API_KEY", "APIKEY", "PRIVATE_KEY", "CREDENTIAL", "ACCESS_KEY")
}

// pagerCmd: a pager only shows, but less's +!cmd and man -P run commands.
func pagerCmd(c *cmd) {
	args := c.args()
	for i, a := range args {
		run := ""
		switch {
		case c.name == "man" && (a.s == "-P" || a.s == "--pager" || a.s == "-H") && i+1 < len(args):
			run = args[i+1].s
		case c.name == "man" && (strings.HasPrefix(a.s, "--pager=") || strings.HasPrefix(a.s, "--html=")):
			_, run, _ = strings.Cut(a.s, "=")
		case strings.HasPrefix(a.s, "+"):
			cmdText, ok := strings.CutPrefix(strings.TrimLeft(a.s[1:], ":"), "!")
			if !ok {
				continue
			}
			run = cmdText
		default:
			continue
		}
		c.moderate(scoreModerate, c.name+" runs a command")
		c.skipField(a)
		c.w.nested(run)
	}
}

// outputFileCmd: sort -o FILE and uniq's second operand write a file.
func outputFileCmd(c *cmd) {
	args := c.args()
	if c.name == "uniq" {
		if ops := operands(args); len(ops) == 2 {
			c.w.checkTarget(ops[1], true, false)
			c.skipField(ops[1])
		}
		return
	}
	for i, a := range args {
		switch {
		case (a.s == "-o" || a.s == "--output") && i+1 < len(args):
			c.w.checkTarget(args[i+1], true, false)
			c.skipField(args[i+1])
		case strings.HasPrefix(a.s, "--output="):
			c.w.checkTarget(field{s: strings.TrimPrefix(a.s, "--output="), static: a.static, id: -1}, true, false)
			c.skipField(a)
		}
	}
}

// expandsSecret returns the name of a secret-named variable whose value one
// of the fields expands ($GITHUB_TOKEN, "${AWS_SECRET_ACCESS_KEY}",
// ${OPENAI_API_KEY:0:8}), or "". Its length (${#X}) or a test of whether
// it is set (${X:+set}) gives nothing away.
func expandsSecret(fs []field) string {
	for _, f := range fs {
		if f.static || f.word == nil {
			continue
		}
		if name := secretParam(f.word); name != "" {
			return name
		}
	}
	return ""
}

func secretParam(n syntax.Node) string {
	found := ""
	syntax.Walk(n, func(n syntax.Node) bool {
		switch p := n.(type) {
		case *syntax.CmdSubst, *syntax.ProcSubst, *syntax.ArithmExp:
			return false
		case *syntax.ParamExp:
			if found == "" && p.Param != nil && !p.Length && !p.Excl && !p.IsSet && secretName(p.Param.Value) &&
				(p.Exp == nil || p.Exp.Op != syntax.AlternateUnset && p.Exp.Op != syntax.AlternateUnsetOrNull) {
				found = p.Param.Value
			}
			return false
		}
		return found == ""
	})
	return found
}
