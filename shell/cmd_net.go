package shell

import (
	"path"
	"slices"
	"strings"
	"sync"
)

// netFetchers download from the network; their output piped into a shell
// is code from the network.
var netFetchers = sync.OnceValue(func() map[string]bool {
	return map[string]bool{
		"curl": true, "wget": true, "fetch": true, "http": true, "https": true, "xh": true, "aria2c": true,
		"lwp-download": true, "lwp-request": true, "GET": true, "ftp": true, "tftp": true, "axel": true,
		"wget2": true, "curlie": true,
	}
})

// registerNet registers the handlers of network tools and interpreters (see loadHandlers).
func registerNet() {
	register(fetchCmd, "curl", "wget", "wget2", "fetch", "http", "https", "xh", "aria2c", "lwp-download",
		"lwp-request", "GET", "ftp", "tftp", "axel", "curlie")
	register(sshKeygenCmd, "ssh-keygen")
	register(ncCmd, "nc", "ncat", "netcat", "pwncat")
	register(socatCmd, "socat")
	register(func(c *cmd) {
		c.flags.net, c.flags.netTool = true, true
		c.moderate(scoreModerate, c.name+" opens a network connection")
	}, "telnet", "cryptcat", "sbd")
	register(opensslCmd, "openssl")
	register(sshCmd, "ssh")
	register(func(c *cmd) {
		c.moderate(scoreModerate, c.name+" transfers files over the network")
	}, "sftp", "rclone", "lftp")
	register(func(c *cmd) { c.moderate(scoreModerate, c.name+" scans the network") }, "nmap", "masscan", "zmap")
	register(gpgCmd, "gpg", "gpg2")
	register(interpCmd, "python", "python2", "python3", "pypy", "pypy3", "node", "nodejs", "deno", "bun",
		"perl", "ruby", "php", "lua", "luajit", "Rscript", "osascript", "pwsh", "powershell", "tclsh", "jshell",
		"groovy", "irb")
}

// fetchCmd: a network request is moderate; what it downloads is followed
// into pipes (curl | sh) and into files run later in the line.
// sshKeygenCmd: listing fingerprints and finding hosts only read; making
// or changing keys and known_hosts writes.
func sshKeygenCmd(c *cmd) {
	for _, a := range c.args() {
		if a.s == "-f" {
			continue
		}
		if len(a.s) > 1 && a.s[0] == '-' && a.s[1] != '-' && strings.ContainsAny(a.s[1:2], "lFB") {
			return
		}
	}
	c.moderate(scoreWrite, "ssh-keygen creates or changes keys")
}

func fetchCmd(c *cmd) {
	c.flags.net = true
	args := c.args()
	out := ""
	toStdout := c.name != "wget" && c.name != "wget2" && c.name != "aria2c" && c.name != "axel"
	if m := httpMethod(c.name, args); m == "DELETE" || anyArgContains(args, "_delete_by_query") {
		c.danger(scoreDangerHigh, true, c.name+" sends an HTTP "+m+" request that deletes data on a server")
	}
	for i := 0; i < len(args); i++ {
		a := args[i].s
		next := ""
		if i+1 < len(args) {
			next = args[i+1].s
		}
		switch {
		case a == "-o" || a == "--output" || a == "--output-document" || c.name == "wget" && a == "-O":
			out, toStdout = next, false
			i++
		case strings.HasPrefix(a, "--output=") || strings.HasPrefix(a, "--output-document="):
			_, out, _ = strings.Cut(a, "=")
			toStdout = false
		case c.name == "curl" && (a == "-O" || a == "--remote-name"):
			toStdout = false
		case len(a) > 2 && a[0] == '-' && a[1] != '-':
			letter := "o"
			if c.name == "wget" {
				letter = "O"
			}
			if c.name == "curl" && strings.Contains(a, "O") {
				toStdout = false
			}
			if k := strings.Index(a, letter); k > 0 {
				v := a[k+1:]
				if v == "" {
					v = next
					i++
				}
				out, toStdout = v, false
			}
		}
	}
	if out == "-" {
		toStdout = true
	}
	switch {
	case out != "" && out != "-":
		c.w.addDownloaded(out)
	case !toStdout:
		for _, o := range operands(args) {
			if strings.Contains(o.s, "://") || strings.Contains(o.s, ".") {
				c.w.addDownloaded(path.Base(strings.SplitN(o.s, "?", 2)[0]))
			}
		}
	}
	c.moderate(scoreModerate, c.name+" makes a network request")
}

func (w *walker) addDownloaded(name string) {
	if name == "" {
		return
	}
	if w.downloaded == nil {
		w.downloaded = map[string]bool{}
	}
	w.downloaded[path.Clean(name)] = true
}

