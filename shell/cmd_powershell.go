package shell

import (
	"strings"
)

// PowerShell cmdlets and aliases, and cmd.exe built-ins, spelled directly
// on the line. Their names are looked up without regard to case.
// registerPowerShell registers the handlers of PowerShell and cmd.exe commands (see loadHandlers).
func registerPowerShell() {
	register(func(*cmd) {}, "get-childitem", "gci", "get-location", "gl", "get-process", "gps", "get-service",
		"get-command", "gcm", "get-help", "test-path", "resolve-path", "get-item", "gi", "select-object",
		"where-object", "sort-object", "measure-object", "format-table", "ft", "format-list", "fl",
		"write-output", "write-host", "out-host", "get-date", "get-alias", "gal", "get-module",
		"get-psdrive", "get-filehash", "compare-object", "convertto-json", "convertfrom-json", "out-null",
		"get-itemproperty", "join-path", "split-path", "get-member", "findstr", "tasklist", "ver",
		"systeminfo", "ipconfig", "get-culture", "get-host", "get-history", "get-computerinfo", "get-acl")
	register(psReadCmd, "get-content", "gc", "select-string", "sls", "import-csv", "get-filehash")
	register(psRemoveCmd, "remove-item", "ri", "del", "erase", "rd")
	register(rmdirCmd, "rmdir")
	register(psIexCmd, "invoke-expression", "iex")
	register(psFetchCmd, "invoke-webrequest", "iwr", "invoke-restmethod", "irm", "start-bitstransfer")
	register(psWriteCmd, "set-content", "add-content", "out-file", "new-item", "ni")
	register(cmdExeCmd, "cmd", "cmd.exe")
	register(psStartCmd, "start-process", "saps")
	register(func(c *cmd) { c.danger(scoreDangerHigh, false, c.name+" stops or restarts the machine") },
		"stop-computer", "restart-computer")
	register(func(c *cmd) { c.danger(scoreCatastrophe, true, c.name+" erases a disk or volume") },
		"format-volume", "clear-disk", "initialize-disk", "remove-partition", "diskpart")
	register(func(c *cmd) { c.danger(scoreDestroy, true, c.name+" empties the recycle bin for good") }, "clear-recyclebin")
	register(func(c *cmd) { c.danger(scoreDangerHigh, false, c.name+" changes how the machine boots") }, "bcdedit")
	register(func(c *cmd) {
		if anyArgFold(c.args(), "delete", "resize") {
			c.danger(scoreDestroy, true, "vssadmin deletes the volume shadow copies, the machine's backups")
			return
		}
		c.moderate(scoreModerate, "vssadmin manages shadow copies")
	}, "vssadmin")
	register(func(c *cmd) {
		if anyArgFold(c.args(), "bypass", "unrestricted") {
			c.danger(scoreDangerous, false, "Set-ExecutionPolicy lets any script run")
			return
		}
		c.moderate(scoreModerate, "Set-ExecutionPolicy changes which scripts may run")
	}, "set-executionpolicy")
	register(func(c *cmd) {
		if sub := strings.ToLower(c.arg(1)); sub == "delete" || sub == "add" || sub == "import" || sub == "restore" {
			c.danger(scoreDangerHigh, sub == "delete", "reg "+sub+" changes the Windows registry")
		}
	}, "reg", "reg.exe")
	register(func(c *cmd) {
		if anyArgFold(c.args(), "/create", "/change") {
			c.danger(scoreDangerHigh, false, "schtasks installs a scheduled task, which runs later with no one asking")
			return
		}
		if anyArgFold(c.args(), "/delete", "/run", "/end") {
			c.moderate(scoreModerateHigh, "schtasks changes scheduled tasks")
		}
	}, "schtasks", "schtasks.exe")
	register(func(c *cmd) {
		if anyArgFold(c.args(), "/add", "/delete") && anyArgFold(c.args(), "user", "localgroup", "group") {
			c.danger(scoreDangerHigh, false, "net "+c.arg(1)+" changes accounts or groups")
			return
		}
		c.moderate(scoreModerate, "net "+c.arg(1))
	}, "net", "net.exe")
	register(func(c *cmd) {
		for _, a := range c.args() {
			if strings.HasPrefix(strings.ToLower(a.s), "/w") {
				c.danger(scoreDestroy, true, "cipher /w overwrites the free space of a drive")
				return
			}
		}
		c.moderate(scoreModerate, "cipher changes file encryption")
	}, "cipher", "cipher.exe")
	register(func(c *cmd) {
		for _, a := range c.args() {
			if len(a.s) == 2 && a.s[1] == ':' || len(a.s) == 3 && a.s[1] == ':' {
				c.danger(scoreCatastrophe, true, "format "+a.s+" erases a drive")
				return
			}
		}
		c.moderate(scoreModerate, "unknown command: format")
	}, "format", "format.com")
}

