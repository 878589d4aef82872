package shell

import (
	"path"
	"slices"
	"strings"
	"sync"
)

// cmd is one layer of a simple command: sudo rm -rf x has the layers
// [sudo rm -rf x] and [rm -rf x]. A handler judges its layer and, for a
// wrapper, names the command it runs in next.
type cmd struct {
	w        *walker
	argv     []field
	name     string // argv[0]'s base name
	in       stdin
	findings []finding
	next     []field   // the command a wrapper runs
	script   bool      // its code was walked as shell code; not itself a command to report
	canon    []string  // argv without global options (git -C x push is git push), for rules
	flags    stageInfo // what it does, for judging a pipeline
	sh       *simpleCtx
	words    []string // argv's values, once asked for
}

// values returns the layer's argv as strings.
func (c *cmd) values() []string {
	if c.words == nil {
		c.words = strs(c.argv)
	}
	return c.words
}

// simpleCtx is shared by the layers of one simple command.
type simpleCtx struct {
	cmdPos   []bool // argv positions holding a command name
	skip     []bool // positions not to check as paths (code walked elsewhere)
	noSecret []bool // positions naming a key used for its purpose (ssh -i)
	meta     bool   // the command only looks at files' names, not their contents
}

type handler func(c *cmd)

// handlers maps command names to their handlers, and safeSet holds
// safeNames. Both are built on first use, by loadHandlers, so that a
// process that never judges a shell command (a hook asking a gateway, say)
// does not build them at start; read them only after calling
// loadHandlers (lookup, hasHandler and isSafe do).
var (
	handlers map[string]handler
	safeSet  map[string]struct{}
)

// loadHandlers builds handlers and safeSet once. The order of the
// registrations matters: a later one wins (a safe name's no-op handler
// gives way to one registered before it; registerSystem comes after
// registerShell and overrides it).
func loadHandlers() { handlersOnce.Do(buildHandlers) }

var handlersOnce sync.Once

func buildHandlers() {
	handlers = make(map[string]handler, 1024)
	safeSet = make(map[string]struct{}, len(safeNames))
	registerCloud()
	registerData()
	registerFiles()
	registerGit()
	registerNet()
	registerPowerShell()
	registerShell()
	registerSystem()
}

// register adds a handler; only loadHandlers calls it.
func register(h handler, names ...string) {
	for _, n := range names {
		handlers[n] = h
	}
}

// hasHandler says whether name has a handler of its own (no aliasing).
func hasHandler(name string) bool {
	loadHandlers()
	_, ok := handlers[name]
	return ok
}

// isSafe says whether name is one of safeNames.
func isSafe(name string) bool {
	loadHandlers()
	_, ok := safeSet[name]
	return ok
}

// lookup finds the handler of a command name: python3.12 is python,
// mkfs.ext4 is mkfs.
func lookup(name string) (handler, bool) {
	loadHandlers()
	if h, ok := handlers[name]; ok {
		return h, true
	}
	if strings.HasPrefix(name, "mkfs.") || strings.HasPrefix(name, "mke2fs") {
		return handlers["mkfs"], true
	}
	if t := strings.TrimRight(name, "0123456789.-"); t != name && t != "" {
		if h, ok := handlers[t]; ok {
			return h, true
		}
	}
	// PowerShell and cmd.exe do not care about case (Remove-Item, RD), and
	// a Windows program may be named with its .exe.
	low := strings.ToLower(name)
	if low != name {
		if h, ok := handlers[low]; ok {
			return h, true
		}
	}
	if t, ok := strings.CutSuffix(low, ".exe"); ok && t != "" {
		if h, ok := handlers[t]; ok {
			return h, true
		}
	}
	return nil, false
}

// commandName returns the base name of a command word: /usr/bin/rm is rm.
func commandName(s string) string {
	if i := strings.LastIndexByte(s, '/'); i >= 0 && i < len(s)-1 {
		return s[i+1:]
	}
	return s
}

func (c *cmd) args() []field { return c.argv[1:] }

// arg returns the value of argv[i], or "".
func (c *cmd) arg(i int) string {
	if i < len(c.argv) {
		return c.argv[i].s
	}
	return ""
}

func (c *cmd) add(cat Category, score int, irreversible bool, reason string) {
	c.findings = append(c.findings, finding{cat: cat, score: score, irreversible: irreversible, reason: reason, lowerable: cat == Moderate})
}

func (c *cmd) moderate(score int, reason string) { c.add(Moderate, score, false, reason) }

func (c *cmd) danger(score int, irreversible bool, reason string) {
	c.add(Dangerous, score, irreversible, reason)
}

func (c *cmd) block(reason string) { c.add(Blocked, scoreBlocked, false, reason) }

