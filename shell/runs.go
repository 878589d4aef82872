package shell

import (
	"slices"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/syntax"
)

// valueUse is what a program does with an option's value or a variable's.
type valueUse uint8

const (
	// useCode: the value is a command line the program runs (through a
	// shell, or split into a program and its arguments).
	useCode valueUse = iota + 1
	// useRest: the words after the option are a command and its
	// arguments.
	useRest
	// useWrite: the value names a file the program writes.
	useWrite
)

// optionUse is one row of the model of command-running and file-writing
// options: program (and subcommand) × option → how its value is used.
type optionUse struct {
	prog  string   // the program's base name
	sub   string   // its subcommand ("rebase"), or "" for any
	names []string // the option's spellings: "-x", "--exec"
	use   valueUse
}

// optionUses is the table the walker consults for every layer of every
// simple command. A long option's value follows "=" or is the next word; a
// short option's is attached or the next word.
var optionUses = []optionUse{
	{prog: "rg", names: []string{"--pre"}, use: useCode},
	{prog: "git", sub: "difftool", names: []string{"-x", "--extcmd"}, use: useCode},
	{prog: "git", sub: "rebase", names: []string{"-x", "--exec"}, use: useCode},
	{prog: "git", sub: "clone", names: []string{"-u", "--upload-pack"}, use: useCode},
	{prog: "git", sub: "fetch", names: []string{"--upload-pack"}, use: useCode},
	{prog: "git", sub: "pull", names: []string{"--upload-pack"}, use: useCode},
	{prog: "git", sub: "ls-remote", names: []string{"--upload-pack"}, use: useCode},
	{prog: "git", sub: "push", names: []string{"--receive-pack", "--exec"}, use: useCode},
	{prog: "git", sub: "archive", names: []string{"--exec"}, use: useCode},
	{prog: "zip", names: []string{"-TT", "--unzip-command"}, use: useCode},
	{prog: "rsync", names: []string{"-e", "--rsh", "--rsync-path"}, use: useCode},
	{prog: "scp", names: []string{"-S"}, use: useCode},
	{prog: "sftp", names: []string{"-S"}, use: useCode},
	{prog: "nodemon", names: []string{"-x", "--exec"}, use: useCode},
	{prog: "nix-shell", names: []string{"--run", "--command"}, use: useCode},
	{prog: "nix", sub: "develop", names: []string{"-c", "--command"}, use: useRest},
	{prog: "nix", sub: "shell", names: []string{"-c", "--command"}, use: useRest},
	{prog: "entr", names: []string{"-s"}, use: useCode},
	{prog: "watchexec", names: []string{"-s", "--shell"}, use: useCode},
	{prog: "curl", names: []string{"-o", "--output"}, use: useWrite},
	{prog: "wget", names: []string{"-O", "--output-document"}, use: useWrite},
	{prog: "wget2", names: []string{"-O", "--output-document"}, use: useWrite},
	{prog: "aria2c", names: []string{"-o", "--out"}, use: useWrite},
	{prog: "openssl", names: []string{"-out"}, use: useWrite},
	{prog: "gpg", names: []string{"-o", "--output"}, use: useWrite},
	{prog: "go", sub: "build", names: []string{"-o"}, use: useWrite},
	{prog: "gcc", names: []string{"-o"}, use: useWrite},
	{prog: "cc", names: []string{"-o"}, use: useWrite},
	{prog: "clang", names: []string{"-o"}, use: useWrite},
	{prog: "iwr", names: []string{"-outfile"}, use: useWrite},
	{prog: "invoke-webrequest", names: []string{"-outfile"}, use: useWrite},
}

// optionIndex maps a program to its rows of optionUses.
var optionIndex = sync.OnceValue(func() map[string][]int {
	m := map[string][]int{}
	for i, u := range optionUses {
		m[u.prog] = append(m[u.prog], i)
	}
	return m
})

// envUses are the environment variables whose value a program runs as a
// command: set before a command, exported, or given to env or sudo.
var envUses = sync.OnceValue(func() map[string]string {
	return map[string]string{
		"PAGER": "pagers", "GIT_PAGER": "git", "MANPAGER": "man", "SYSTEMD_PAGER": "systemctl", "BAT_PAGER": "bat",
		"DELTA_PAGER": "delta", "LESSOPEN": "less", "LESSCLOSE": "less", "GIT_EXTERNAL_DIFF": "git",
		"GIT_PROXY_COMMAND": "git", "GIT_ASKPASS": "git", "SSH_ASKPASS": "ssh", "SUDO_ASKPASS": "sudo",
		"GIT_SSH_COMMAND": "git", "GIT_SSH": "git", "GIT_EDITOR": "git", "GIT_SEQUENCE_EDITOR": "git",
		"EDITOR": "editors", "VISUAL": "editors", "PROMPT_COMMAND": "bash", "BROWSER": "browsers",
		"RSYNC_RSH": "rsync", "CVS_RSH": "cvs", "FZF_DEFAULT_COMMAND": "fzf", "FCEDIT": "fc",
	}
})