func ncCmd(c *cmd) {
	c.flags.net, c.flags.netTool = true, true
	for _, a := range c.args() {
		switch s := a.s; {
		case s == "-e" || s == "-c" || s == "--exec" || s == "--sh-exec" || s == "--lua-exec" ||
			strings.HasPrefix(s, "--exec=") || strings.HasPrefix(s, "--sh-exec=") ||
			len(s) > 2 && s[0] == '-' && s[1] != '-' && strings.ContainsAny(s[1:], "ec"):
			c.block("reverse shell: " + c.name + " " + s + " runs a program over a network connection")
			return
		}
	}
	if flagged(c.args(), "l", "--listen") {
		c.moderate(scoreModerateHigh, c.name+" listens for network connections")
		return
	}
	c.moderate(scoreModerate, c.name+" opens a network connection")
}

func socatCmd(c *cmd) {
	c.flags.net, c.flags.netTool = true, true
	for _, a := range c.args() {
		l := strings.ToLower(a.s)
		if strings.HasPrefix(l, "exec:") || strings.HasPrefix(l, "system:") || strings.Contains(l, ",exec:") || strings.Contains(l, "!!exec:") {
			c.block("reverse shell: socat connects a program to the network (" + a.s + ")")
			return
		}
	}
	c.moderate(scoreModerate, "socat relays a network connection")
}

func opensslCmd(c *cmd) {
	switch c.arg(1) {
	case "s_client", "s_server":
		c.flags.net, c.flags.netTool = true, true
		c.moderate(scoreModerate, "openssl "+c.arg(1)+" opens a network connection")
	case "enc", "base64":
		c.flags.decoder = flagged(c.args(), "d", "-d")
	}
}

func sshCmd(c *cmd) {
	opts, i := scanOpts(c.argv, 1, "BbcDEeFIiJLlmOopQRSWw")
	for _, o := range opts {
		switch o.name {
		case "-i":
			c.keyField(o.f)
		case "-o":
			k, v, ok := strings.Cut(o.val, "=")
			if !ok {
				k, v, _ = strings.Cut(o.val, " ")
			}
			if lk := strings.ToLower(strings.TrimSpace(k)); lk == "proxycommand" || lk == "localcommand" {
				c.moderate(scoreModerate, "ssh -o "+k+" runs a local command")
				c.skipField(o.f)
				c.w.nested(v)
			}
		}
	}
	if i >= len(c.argv) {
		c.moderate(scoreModerate, "ssh")
		return
	}
	host := c.argv[i].s
	rest := c.argv[i+1:]
	if len(rest) > 0 && rest[0].s == "--" {
		rest = rest[1:]
	}
	if len(rest) == 0 {
		c.moderate(scoreModerate, "opens a shell on the remote host "+host)
		return
	}
	c.moderate(scoreModerate, "runs commands on the remote host "+host)
	for _, r := range rest {
		c.skipField(r)
	}
	c.code(joinFields(rest), "ssh")
}

// interpreter describes how a language's interpreter takes inline code.
type interpreter struct {
	label string
	code  []string // options whose value is code
	last  string   // short-option clusters ending in one of these letters take code (perl -pe)
}

var interpreters = sync.OnceValue(func() map[string]interpreter {
	return map[string]interpreter{
		"python":     {label: "Python", code: []string{"-c"}, last: "c"},
		"pypy":       {label: "Python", code: []string{"-c"}, last: "c"},
		"node":       {label: "JavaScript", code: []string{"-e", "--eval", "-p", "--print"}},
		"nodejs":     {label: "JavaScript", code: []string{"-e", "--eval", "-p", "--print"}},
		"deno":       {label: "JavaScript"},
		"bun":        {label: "JavaScript", code: []string{"-e", "--eval", "-p", "--print"}},
		"perl":       {label: "Perl", code: []string{"-e", "-E"}, last: "eE"},
		"ruby":       {label: "Ruby", code: []string{"-e"}, last: "e"},
		"irb":        {label: "Ruby"},
		"php":        {label: "PHP", code: []string{"-r"}, last: "r"},
		"lua":        {label: "Lua", code: []string{"-e"}},
		"luajit":     {label: "Lua", code: []string{"-e"}},
		"Rscript":    {label: "R", code: []string{"-e", "--expr"}},
		"osascript":  {label: "AppleScript", code: []string{"-e"}},
		"pwsh":       {label: "PowerShell", code: []string{"-c", "-Command", "-command", "-EncodedCommand", "-encodedcommand", "-enc", "-ec", "-e"}},
		"powershell": {label: "PowerShell", code: []string{"-c", "-Command", "-command", "-EncodedCommand", "-encodedcommand", "-enc", "-ec", "-e"}},
		"tclsh":      {label: "Tcl"},
		"jshell":     {label: "Java"},
		"groovy":     {label: "Groovy", code: []string{"-e"}},
	}
})