// skipField marks a field whose text is code walked elsewhere, so it is not
// also checked as a path.
func (c *cmd) skipField(f field) {
	if f.id >= 0 && f.id < len(c.sh.skip) {
		c.sh.skip[f.id] = true
	}
}

func (c *cmd) keyField(f field) {
	if f.id >= 0 && f.id < len(c.sh.noSecret) {
		c.sh.noSecret[f.id] = true
	}
}

// run makes the layer a wrapper of the command in argv.
func (c *cmd) run(argv []field) {
	if len(argv) > 0 {
		c.next = argv
	}
}

// code walks a field as shell code (bash -c, eval): the code is parsed and
// judged; code known only at run time is at least moderate, and dangerous
// when a substitution in it fetches from the network.
func (c *cmd) code(f field, what string) {
	c.skipField(f)
	c.script = true
	if !f.static {
		if fetchesNetwork(f.word) {
			c.danger(scoreDangerHigh+5, false, what+" runs code downloaded from the network")
		} else if decodes(f.word) {
			c.danger(scoreDangerHigh, false, what+" runs decoded, hidden code")
		}
		c.findings = append(c.findings, finding{cat: Moderate, score: scoreModerateHigh, reason: what + " runs code known only at run time"})
	}
	c.w.nested(f.s)
}

// simple judges one simple command: its layers (wrappers and the command
// they run), its arguments as paths, and the policy rules.
func (w *walker) simple(argv []field, in stdin) {
	if len(argv) == 0 || !w.spend() {
		return
	}
	for i := range argv {
		argv[i].id = i
	}
	marks := make([]bool, 3*len(argv))
	sh := &simpleCtx{cmdPos: marks[:len(argv)], skip: marks[len(argv) : 2*len(argv)], noSecret: marks[2*len(argv):]}
	var layers []*cmd
	cur := argv
	for len(cur) > 0 {
		if len(layers) == 16 {
			w.add(finding{cat: Dangerous, score: scoreDangerous, reason: "wrapped in too many commands to classify"})
			break
		}
		c := &cmd{w: w, argv: cur, in: in, sh: sh}
		layers = append(layers, c)
		if id := cur[0].id; id >= 0 && id < len(sh.cmdPos) {
			sh.cmdPos[id] = true
		}
		w.judge(c)
		if w.onLayer != nil {
			w.onLayer(c)
		}
		cur = c.next
	}
	last := layers[len(layers)-1]
	if len(layers) > 1 && (last.name == "rm" || last.name == "shred" || last.name == "unlink") {
		for _, l := range layers[:len(layers)-1] {
			if l.name == "xargs" || l.name == "parallel" {
				last.flags.deletes = true
			}
		}
	}
	if !last.script {
		w.res.record(last.values())
	}
	sh.meta = sh.meta || metaCommands()[last.name]
	w.argChecks(argv, sh)
	w.codeArgs(last, argv, sh)
	if what := teardownOf(argv); what != "" {
		w.add(finding{cat: Dangerous, score: scoreDestroy, irreversible: true, reason: what})
	}
	w.applyRules(layers)
	for _, c := range layers {
		for _, f := range c.findings {
			w.add(f)
		}
	}
	if w.stage != nil {
		w.stage.merge(&last.flags)
	}
}

// judge runs the handler of one layer.
func (w *walker) judge(c *cmd) {
	name := c.argv[0]
	if name.glob {
		c.findings = append(c.findings, finding{cat: Dangerous, score: scoreDangerous, reason: "the command name is a glob pattern: " + name.s})
		return
	}
	if !name.static {
		c.findings = append(c.findings, finding{cat: Moderate, score: scoreModerate + 5, reason: "the command name is known only at run time: " + name.s})
		c.runtimeName(c.argv)
		return
	}
	if name.fromVar {
		c.findings = append(c.findings, finding{cat: Moderate, score: scoreModerate + 5, reason: "the command name comes from a variable or a substitution: " + name.s})
	}
	if helpOnly(c.argv) {
		return // prints its usage and exits
	}
	c.name = commandName(name.s)
	if c.name != "portcullis" && w.touchesProtected(name) {
		if !w.c.isProtectedExact(name.s) {
			c.block("runs a program inside Portcullis's own files: " + name.s)
			return
		}
		c.name = "portcullis" // the binary under another name
	}
	if w.downloaded[path.Clean(name.s)] {
		c.danger(scoreDangerHigh+5, false, "runs "+name.s+", downloaded in the same command")
		return
	}
	h, ok := lookup(c.name)
	if !ok {
		if strings.Contains(name.s, "/") {
			c.moderate(scoreModerate, "runs the program "+name.s)
		} else {
			c.moderate(scoreModerate, "unknown command: "+c.name)
		}
		c.unknownWrapper()
		c.consultOptions()
		return
	}
	h(c)
	c.consultOptions()
}