// runsEnv judges NAME=value when NAME is a variable whose value a program
// runs: the value is walked as nested code.
func (w *walker) runsEnv(name, value string, static bool) []finding {
	prog, ok := envUses()[name]
	if !ok {
		return nil
	}
	out := []finding{{cat: Moderate, score: scoreModerate, reason: "sets " + name + ", a command " + prog + " runs"}}
	if !static {
		return append(out, finding{cat: Moderate, score: scoreModerateHigh, reason: name + " is a command known only at run time"})
	}
	w.nested(strings.TrimLeft(value, "|-"))
	return out
}

// consultOptions applies the rows of optionUses for the layer's program.
func (c *cmd) consultOptions() {
	rows, ok := optionIndex()[strings.ToLower(c.name)]
	if !ok {
		return
	}
	sub := ""
	if len(c.canon) > 1 {
		sub = c.canon[1]
	} else if s, _ := subcommand(c.argv, 1, ""); s != "" {
		sub = s
	}
	args := c.args()
	for _, r := range rows {
		u := &optionUses[r]
		if u.sub != "" && u.sub != sub {
			continue
		}
		for i := 0; i < len(args); i++ {
			a := args[i]
			if a.s == "--" {
				break
			}
			val, vi, hit := optionValue(args, i, u.names)
			if !hit {
				continue
			}
			what := c.name + " " + optName(a.s)
			if u.sub != "" {
				what = c.name + " " + u.sub + " " + optName(a.s)
			}
			switch u.use {
			case useCode:
				if vi >= 0 {
					c.skipField(args[vi])
				} else {
					c.skipField(a)
				}
				c.moderate(scoreModerate, what+" runs a command")
				if !val.static {
					c.moderate(scoreModerateHigh, what+" runs a command known only at run time")
					continue
				}
				c.w.nested(strings.TrimLeft(val.s, "|"))
			case useRest:
				if vi < 0 || vi >= len(args) {
					continue
				}
				run := append([]field(nil), args[vi:]...)
				for _, f := range run {
					c.skipField(f)
				}
				c.moderate(scoreModerate, what+" runs a command")
				c.w.simple(run, stdin{})
				return
			case useWrite:
				if vi >= 0 {
					c.skipField(args[vi])
					c.keyField(args[vi])
				} else {
					c.skipField(a)
				}
				c.w.checkTarget(val, true, false)
			}
		}
	}
}