// interpCmd judges an interpreter: inline code is read for what it does,
// a script is moderate, code on stdin is followed like a shell's.
func interpCmd(c *cmd) {
	name := strings.TrimRight(c.name, "0123456789.")
	spec, ok := interpreters()[name]
	if !ok {
		spec = interpreters()[c.name]
	}
	args := c.args()
	if len(args) == 1 && (args[0].s == "--version" || args[0].s == "-V" || args[0].s == "-v" || args[0].s == "--help" || args[0].s == "-h") {
		return
	}
	if len(args) == 2 && (name == "node" || name == "nodejs") && (args[0].s == "--check" || args[0].s == "-c") ||
		len(args) == 2 && name == "php" && args[0].s == "-l" {
		return // checks the syntax without running anything
	}
	if (name == "deno" || name == "bun") && len(args) > 0 && !strings.HasPrefix(args[0].s, "-") {
		switch args[0].s {
		case "eval":
			if len(args) > 1 {
				c.inline(spec, args[len(args)-1])
				return
			}
		case "--version", "version", "help":
			return
		}
		c.moderate(scoreModerate, c.name+" "+args[0].s+" runs JavaScript")
		return
	}
	for i := 0; i < len(args); i++ {
		a := args[i].s
		if a == "--" || a == "-" || !strings.HasPrefix(a, "-") {
			if a == "-" {
				c.stdinCode(sinkInterp)
				return
			}
			if a == "--" {
				i++
			}
			if i < len(args) {
				c.scriptFile(args[i])
				return
			}
			break
		}
		if name == "python" && a == "-m" && i+1 < len(args) {
			c.pythonModule(args[i+1], args[i+2:])
			return
		}
		if v, ok := strings.CutPrefix(a, "--eval="); ok && len(spec.code) > 0 {
			c.inline(spec, field{s: v, id: args[i].id, static: args[i].static, word: args[i].word})
			return
		}
		if name == "pwsh" || name == "powershell" {
			switch strings.ToLower(a) {
			case "-encodedcommand", "-enc", "-ec", "-e":
				if i+1 < len(args) {
					c.skipField(args[i+1])
				}
				c.danger(scoreDangerous, false, spec.label+" runs base64-encoded, hidden code")
				return
			}
		}
		isCode := slices.Contains(spec.code, a) || spec.last != "" && len(a) > 2 && a[1] != '-' && strings.IndexByte(spec.last, a[len(a)-1]) >= 0
		if isCode && i+1 < len(args) {
			c.inline(spec, args[i+1])
			return
		}
		if (name == "pwsh" || name == "powershell") && psValueOpts()[strings.ToLower(a)] {
			i++ // -WindowStyle Hidden, -ExecutionPolicy Bypass: the value is no script
			continue
		}
		if a == "-r" || a == "-I" || a == "-W" || a == "-X" || a == "--require" || a == "--import" || a == "--loader" {
			i++ // skip the option's value
		}
	}
	c.stdinCode(sinkInterp)
}

func (c *cmd) inline(spec interpreter, code field) {
	c.skipField(code)
	f := inlineCode(spec.label, code.s)
	f.lowerable = f.cat == Moderate
	c.findings = append(c.findings, f)
	if !code.static && fetchesNetwork(code.word) {
		c.danger(scoreDangerHigh+5, false, spec.label+" runs code downloaded from the network")
	}
}

func (c *cmd) pythonModule(mod field, rest []field) {
	switch mod.s {
	case "pip", "pip3":
		c.run(append([]field{synth("pip")}, rest...))
	case "pytest", "unittest", "doctest", "json.tool", "py_compile", "compileall", "tabnanny", "pydoc", "site", "timeit", "platform", "this":
	case "http.server", "SimpleHTTPServer":
		c.moderate(scoreModerate, "serves files over HTTP")
	default:
		c.moderate(scoreModerate, "runs the Python module "+mod.s)
	}
}

// inlineCode judges code given to an interpreter on its command line or
// stdin: a socket wired to a shell is a reverse shell; running commands or
// deleting files is dangerous; anything else is moderate.
// psValueOpts are PowerShell's own options that take a value.
var psValueOpts = sync.OnceValue(func() map[string]bool {
	return map[string]bool{
		"-w": true, "-windowstyle": true, "-ep": true, "-ex": true, "-executionpolicy": true, "-wd": true,
		"-workingdirectory": true, "-of": true, "-outputformat": true, "-if": true, "-inputformat": true,
		"-configurationname": true, "-psconsolefile": true, "-version": true, "-settingsfile": true,
	}
})