// helpOnly reports whether a command line only asks a program for its
// usage or version: the program's name, then subcommand words, then
// --help or --version and nothing else (git push --help, terraform destroy
// --help). A program given by path, and runners that fetch or run what
// they are given (npx cowsay --help), are not included.
func helpOnly(argv []field) bool {
	n := len(argv)
	name := commandName(argv[0].s)
	if n < 2 || strings.Contains(argv[0].s, "/") || runners()[name] || n > 2 && operandFirst()[strings.TrimRight(name, "0123456789.")] {
		return false
	}
	if last := argv[n-1].s; last != "--help" && last != "--version" {
		return false
	}
	for _, f := range argv[1 : n-1] {
		if !f.static || !plainSubcommand(f.s) || runners()[f.s] {
			return false
		}
	}
	return true
}

func plainSubcommand(s string) bool {
	if s == "" || s[0] == '-' {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == ':') {
			return false
		}
	}
	return true
}

// operandFirst programs stop reading options at their first operand, so
// a --help after it goes to the script or the command it names
// (node server --help runs server.js; redis-cli DEL key --help deletes).
var operandFirst = sync.OnceValue(func() map[string]bool {
	return map[string]bool{
		"python": true, "pypy": true, "node": true, "nodejs": true, "ruby": true, "perl": true, "php": true,
		"deno": true, "bun": true, "lua": true, "luajit": true, "Rscript": true, "java": true, "tclsh": true,
		"osascript": true, "pwsh": true, "powershell": true, "redis-cli": true, "valkey-cli": true, "psql": true,
		"mysql": true, "sqlite3": true, "sqlite": true, "duckdb": true, "mongosh": true, "mongo": true, "cqlsh": true,
		"clickhouse-client": true,
	}
})

// runners fetch or run the program named in their arguments.
var runners = sync.OnceValue(func() map[string]bool {
	return map[string]bool{
		"npx": true, "pnpx": true, "bunx": true, "uvx": true, "pipx": true, "dlx": true, "exec": true, "run": true,
		"x": true, "sudo": true, "doas": true, "env": true, "xargs": true, "nohup": true, "timeout": true, "nice": true,
		"time": true, "command": true, "builtin": true, "eval": true, "source": true, ".": true, "watch": true,
		"ssh": true, "su": true, "script": true, "flock": true, "busybox": true, "sh": true, "bash": true, "zsh": true,
	}
})

// argChecks looks at every argument as a path: naming Portcullis's own
// files is blocked, naming a secret file is dangerous.
func (w *walker) argChecks(argv []field, sh *simpleCtx) {
	for i, f := range argv {
		if sh.cmdPos[i] || sh.skip[i] || f.s == "" {
			continue
		}
		if w.touchesProtected(f) {
			w.add(finding{cat: Blocked, score: scoreBlocked, reason: "touches Portcullis's own files: " + f.s})
			continue
		}
		if raw := w.rawText(f); raw != f.s && windowsish(raw) && !sh.noSecret[i] {
			if p := winPath(raw); w.isSecret(field{s: p, static: f.static, glob: f.glob}) {
				w.add(finding{cat: Dangerous, score: scoreDangerous + 5, reason: "names a secret file: " + raw})
				continue
			}
		}
		if sh.meta || sh.noSecret[i] {
			continue
		}
		if w.isSecret(f) {
			w.add(finding{cat: Dangerous, score: scoreDangerous + 5, reason: "reads a secret file: " + f.s})
		} else if dev := w.readsDisk(f); dev != "" {
			w.add(finding{cat: Dangerous, score: scoreDangerous + 5, reason: "reads the raw disk device " + dev + ", secrets and all"})
		}
	}
}

// metaCommands look at files' names or metadata, or remove them, without
// reading what they hold; naming a secret file is not reading it.
var metaCommands = sync.OnceValue(func() map[string]bool {
	return map[string]bool{
		"ls": true, "stat": true, "test": true, "[": true, "echo": true, "printf": true, "touch": true, "rm": true,
		"rmdir": true, "unlink": true, "chmod": true, "chown": true, "chgrp": true, "du": true, "realpath": true,
		"readlink": true, "basename": true, "dirname": true, "which": true, "type": true, "mkdir": true,
		"find": true, "fd": true, "locate": true, "wc": true, "ssh-keygen": true, "ssh-add": true, "shred": true,
		"file": true, "tree": true, "exa": true, "eza": true,
	}
})

func (c *Classifier) isProtectedExact(s string) bool {
	p := c.normPath(s)
	return slices.ContainsFunc(c.protected, func(pp protectedPath) bool { return pp.norm == p })
}