func anyArgFold(args []field, vals ...string) bool {
	for _, a := range args {
		for _, v := range vals {
			if strings.EqualFold(a.s, v) {
				return true
			}
		}
	}
	return false
}

// rawText returns a word as it was written, before the shell's unquoting
// removed its backslashes: C:\Users\me stays C:\Users\me.
func (w *walker) rawText(f field) string {
	if f.word == nil {
		return f.s
	}
	start, end := int(f.word.Pos().Offset()), int(f.word.End().Offset())
	if start < 0 || end > len(w.src) || start >= end {
		return f.s
	}
	s := w.src[start:end]
	if len(s) >= 2 && (s[0] == '\'' || s[0] == '"') && s[len(s)-1] == s[0] {
		s = s[1 : len(s)-1]
	}
	return s
}

// winPath turns a Windows path into the form the path checks read:
// backslashes become slashes, and the home directory however it is named
// ($HOME, $env:USERPROFILE, %USERPROFILE%, C:\Users\name) becomes ~.
func winPath(s string) string {
	p := strings.ReplaceAll(s, `\`, "/")
	low := strings.ToLower(p)
	for _, h := range []string{"$home", "$env:userprofile", "%userprofile%", "$env:home", "${env:userprofile}", "~"} {
		if low == h || strings.HasPrefix(low, h+"/") {
			return "~" + p[len(h):]
		}
	}
	if len(low) > 9 && low[1] == ':' && strings.HasPrefix(low[2:], "/users/") {
		rest := p[9:]
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			return "~" + rest[i:]
		}
		return "~"
	}
	return p
}

// winCritical reports whether deleting a Windows path destroys a system or
// a home: a drive's root, C:\Windows, C:\Users, a user's home.
func winCritical(p string) bool {
	low := strings.ToLower(strings.TrimRight(strings.TrimSuffix(p, "/*"), "/*"))
	if low == "~" || low == "" || low == "." || low == ".." || low == "/" {
		return true
	}
	if len(low) == 2 && low[1] == ':' {
		return true
	}
	if len(low) > 3 && low[1] == ':' && low[2] == '/' {
		switch low[3:] {
		case "windows", "users", "program files", "program files (x86)", "programdata", "windows/system32":
			return true
		}
	}
	return isCritical(p)
}

// switchArg reports whether a word is a cmd.exe switch (/s, /q, /f:x).
func switchArg(s string) bool {
	return len(s) >= 2 && s[0] == '/' && (len(s) == 2 || s[2] == ':') && (s[1] >= 'a' && s[1] <= 'z' || s[1] >= 'A' && s[1] <= 'Z')
}

// psRemoveCmd: Remove-Item -Recurse -Force, rd /s /q and del /s /q delete
// trees; on a drive's root or a home they destroy a system.
func psRemoveCmd(c *cmd) {
	recursive, force := false, false
	var targets []string
	var fields []field
	args := c.w.psWords(c.args())
	for i := 0; i < len(args); i++ {
		a := args[i]
		low := strings.ToLower(a.s)
		switch {
		case low == "-recurse" || low == "-r" || low == "-rec" || low == "/s":
			recursive = true
		case low == "-force" || low == "-fo" || low == "-f" || low == "/q" || low == "/f":
			force = true
		case low == "-path" || low == "-literalpath" || low == "-lp":
			if i+1 < len(args) {
				i++
				targets = append(targets, winPath(c.w.rawText(args[i])))
				fields = append(fields, args[i])
			}
		case strings.HasPrefix(low, "-") || switchArg(a.s):
		default:
			targets = append(targets, winPath(c.w.rawText(a)))
			fields = append(fields, a)
		}
	}
	what := c.name
	critical, cleanup := "", len(targets) > 0
	for i, t := range targets {
		if winCritical(t) {
			critical = t
		}
		f := fields[i]
		cleanup = cleanup && c.w.inCleanup(field{s: t, static: f.static, glob: f.glob})
	}
	switch {
	case critical != "" && (recursive || force):
		c.danger(scoreCatastrophe, true, what+" deletes "+critical+" and everything beneath it")
	case recursive && cleanup:
		c.add(Moderate, scoreModerateHigh, true, what+" deletes regenerated files inside the working directory")
	case recursive && (force || c.name == "rd" || c.name == "rmdir"):
		c.danger(scoreDestroy, true, what+" deletes directory trees without asking ("+strings.Join(targets, ", ")+")")
	case recursive:
		c.add(Moderate, scoreModerateHigh, true, what+" deletes directory trees")
	case critical != "":
		c.danger(scoreDestroy, true, what+" deletes "+critical)
	default:
		c.add(Moderate, scoreModerate, true, what+" deletes files")
	}
}

// rmdirCmd: the Unix rmdir removes empty directories; cmd's rmdir /s
// deletes trees.
func rmdirCmd(c *cmd) {
	for _, a := range c.args() {
		if strings.EqualFold(a.s, "/s") {
			psRemoveCmd(c)
			return
		}
	}
	c.moderate(scoreWrite, c.name+" changes files")
}

// psReadCmd: reading a file is safe unless it is a secret one.
func psReadCmd(c *cmd) {
	for _, a := range c.args() {
		if strings.HasPrefix(a.s, "-") {
			continue
		}
		p := winPath(c.w.rawText(a))
		if c.w.isSecret(field{s: p, static: a.static, glob: a.glob}) {
			c.danger(scoreDangerous+5, false, "reads a secret file: "+c.w.rawText(a))
			return
		}
	}
}

// psWriteCmd: Set-Content, Out-File and the like write their -Path; the
// PowerShell profile runs at every start.
func psWriteCmd(c *cmd) {
	args := c.args()
	for i, a := range args {
		low := strings.ToLower(a.s)
		var t field
		switch {
		case (low == "-path" || low == "-filepath" || low == "-literalpath") && i+1 < len(args):
			t = args[i+1]
		case i == 0 && !strings.HasPrefix(low, "-"):
			t = a
		default:
			continue
		}
		raw := c.w.rawText(t)
		if strings.HasPrefix(strings.ToLower(raw), "$profile") {
			c.danger(scoreDangerHigh, false, c.name+" changes the PowerShell profile, which runs at every start")
			return
		}
		c.w.checkTarget(field{s: winPath(raw), static: t.static, id: -1}, true, strings.EqualFold(c.name, "add-content"))
		c.skipField(t)
		return
	}
	c.moderate(scoreWrite, c.name+" writes files")
}

// psIexCmd: Invoke-Expression runs its argument, or what is piped into
// it, as code.
func psIexCmd(c *cmd) {
	args := c.args()
	if len(args) == 0 {
		c.stdinCode(sinkShell)
		return
	}
	text := strings.ToLower(strings.Join(strs(args), " "))
	if containsAnyOf(text, "downloadstring", "downloaddata", "downloadfile", "http://", "https://", "iwr", "invoke-webrequest", "irm ", "invoke-restmethod") {
		c.danger(scoreDangerHigh+5, false, c.name+" runs code downloaded from the network")
		return
	}
	c.code(joinFields(args), c.name)
}

func psFetchCmd(c *cmd) {
	c.flags.net = true
	c.moderate(scoreModerate, c.name+" makes a network request")
}

func psStartCmd(c *cmd) {
	if anyArgFold(c.args(), "runas") {
		c.danger(scoreDangerHigh, false, c.name+" -Verb RunAs runs a program as administrator")
		return
	}
	c.moderate(scoreModerate, c.name+" starts a program")
	for i, a := range c.args() {
		if !strings.HasPrefix(a.s, "-") {
			c.run(c.argv[i+1:])
			return
		}
	}
}

// cmdExeCmd: cmd /c runs the rest of the line as a command.
func cmdExeCmd(c *cmd) {
	args := c.args()
	for i, a := range args {
		if strings.EqualFold(a.s, "/c") || strings.EqualFold(a.s, "/k") || strings.EqualFold(a.s, "/r") {
			if i+1 < len(args) {
				c.code(joinFields(args[i+1:]), "cmd /c")
			}
			return
		}
	}
	c.moderate(scoreModerate, "starts cmd")
}

// windowsish reports whether a word as written is a Windows path:
// backslashes and no slashes, or a PowerShell or cmd variable.
func windowsish(raw string) bool {
	low := strings.ToLower(raw)
	return strings.Contains(raw, `\`) && !strings.Contains(raw, "/") || strings.HasPrefix(low, "$env:") || strings.HasPrefix(raw, "%")
}

// psWords re-reads a PowerShell command's arguments from the text as
// written, split at blanks: the shell's reading of C:\ -Recurse (an
// escaped blank) joins what PowerShell keeps apart.
func (w *walker) psWords(args []field) []field {
	if len(args) == 0 || args[0].word == nil || args[len(args)-1].word == nil {
		return args
	}
	start, end := int(args[0].word.Pos().Offset()), int(args[len(args)-1].word.End().Offset())
	if start < 0 || end > len(w.src) || start >= end {
		return args
	}
	raw := w.src[start:end]
	if !strings.Contains(raw, `\ `) {
		return args
	}
	var out []field
	for _, t := range strings.Fields(raw) {
		t = strings.Trim(t, `"'`)
		out = append(out, field{s: t, id: -1, static: !strings.Contains(t, "$(")})
	}
	return out
}