func inlineCode(label, code string) finding {
	lc := strings.ToLower(code)
	if label == "PowerShell" && downloadCradle(lc) {
		return finding{cat: Dangerous, score: scoreDangerHigh + 5, reason: "inline PowerShell code runs code downloaded from the network"}
	}
	net := containsAnyOf(lc, "socket", "fsockopen", "tcpsocket", "/inet/tcp", "net.connect", "require('net')",
		`require("net")`, "io::socket", "net.sockets")
	runs := containsAnyOf(lc, "os.system", "subprocess", "os.popen", "popen(", "pty.spawn", "os.exec", "child_process",
		"execsync", "spawnsync", "spawn(", "system(", "exec(", "eval(", "shell_exec", "passthru", "proc_open", "runtime.exec",
		"/bin/sh", "/bin/bash", "cmd.exe", "dup2", "invoke-expression", "iex ", "start-process", "do shell script")
	if (label == "Perl" || label == "Ruby" || label == "PHP") && (strings.Contains(lc, "`") || strings.Contains(lc, "qx")) {
		runs = true
	}
	destroys := containsAnyOf(lc, "rmtree", "os.remove", "unlink", "os.rmdir", "rmsync", "rmdirsync",
		"fs.rm(", "fs.rm ", "rm -rf", "rm -r", "file.delete", "fileutils.rm", "remove_dir_all", "drop table",
		"drop database", "truncate table", "remove-item", "rmdir(")
	switch {
	case net && runs:
		return finding{cat: Blocked, score: scoreBlocked, reason: "reverse shell: inline " + label + " code connects a shell to the network"}
	case destroys:
		return finding{cat: Dangerous, score: scoreDangerous + 5, irreversible: true, reason: "inline " + label + " code deletes files or data"}
	case runs:
		return finding{cat: Dangerous, score: scoreDangerous, reason: "inline " + label + " code runs shell commands"}
	}
	return finding{cat: Moderate, score: scoreModerate, reason: "runs inline " + label + " code", lowerable: true}
}

func containsAnyOf(s string, subs ...string) bool {
	for _, x := range subs {
		if strings.Contains(s, x) {
			return true
		}
	}
	return false
}

func gpgCmd(c *cmd) {
	args := c.args()
	switch {
	case flagged(args, "", "--export-secret-keys", "--export-secret-subkeys", "--export-ssh-key"):
		c.danger(scoreDangerous+5, false, "gpg exports private keys")
	case flagged(args, "d", "--decrypt"):
		c.flags.decoder = true
		c.moderate(scoreModerate, "gpg decrypts data")
	case flagged(args, "kK", "--list-keys", "--list-secret-keys", "--fingerprint", "--verify", "--version", "--list-sigs"):
	default:
		c.moderate(scoreModerate, "gpg changes keys or files")
	}
}

// httpMethod returns the HTTP method a fetcher is told to use (curl -X
// DELETE, --request=DELETE, wget --method, http DELETE url), upper-cased.
func httpMethod(name string, args []field) string {
	for i, a := range args {
		switch {
		case (a.s == "-X" || a.s == "--request" || a.s == "--method") && i+1 < len(args):
			return strings.ToUpper(args[i+1].s)
		case strings.HasPrefix(a.s, "-X") && len(a.s) > 2:
			return strings.ToUpper(a.s[2:])
		case strings.HasPrefix(a.s, "--request=") || strings.HasPrefix(a.s, "--method="):
			_, v, _ := strings.Cut(a.s, "=")
			return strings.ToUpper(v)
		}
	}
	if name == "http" || name == "https" || name == "xh" {
		if ops := operands(args); len(ops) > 1 && strings.EqualFold(ops[0].s, "delete") {
			return "DELETE"
		}
	}
	return ""
}

// downloadCradle reports whether lower-cased PowerShell text downloads code
// and runs it: iex (New-Object Net.WebClient).DownloadString(…), iwr … | iex.
func downloadCradle(lc string) bool {
	fetches := containsAnyOf(lc, "downloadstring", "downloaddata", "downloadfile", "iwr ", "invoke-webrequest", "irm ",
		"invoke-restmethod", "net.webclient", "http://", "https://")
	runs := containsAnyOf(lc, "iex", "invoke-expression", "| powershell", "|powershell", "| pwsh", "scriptblock]::create")
	return fetches && runs
}