func letters(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

func optName(s string) string {
	if i := strings.IndexByte(s, '='); i > 0 {
		return s[:i]
	}
	return s
}

// optionValue reports whether args[i] is one of the option names and
// returns its value and the index of the word holding it (-1 when the
// value is attached).
func optionValue(args []field, i int, names []string) (field, int, bool) {
	a := args[i].s
	low := strings.ToLower(a)
	for _, n := range names {
		switch {
		case a == n || low == n && strings.HasPrefix(n, "-outfile"):
			if i+1 < len(args) {
				return args[i+1], i + 1, true
			}
			return field{}, -1, false
		case strings.HasPrefix(n, "--") && strings.HasPrefix(a, n+"="):
			return field{s: a[len(n)+1:], id: -1, static: args[i].static, word: args[i].word}, -1, true
		case len(n) == 2 && len(a) > 2 && a[1] != '-' && strings.HasPrefix(a, n):
			return field{s: a[2:], id: -1, static: args[i].static, word: args[i].word}, -1, true
		case len(n) == 2 && len(a) > 2 && a[0] == '-' && a[1] != '-':
			// A cluster of flags ending in the option: wget -qO file, curl -fsSLo file.
			k := strings.IndexByte(a, n[1])
			if k < 2 || !letters(a[1:k]) {
				continue
			}
			if k+1 < len(a) {
				return field{s: a[k+1:], id: -1, static: args[i].static, word: args[i].word}, -1, true
			}
			if i+1 < len(args) {
				return args[i+1], i + 1, true
			}
		}
	}
	return field{}, -1, false
}

// dataCommands take text that is data, not code: what they are given is
// printed, searched for or stored, never run.
var dataCommands = sync.OnceValue(func() map[string]bool {
	return map[string]bool{
		"echo": true, "printf": true, "grep": true, "egrep": true, "fgrep": true, "rg": true, "ag": true, "ack": true,
		"jq": true, "yq": true, "test": true, "[": true, "logger": true, "notify-send": true, "sed": true, "awk": true,
		"gawk": true, "mawk": true, "nawk": true, "tee": true, "cat": true, "read": true, "export": true, "declare": true, "local": true,
		"readonly": true, "typeset": true, "alias": true, "trap": true, "printenv": true, "sqlite3": true,
		"psql": true, "mysql": true, "ssh": true, "watch": true, "eval": true, "bash": true, "sh": true, "zsh": true,
		"dash": true, "ksh": true, "fish": true, "su": true, "sudo": true, "env": true, "xargs": true, "find": true,
		"parallel": true, "timeout": true, "nice": true, "vim": true, "nvim": true, "vi": true, "less": true, "man": true,
		"tar": true, "git": true, "gh": true, "glab": true, "curl": true, "wget": true, "http": true, "xh": true,
		"kubectl": true, "docker": true, "podman": true, "osascript": true, "powershell": true, "pwsh": true,
		"cmd": true, "cmd.exe": true, "flock": true, "script": true, "runuser": true, "sg": true,
	}
})

// codeArgs applies the rule that a value which parses as shell code holding
// a dangerous command is judged as that code, wherever it stands: an
// operand, an option's value (--hook='rm -rf ~'), a NAME=value. Programs
// that take text as data (echo, grep, git commit -m) and those whose code
// arguments are judged by their own handlers are left out.
func (w *walker) codeArgs(last *cmd, argv []field, sh *simpleCtx) {
	if w.crude || w.depth >= maxDepth-1 || dataCommands()[last.name] {
		return
	}
	if isSafe(last.name) {
		return
	}
	for i, f := range argv {
		if sh.cmdPos[i] || sh.skip[i] || !f.static || len(f.s) < 4 || len(f.s) > 4096 {
			continue
		}
		v := f.s
		if j := strings.IndexByte(v, '='); j > 0 && (v[0] == '-' || isAssignment(v)) {
			v = v[j+1:]
		}
		if !strings.ContainsAny(v, " \t;|&") {
			continue
		}
		if fs := w.probe(v); len(fs) > 0 {
			w.add(finding{cat: Moderate, score: scoreModerate, reason: "an argument of " + last.name + " is a command line"})
			for _, x := range fs {
				w.add(x)
			}
		}
	}
}

// probeBudget counts one try of a value or a wrapped line as code and
// reports whether the line's budget allows it. Past the budget the line is
// dangerous: what it hides in its arguments could not all be read.
func (w *walker) probeBudget() bool {
	w.res.probes++
	if w.res.probes <= maxProbes {
		return true
	}
	if w.res.probes == maxProbes+1 {
		w.add(finding{cat: Dangerous, score: scoreDangerous, reason: "too many command lines inside arguments to classify"})
	}
	return false
}

// probe walks src as nested code on its own and returns its findings when
// one of them is dangerous or blocked (with the commands it found
// recorded), or nothing.
func (w *walker) probe(src string) []finding {
	if !w.probeBudget() {
		return nil
	}
	sub := &walker{c: w.c, res: &result{work: w.res.work, probes: w.res.probes}, depth: w.depth + 1}
	sub.script(src)
	w.res.work, w.res.probes = sub.res.work, sub.res.probes
	worst := Safe
	for _, f := range sub.res.findings {
		if f.cat.Rank() > worst.Rank() {
			worst = f.cat
		}
	}
	if worst.Rank() < Dangerous.Rank() {
		return nil
	}
	for _, argv := range sub.res.commands {
		w.res.record(argv)
	}
	return sub.res.findings
}

// unknownWrapper applies the rule that an unknown program followed by a
// recognisable dangerous command line is judged as that line: taskset -c 1
// rm -rf ~ is rm -rf ~.
func (c *cmd) unknownWrapper() {
	if c.w.depth >= 3 {
		return // deeper, a wrapped line is already a wrapper's argument
	}
	tried := 0
	for k := 1; k < len(c.argv) && tried < 6; k++ {
		f := c.argv[k]
		if !f.static || f.s == "" || f.s[0] == '-' || strings.ContainsAny(f.s, "=:") {
			continue
		}
		name := commandName(f.s)
		if !hasHandler(strings.ToLower(name)) {
			continue
		}
		if isSafe(name) {
			continue
		}
		tried++
		fs, st := c.w.probeArgv(c.argv[k:])
		if len(fs) == 0 {
			if st.net || st.decoder || st.netTool {
				// trickle curl … | sh: what the wrapped command does flows on.
				c.flags.net, c.flags.decoder, c.flags.netTool = st.net, st.decoder, st.netTool
				return
			}
			continue
		}
		if _, known := lookup(c.name); !known {
			c.findings = append(c.findings, finding{cat: Moderate, score: scoreModerate, reason: c.name + " looks like a wrapper of " + name})
		}
		for i := k; i < len(c.argv); i++ {
			c.skipField(c.argv[i])
		}
		c.findings = append(c.findings, fs...)
		return
	}
}

// probeArgv judges argv as a simple command of its own and returns its
// findings when one of them is dangerous or blocked.
func (w *walker) probeArgv(argv []field) ([]finding, stageInfo) {
	var st stageInfo
	if !w.probeBudget() {
		return nil, st
	}
	sub := &walker{c: w.c, res: &result{work: w.res.work, probes: w.res.probes}, depth: w.depth + 1, cwd: w.cwd, cwdMoved: w.cwdMoved, src: w.src, stage: &st}
	sub.simple(slices.Clone(argv), stdin{})
	w.res.work, w.res.probes = sub.res.work, sub.res.probes
	for _, f := range sub.res.findings {
		if f.cat.Rank() >= Dangerous.Rank() {
			for _, a := range sub.res.commands {
				w.res.record(a)
			}
			return sub.res.findings, st
		}
	}
	return nil, st
}

// runtimeName leans to dangerous when a command name known only at run
// time is given the arguments of a destructive command: -r or -f (or
// --recursive, --force) and the home directory, the root or a system path.
func (c *cmd) runtimeName(argv []field) {
	destructive, target := false, ""
	for _, f := range argv[1:] {
		s := f.s
		if len(s) > 1 && s[0] == '-' && (strings.ContainsAny(s[1:], "rRf") && !strings.HasPrefix(s, "--") || s == "--recursive" || s == "--force" || s == "--no-preserve-root") {
			destructive = true
			continue
		}
		p := c.w.c.normPath(s)
		if target == "" && (isCritical(p) || isSystemPath(p) || isHomeish(s)) {
			target = s
		}
	}
	if destructive && target != "" {
		c.findings = append(c.findings, finding{cat: Dangerous, score: scoreDestroy, irreversible: true,
			reason: "a command named only at run time (" + argv[0].s + ") is given destructive arguments on " + target})
	}
}

// isHomeish reports whether a word names the home directory however it is
// spelled: ~, $HOME, ${HOME}, "$HOME/".
func isHomeish(s string) bool {
	s = strings.TrimSuffix(strings.TrimSuffix(s, "/*"), "/")
	return s == "~" || s == "$HOME" || s == "${HOME}" || s == "$USERPROFILE" || s == "%USERPROFILE%" || s == "$env:USERPROFILE"
}

// forkBomb reports whether a function's body starts copies of the function
// itself in the background or in a pipeline: :(){ :|:& };: in any spelling.
func forkBomb(x *syntax.FuncDecl, name string) bool {
	calls, spawns := 0, false
	syntax.Walk(x.Body, func(n syntax.Node) bool {
		switch y := n.(type) {
		case *syntax.Stmt:
			if y.Background || y.Coprocess {
				spawns = true
			}
		case *syntax.BinaryCmd:
			if y.Op == syntax.Pipe || y.Op == syntax.PipeAll {
				spawns = true
			}
		case *syntax.CallExpr:
			if len(y.Args) > 0 && y.Args[0].Lit() == name {
				calls++
			}
		}
		return true
	})
	return spawns && calls > 0 || calls > 1
}

// teardown is one framework's command that destroys a whole database or
// data store: every word of words must appear in the command line, in
// order, and the anchor (the framework's program or script) must be one of
// its words.
type teardown struct {
	anchors []string
	words   []string
	what    string
}

var teardowns = []teardown{
	{[]string{"rails", "rake", "bin/rails", "bin/rake", "./bin/rails"}, []string{"db:drop"}, "drops the application's database"},
	{[]string{"rails", "rake", "bin/rails", "bin/rake", "./bin/rails"}, []string{"db:reset"}, "drops and recreates the application's database"},
	{[]string{"rails", "rake", "bin/rails", "bin/rake", "./bin/rails"}, []string{"db:migrate:reset"}, "drops and recreates the application's database"},
	{[]string{"rails", "rake", "bin/rails", "bin/rake", "./bin/rails"}, []string{"db:purge"}, "empties the application's database"},
	{[]string{"rails", "rake", "bin/rails", "bin/rake", "./bin/rails"}, []string{"db:schema:load"}, "reloads the schema, dropping every table's data"},
	{[]string{"rails", "rake", "bin/rails", "bin/rake", "./bin/rails"}, []string{"db:truncate_all"}, "empties every table"},
	{[]string{"artisan"}, []string{"migrate:fresh"}, "drops every table of the database"},
	{[]string{"artisan"}, []string{"migrate:reset"}, "rolls back every migration"},
	{[]string{"artisan"}, []string{"migrate:refresh"}, "rolls back and re-runs every migration"},
	{[]string{"artisan"}, []string{"db:wipe"}, "drops every table, view and type"},
	{[]string{"prisma"}, []string{"migrate", "reset"}, "drops and recreates the database"},
	{[]string{"prisma"}, []string{"--force-reset"}, "drops and recreates the database"},
	{[]string{"supabase"}, []string{"db", "reset"}, "drops and recreates the database"},
	{[]string{"manage.py", "django-admin", "./manage.py"}, []string{"flush"}, "deletes every row of the database"},
	{[]string{"manage.py", "django-admin", "./manage.py"}, []string{"reset_db"}, "drops and recreates the database"},
	{[]string{"sequelize", "sequelize-cli"}, []string{"db:drop"}, "drops the database"},
	{[]string{"typeorm", "typeorm-ts-node-commonjs", "typeorm-ts-node-esm"}, []string{"schema:drop"}, "drops every table"},
	{[]string{"knex"}, []string{"migrate:rollback", "--all"}, "rolls back every migration"},
	{[]string{"mix"}, []string{"ecto.drop"}, "drops the database"},
	{[]string{"mix"}, []string{"ecto.reset"}, "drops and recreates the database"},
	{[]string{"dotnet"}, []string{"database", "drop"}, "drops the database"},
	{[]string{"flyway"}, []string{"clean"}, "drops every object in the schema"},
	{[]string{"liquibase"}, []string{"drop-all"}, "drops every object in the schema"},
	{[]string{"liquibase"}, []string{"dropAll"}, "drops every object in the schema"},
	{[]string{"alembic"}, []string{"downgrade", "base"}, "rolls back every migration"},
	{[]string{"drizzle-kit"}, []string{"drop"}, "drops migrations"},
	{[]string{"vault"}, []string{"secrets", "disable"}, "disables a secrets engine, losing its secrets"},
	{[]string{"vault"}, []string{"kv", "destroy"}, "destroys secret versions for good"},
	{[]string{"vault"}, []string{"kv", "metadata", "delete"}, "deletes every version of a secret"},
	{[]string{"vault"}, []string{"kv", "delete"}, "deletes a secret"},
	{[]string{"vault"}, []string{"delete"}, "deletes a secret"},
	{[]string{"vault"}, []string{"auth", "disable"}, "disables an auth method"},
	{[]string{"vault"}, []string{"policy", "delete"}, "deletes an access policy"},
	{[]string{"vault"}, []string{"lease", "revoke"}, "revokes leases"},
	{[]string{"op"}, []string{"item", "delete"}, "deletes a secret item"},
	{[]string{"op"}, []string{"document", "delete"}, "deletes a secure document"},
	{[]string{"op"}, []string{"vault", "delete"}, "deletes a vault"},
	{[]string{"op"}, []string{"user", "delete"}, "deletes a user"},
	{[]string{"doppler"}, []string{"secrets", "delete"}, "deletes secrets"},
	{[]string{"doppler"}, []string{"configs", "delete"}, "deletes a config"},
	{[]string{"doppler"}, []string{"projects", "delete"}, "deletes a project"},
	{[]string{"rclone"}, []string{"sync"}, "deletes at the destination whatever the source lacks"},
	{[]string{"rclone"}, []string{"purge"}, "deletes a path and everything beneath it"},
	{[]string{"rclone"}, []string{"delete"}, "deletes files"},
	{[]string{"rclone"}, []string{"deletefile"}, "deletes a file"},
	{[]string{"restic"}, []string{"forget"}, "forgets backup snapshots"},
	{[]string{"restic"}, []string{"prune"}, "deletes backup data"},
	{[]string{"borg"}, []string{"delete"}, "deletes backup archives"},
	{[]string{"borg"}, []string{"prune"}, "deletes backup archives"},
	{[]string{"borg"}, []string{"repo-delete"}, "deletes a backup repository"},
	{[]string{"velero"}, []string{"backup", "delete"}, "deletes backups"},
	{[]string{"velero"}, []string{"schedule", "delete"}, "deletes a backup schedule"},
	{[]string{"kafka-topics", "kafka-topics.sh"}, []string{"--delete"}, "deletes a topic and its messages"},
	{[]string{"kafka-delete-records", "kafka-delete-records.sh"}, nil, "deletes records"},
}

// teardownIndex maps each anchor to its rows of teardowns.
var teardownIndex = sync.OnceValue(func() map[string][]int {
	m := map[string][]int{}
	for i, t := range teardowns {
		for _, a := range t.anchors {
			m[a] = append(m[a], i)
		}
	}
	return m
})

// teardownOf returns what a teardown in argv does, or "".
func teardownOf(argv []field) string {
	if len(argv) < 2 {
		return ""
	}
	for k, f := range argv {
		rows, ok := teardownIndex()[f.s]
		if !ok {
			rows, ok = teardownIndex()[commandName(f.s)]
		}
		if !ok {
			continue
		}
		for _, r := range rows {
			t := &teardowns[r]
			j := 0
			for _, a := range argv[k+1:] {
				if j < len(t.words) && a.s == t.words[j] {
					j++
				}
			}
			if j == len(t.words) {
				return strings.TrimSpace(commandName(f.s)+" "+strings.Join(t.words, " ")) + " " + t.what
			}
		}
	}
	return ""
}

// cleanupNames are the directories and files builds and tools regenerate:
// deleting them inside the working directory is a routine clean-up.
var cleanupNames = sync.OnceValue(func() map[string]bool {
	return map[string]bool{
		"node_modules": true, "dist": true, "build": true, "target": true, ".cache": true, "__pycache__": true,
		"coverage": true, ".next": true, ".nuxt": true, ".turbo": true, ".pytest_cache": true, ".mypy_cache": true,
		".ruff_cache": true, ".tox": true, ".parcel-cache": true, "out": true, ".svelte-kit": true, ".angular": true,
		".eggs": true, ".gradle": true, ".nyc_output": true, "htmlcov": true, ".sass-cache": true, "tmp": true,
		".venv": true, "venv": true, "obj": true, "_build": true, ".dart_tool": true,
	}
})

// cleanupPatterns are find -name patterns of generated files.
var cleanupPatterns = sync.OnceValue(func() map[string]bool {
	return map[string]bool{
		"*.pyc": true, "*.pyo": true, "__pycache__": true, "*.o": true, "*.class": true, ".DS_Store": true,
		"*.orig": true, "*.rej": true, "*~": true, "*.tmp": true, "node_modules": true, ".pytest_cache": true,
		"*.log": true, "*.swp": true, "*.bak": true, "*.egg-info": true, ".mypy_cache": true, "*.d": true,
		"*.test": true, "*.out": true, "dist": true, "build": true, "target": true, "coverage": true,
	}
})

// inCleanup reports whether a path is a regenerated directory (or lies
// beneath one) inside the working directory: relative, no "..", no hidden
// glob that could match "..", the line has not changed directory to
// somewhere unknown.
func (w *walker) inCleanup(f field) bool {
	if !f.static || w.cwdMoved || !insideWorkdir(f.s) {
		return false
	}
	for _, comp := range strings.Split(strings.TrimSuffix(f.s, "/"), "/") {
		if cleanupNames()[comp] || strings.HasSuffix(comp, ".egg-info") {
			return true
		}
	}
	return false
}

// insideWorkdir reports whether a path written in the line stays inside
// the working directory: relative, no "..", no hidden glob that could
// match "..", not a variable or ~.
func insideWorkdir(p string) bool {
	if p == "" || p[0] == '/' || p[0] == '~' || p[0] == '$' || p[0] == '-' {
		return false
	}
	for p != "" {
		comp := p
		if i := strings.IndexByte(p, '/'); i >= 0 {
			comp, p = p[:i], p[i+1:]
		} else {
			p = ""
		}
		if comp == ".." || comp != "" && comp[0] == '.' && strings.ContainsAny(comp, "*?[") {
			return false
		}
	}
	return true
}
