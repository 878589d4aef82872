package shell

import (
	"path"
	"slices"
	"strings"
	"sync"
)

// registerSystem registers the handlers of system and package tools (see loadHandlers).
func registerSystem() {
	register(killCmd, "kill", "pkill", "killall", "killall5", "skill")
	register(systemctlCmd, "systemctl")
	register(serviceCmd, "service", "launchctl", "rc-service", "sv")
	register(func(c *cmd) {
		if flagged(c.args(), "c", "--cancel") || c.name == "shutdown" && c.arg(1) == "-c" {
			c.moderate(scoreModerate, "cancels a scheduled shutdown")
			return
		}
		c.danger(scoreDangerHigh, false, c.name+" shuts down or restarts the machine")
	}, "shutdown", "reboot", "halt", "poweroff", "init", "telinit", "kexec")
	register(crontabCmd, "crontab")
	register(func(c *cmd) {
		if hasPrefixArg(c.args(), "--vacuum", "--rotate", "--flush", "--relinquish-var", "--setup-keys") {
			c.add(Moderate, scoreModerate, true, "journalctl "+c.arg(1)+" deletes or moves logs")
		}
	}, "journalctl")
	register(func(c *cmd) {
		c.moderate(scoreModerateHigh, c.name+" schedules commands to run later")
		if !flagged(c.args(), "lfdrc") {
			c.stdinCode(sinkShell)
		}
	}, "at", "batch")
	register(func(c *cmd) {
		c.danger(scoreDangerous+5, c.name == "userdel" || c.name == "deluser" || c.name == "groupdel", c.name+" changes user accounts or privileges")
	}, "useradd", "userdel", "usermod", "passwd", "chpasswd", "groupadd", "groupdel", "groupmod", "adduser",
		"deluser", "addgroup", "delgroup", "gpasswd", "visudo", "vipw", "vigr", "chsh", "chage", "newgrp", "dscl")
	register(func(c *cmd) {
		if len(operands(c.args())) == 0 && !flagged(c.args(), "a", "--all") {
			return
		}
		c.danger(scoreDangerous, false, c.name+" changes mounted file systems")
	}, "mount")
	register(func(c *cmd) { c.moderate(scoreModerateHigh, c.name+" changes mounted file systems or swap") }, "umount", "swapoff", "swapon")
	register(func(c *cmd) {
		if flagged(c.args(), "w", "--write", "--load", "--system") || anyArgContains(c.args(), "=") {
			c.danger(scoreDangerous, false, "sysctl changes kernel settings")
		}
	}, "sysctl")
	register(func(c *cmd) { c.danger(scoreDangerous+5, false, c.name+" changes kernel modules") }, "modprobe", "insmod", "rmmod")
	register(firewallCmd, "iptables", "ip6tables", "nft", "ufw", "firewall-cmd", "pfctl", "iptables-restore")
	register(ipCmd, "ip")
	register(netConfigCmd, "ifconfig", "route", "arp", "hostname", "nmcli", "networksetup", "date", "timedatectl", "hwclock")
	register(func(c *cmd) { c.moderate(scoreModerate, c.name+" changes process priority") }, "renice")
	register(pkgCmd, "apt", "apt-get", "aptitude", "apt-cache", "yum", "dnf", "zypper", "apk", "brew", "port", "snap",
		"flatpak", "nix-env", "pkg", "choco", "winget", "scoop", "pip", "pipx", "uv", "poetry", "pdm", "conda",
		"mamba", "micromamba", "npm", "pnpm", "yarn", "gem", "bundle", "cargo", "composer", "pacman", "dpkg",
		"rpm", "mas", "cpan", "cpanm", "luarocks", "opam", "cabal", "stack", "mix", "dotnet", "nuget", "rustup",
		"sdk", "asdf", "mise", "nvm", "pyenv", "rbenv", "helmfile", "krew")
	register(func(c *cmd) {
		c.moderate(scoreModerateHigh, c.name+" downloads and runs a package from the registry")
		c.unknownWrapper() // npx --yes -- rm -rf ~ runs rm
	}, "npx", "pnpx", "bunx", "uvx")
	register(goCmd, "go")
	register(makeCmd, "make", "gmake", "just", "task", "ninja", "mage", "rake", "gradle", "gradlew", "mvn", "ant",
		"bazel", "meson", "scons")
}

func anyArgContains(args []field, s string) bool {
	for _, a := range args {
		if strings.Contains(a.s, s) {
			return true
		}
	}
	return false
}

// namesPortcullis reports whether any argument names Portcullis (a process,
// a service, a container).
func namesPortcullis(args []field) bool {
	for _, a := range args {
		if strings.Contains(strings.ToLower(a.s), "portcullis") {
			return true
		}
	}
	return false
}

// killCmd: signalling Portcullis is blocked; SIGKILL to everything, to
// init or by name with -9 is dangerous; other signals are moderate.
func killCmd(c *cmd) {
	args := c.args()
	if namesPortcullis(args) {
		c.block("signals the Portcullis process: an agent must not stop its own gate")
		return
	}
	switch c.name {
	case "killall5":
		c.danger(scoreDangerHigh, false, "killall5 signals every process")
		return
	case "kill":
		sig, pids := "", []string{}
		for i := 0; i < len(args); i++ {
			a := args[i].s
			switch {
			case a == "-l" || a == "-L" || a == "--list" || a == "--table":
				return
			case a == "-s" || a == "-n" || a == "--signal":
				if i+1 < len(args) {
					sig = args[i+1].s
					i++
				}
			case a == "--":
				for _, p := range args[i+1:] {
					pids = append(pids, p.s)
				}
				i = len(args)
			case strings.HasPrefix(a, "-") && sig == "" && len(pids) == 0:
				sig = a[1:]
			default:
				pids = append(pids, a)
			}
		}
		if sig == "0" {
			return // signal 0 only asks whether the process exists
		}
		for _, p := range pids {
			if p == "1" || p == "-1" {
				c.danger(scoreDangerHigh, false, "kill "+p+" signals init or every process")
				return
			}
		}
		c.moderate(scoreModerate, "kill signals a process")
	default:
		if flagged(args, "9") || hasArg(args, "-KILL", "-SIGKILL", "-kill") || hasSigKill(args) {
			c.danger(scoreDangerous+5, false, c.name+" -9 kills every process that matches")
			return
		}
		c.moderate(scoreModerate, c.name+" stops processes by name")
	}
}

func hasArg(args []field, vals ...string) bool {
	for _, a := range args {
		if slices.Contains(vals, a.s) {
			return true
		}
	}
	return false
}

// killSignal reports whether --signal names SIGKILL.
func killSignal(args []field) bool {
	for i, a := range args {
		v := ""
		switch {
		case strings.HasPrefix(a.s, "--signal="):
			v = strings.TrimPrefix(a.s, "--signal=")
		case a.s == "--signal" && i+1 < len(args):
			v = args[i+1].s
		default:
			continue
		}
		if isKill(v) {
			return true
		}
	}
	return false
}

func hasSigKill(args []field) bool {
	for i, a := range args {
		if a.s == "-s" && i+1 < len(args) && isKill(args[i+1].s) {
			return true
		}
	}
	return killSignal(args)
}

func isKill(v string) bool {
	v = strings.ToUpper(strings.TrimPrefix(v, "-"))
	return v == "9" || v == "KILL" || v == "SIGKILL"
}

func systemctlCmd(c *cmd) {
	sub, _ := subcommand(c.argv, 1, "HMpst", "--host", "--machine", "--property", "--signal", "--type", "--state")
	switch sub {
	case "", "status", "show", "cat", "is-active", "is-enabled", "is-failed", "is-system-running", "help", "--version",
		"list-units", "list-unit-files", "list-sockets", "list-timers", "list-jobs", "list-dependencies", "get-default",
		"show-environment", "list-machines":
		return
	case "reboot", "poweroff", "halt", "kexec", "suspend", "hibernate", "hybrid-sleep", "emergency", "rescue", "isolate", "default", "soft-reboot":
		c.danger(scoreDangerHigh, false, "systemctl "+sub+" stops or restarts the machine")
		return
	}
	if namesPortcullis(c.args()) {
		c.block("systemctl " + sub + " acts on the Portcullis service: an agent must not stop its own gate")
		return
	}
	switch sub {
	case "enable", "reenable", "link", "preset", "preset-all", "add-wants", "add-requires", "set-default", "edit":
		c.danger(scoreDangerHigh, false, "systemctl "+sub+" makes a service start at every boot or login")
		return
	}
	c.moderate(scoreModerateHigh, "systemctl "+sub+" changes services")
}

func serviceCmd(c *cmd) {
	if namesPortcullis(c.args()) {
		c.block(c.name + " acts on the Portcullis service: an agent must not stop its own gate")
		return
	}
	if c.name == "launchctl" && (c.arg(1) == "list" || c.arg(1) == "print") || c.arg(1) == "--status-all" {
		return
	}
	if c.name == "launchctl" {
		switch c.arg(1) {
		case "load", "bootstrap", "enable", "submit":
			c.danger(scoreDangerHigh, false, "launchctl "+c.arg(1)+" makes a job start at every boot or login")
			return
		}
	}
	c.moderate(scoreModerateHigh, c.name+" changes services")
}

func crontabCmd(c *cmd) {
	switch {
	case flagged(c.args(), "r", "--remove"):
		c.danger(scoreDangerHigh, true, "crontab -r deletes every scheduled job")
	case flagged(c.args(), "l", "--list"):
	case flagged(c.args(), "e", "--edit"):
		c.moderate(scoreModerateHigh, "crontab -e edits scheduled jobs")
	default:
		c.danger(scoreDangerHigh, false, "crontab installs scheduled jobs, which run later with no one asking")
	}
}

func firewallCmd(c *cmd) {
	args := c.args()
	switch {
	case flagged(args, "LS", "--list", "--list-rules", "--list-all", "--state") || c.arg(1) == "status" || c.arg(1) == "list" || c.arg(1) == "show":
	case flagged(args, "FX", "--flush", "--delete-chain") || c.arg(1) == "disable" || c.arg(1) == "reset" || c.arg(1) == "flush" || hasArg(args, "-F", "flush"):
		c.danger(scoreDangerHigh, false, c.name+" removes firewall rules")
	default:
		c.moderate(scoreModerateHigh, c.name+" changes firewall rules")
	}
}

func ipCmd(c *cmd) {
	for _, a := range c.args() {
		switch a.s {
		case "add", "del", "delete", "set", "flush", "change", "replace", "append", "exec":
			c.moderate(scoreModerateHigh, "ip "+a.s+" changes network configuration")
			return
		}
	}
}

// packageTool lists, per package manager, the subcommands that only read,
// run project scripts, or publish.
type packageTool struct {
	read    []string
	run     []string
	publish []string
}

var packageTools = sync.OnceValue(func() map[string]packageTool {
	m := map[string]packageTool{
		"apt":       {read: []string{"list", "search", "show", "policy", "madison", "depends", "rdepends", "changelog", "help", "showsrc", "showpkg", "stats", "pkgnames", "dump", "download"}},
		"yum":       {read: []string{"list", "search", "info", "provides", "repolist", "check-update", "history", "deplist", "help"}},
		"zypper":    {read: []string{"search", "se", "info", "if", "list-updates", "lu", "repos", "lr", "help"}},
		"apk":       {read: []string{"info", "search", "list", "policy", "stats", "dot", "help"}},
		"brew":      {read: []string{"list", "ls", "info", "search", "outdated", "doctor", "config", "deps", "uses", "leaves", "desc", "home", "--prefix", "--cellar", "--repository", "--version", "help", "commands", "log", "cat"}},
		"snap":      {read: []string{"list", "info", "find", "search", "version", "help", "services"}},
		"flatpak":   {read: []string{"list", "info", "search", "remote-ls", "history", "help"}},
		"pip":       {read: []string{"list", "show", "freeze", "search", "check", "help", "config", "debug", "inspect", "index", "hash", "cache"}},
		"pipx":      {read: []string{"list", "environment", "help"}, run: []string{"run"}},
		"uv":        {read: []string{"tree", "version", "help", "--version", "python"}, run: []string{"run"}},
		"poetry":    {read: []string{"show", "check", "about", "env", "search", "version", "help", "config"}, run: []string{"run"}, publish: []string{"publish"}},
		"pdm":       {read: []string{"list", "show", "info", "search", "config"}, run: []string{"run"}, publish: []string{"publish"}},
		"conda":     {read: []string{"list", "info", "search", "env", "config", "help", "doctor"}, run: []string{"run"}},
		"npm":       {read: []string{"ls", "list", "la", "ll", "view", "v", "info", "show", "outdated", "search", "s", "help", "whoami", "doctor", "explain", "why", "root", "bin", "prefix", "config", "get", "fund", "ping", "query", "-v", "--version", "audit"}, run: []string{"run", "run-script", "rum", "urn", "test", "t", "tst", "start", "stop", "restart", "exec", "x", "rebuild"}, publish: []string{"publish", "unpublish", "deprecate", "dist-tag", "owner", "access"}},
		"yarn":      {read: []string{"info", "list", "why", "outdated", "licenses", "help", "--version", "config", "audit"}, run: []string{"run", "test", "start", "exec", "build", "lint", "dev", "node"}, publish: []string{"publish", "npm"}},
		"gem":       {read: []string{"list", "search", "info", "query", "environment", "which", "contents", "specification", "help", "outdated", "dependency"}, publish: []string{"push", "yank", "owner"}},
		"bundle":    {read: []string{"list", "show", "outdated", "check", "info", "platform", "help", "config"}, run: []string{"exec"}},
		"cargo":     {read: []string{"build", "b", "check", "c", "test", "t", "clippy", "doc", "d", "tree", "metadata", "search", "verify-project", "version", "--version", "bench", "help", "locate-project", "pkgid"}, run: []string{"run", "r"}, publish: []string{"publish", "yank", "owner"}},
		"composer":  {read: []string{"show", "outdated", "validate", "--version", "help", "licenses", "depends", "why", "prohibits", "why-not", "search", "info", "audit", "diagnose", "check-platform-reqs"}, run: []string{"run-script", "run", "exec"}},
		"mas":       {read: []string{"list", "search", "info", "outdated", "account", "help"}},
		"dotnet":    {read: []string{"--version", "--info", "--list-sdks", "--list-runtimes", "build", "test", "help", "list"}, run: []string{"run", "exec"}, publish: []string{"nuget"}},
		"rustup":    {read: []string{"show", "check", "which", "help", "--version"}},
		"helmfile":  {read: []string{"list", "diff", "template", "lint", "status", "build", "help"}, publish: []string{"destroy", "delete"}},
		"opam":      {read: []string{"list", "show", "search", "info", "config", "env", "switch", "help"}},
		"cabal":     {read: []string{"build", "test", "list", "info", "check", "help", "--version"}, run: []string{"run", "exec"}, publish: []string{"upload"}},
		"stack":     {read: []string{"build", "test", "ls", "query", "path", "--version", "help"}, run: []string{"run", "exec"}, publish: []string{"upload"}},
		"mix":       {read: []string{"compile", "test", "format", "help", "deps.tree", "hex.info"}, run: []string{"run"}, publish: []string{"hex.publish"}},
		"nuget":     {read: []string{"list", "search", "help", "locals"}, publish: []string{"push", "delete"}},
		"luarocks":  {read: []string{"list", "search", "show", "doc", "help", "path", "config"}, publish: []string{"upload"}},
		"asdf":      {read: []string{"list", "current", "where", "which", "help", "info", "plugin-list"}},
		"mise":      {read: []string{"ls", "list", "current", "where", "which", "doctor", "help", "env"}, run: []string{"exec", "x", "run", "r"}},
		"krew":      {read: []string{"list", "info", "search", "help"}},
		"apt-cache": {read: []string{"search", "show", "policy", "madison", "depends", "rdepends", "showpkg", "showsrc", "stats", "pkgnames", "dump", "dumpavail", "unmet", "help"}},
	}
	aliasPackageTools(m)
	return m
})

// aliasPackageTools gives the aliases their tool's spec.
func aliasPackageTools(packageTools map[string]packageTool) {
	for _, alias := range [][2]string{{"apt-get", "apt"}, {"aptitude", "apt"}, {"dnf", "yum"}, {"port", "brew"},
		{"pnpm", "npm"}, {"mamba", "conda"}, {"micromamba", "conda"}, {"choco", "brew"}, {"winget", "brew"},
		{"scoop", "brew"}, {"pkg", "apk"}, {"cpanm", "cpan"}, {"nvm", "asdf"}, {"pyenv", "asdf"}, {"rbenv", "asdf"},
		{"sdk", "asdf"}} {
		packageTools[alias[0]] = packageTools[alias[1]]
	}
}

// pkgCmd judges package managers: queries are safe, installs and removals
// moderate, running project scripts moderate, publishing dangerous.
func pkgCmd(c *cmd) {
	switch c.name {
	case "pacman", "dpkg", "rpm", "nix-env":
		letters := "Q"
		switch c.name {
		case "dpkg":
			letters = "lLsSp"
		case "rpm":
			letters = "q"
		case "nix-env":
			letters = "q"
		}
		if a := c.arg(1); len(a) > 1 && a[0] == '-' && a[1] != '-' && strings.ContainsAny(a[1:2], letters) ||
			hasArg(c.args(), "--query", "--list", "--status", "--search", "--listfiles", "--print-architecture", "--version", "--help") {
			return
		}
		c.moderate(scoreModerateHigh, c.name+" changes installed packages")
		return
	}
	spec := packageTools()[c.name]
	sub, k := subcommand(c.argv, 1, "")
	if c.name == "uv" && sub == "pip" || c.name == "pipx" && sub == "runpip" {
		sub, _ = subcommand(c.argv, k, "")
		spec = packageTools()["pip"]
	}
	switch {
	case sub == "" && (c.name == "yarn" || c.name == "bundle"):
		c.moderate(scoreModerateHigh, c.name+" installs the project's packages")
	case sub == "" || strings.HasPrefix(sub, "-") && len(c.argv) == 2 || slices.Contains(spec.read, sub):
		if sub == "audit" && flagged(c.args(), "", "--fix") || sub == "config" && (slices.Contains(strs(c.args()), "set") || slices.Contains(strs(c.args()), "delete")) {
			c.moderate(scoreModerate, c.name+" "+sub+" changes settings")
		}
	case slices.Contains(spec.publish, sub):
		c.danger(scoreDangerous, sub == "unpublish" || sub == "yank", c.name+" "+sub+" publishes or withdraws a package for everyone")
	case slices.Contains(spec.run, sub) || c.name == "yarn" && !isInstallWord(sub):
		c.moderate(scoreModerate, c.name+" "+sub+" runs the project's scripts")
		c.unknownWrapper() // bundle exec rm -rf ~, uv run rm -rf ~
	default:
		c.moderate(scoreModerateHigh, c.name+" "+sub+" changes installed packages")
		if sub == "exec" || sub == "run" {
			c.unknownWrapper() // asdf exec, mise exec
		}
	}
}

func isInstallWord(s string) bool {
	switch s {
	case "add", "install", "remove", "upgrade", "up", "update", "global", "link", "unlink", "import", "dlx", "create", "init", "set", "workspaces", "workspace", "cache", "policies", "plugin":
		return true
	}
	return false
}

// goValueFlags are the go command's build and test flags that take a value.
var goValueFlags = sync.OnceValue(func() map[string]bool {
	return map[string]bool{"-C": true, "-o": true, "-p": true, "-tags": true, "-ldflags": true, "-gcflags": true,
		"-asmflags": true, "-mod": true, "-modfile": true, "-overlay": true, "-pgo": true, "-exec": true, "-toolexec": true,
		"-buildmode": true, "-compiler": true, "-installsuffix": true, "-pkgdir": true, "-covermode": true, "-coverpkg": true,
		"-run": true, "-bench": true, "-count": true, "-timeout": true, "-cpu": true, "-parallel": true, "-fuzz": true,
		"-fuzztime": true, "-skip": true, "-benchtime": true, "-coverprofile": true, "-cpuprofile": true, "-memprofile": true, "-shuffle": true}
})

// goCmd: building, testing and inspecting are safe; go run and generate
// run code; go install and go get install it. go run of Portcullis's own
// command is judged as that command.
func goCmd(c *cmd) {
	i := 1
	for i < len(c.argv) && strings.HasPrefix(c.argv[i].s, "-") {
		if c.argv[i].s == "-C" {
			i++
		}
		i++
	}
	if i >= len(c.argv) {
		return
	}
	sub := c.argv[i].s
	rest := c.argv[i+1:]
	c.canon = append([]string{"go", sub}, strs(rest)...)
	k := 0
	for k < len(rest) && strings.HasPrefix(rest[k].s, "-") {
		name, val, hasEq := strings.Cut(strings.Replace(rest[k].s, "--", "-", 1), "=")
		if !hasEq && goValueFlags()[name] && k+1 < len(rest) {
			k++
			val = rest[k].s
		}
		if name == "-exec" || name == "-toolexec" {
			c.moderate(scoreModerate, "go "+name+" runs another program")
			c.w.nested(val)
		}
		k++
	}
	switch sub {
	case "test", "build", "vet", "version", "list", "doc", "help", "bug":
	case "env":
		if flagged(rest, "wu") {
			c.moderate(scoreModerate, "go env -w changes Go's settings")
		}
	case "mod":
		if k < len(rest) && (rest[k].s == "graph" || rest[k].s == "why" || rest[k].s == "verify") {
			return
		}
		c.moderate(scoreModerate, "go mod changes the module's files")
	case "run":
		if k < len(rest) {
			pkg := strings.TrimSuffix(strings.SplitN(rest[k].s, "@", 2)[0], "/")
			if path.Base(pkg) == "portcullis" {
				c.run(append([]field{synth("portcullis")}, rest[k+1:]...))
				return
			}
		}
		c.moderate(scoreModerate, "go run builds and runs a program")
	case "install", "get":
		c.moderate(scoreModerateHigh, "go "+sub+" installs Go packages")
	case "generate":
		c.moderate(scoreModerate, "go generate runs the commands of //go:generate lines")
	default:
		c.moderate(scoreModerate, "go "+sub+" changes files")
	}
}

func makeCmd(c *cmd) {
	if flagged(c.args(), "n", "--dry-run", "--just-print", "--recon") || c.name == "make" && hasArg(c.args(), "--version", "-v", "--help") {
		return
	}
	c.moderate(scoreModerate, c.name+" runs the build's commands")
}

// netConfigCmd: these commands show settings, and change them when given
// more to do: hostname NAME, date -s, ifconfig eth0 down, route add.
func netConfigCmd(c *cmd) {
	args := c.args()
	ops := operands(args)
	changes := false
	switch c.name {
	case "hostname":
		changes = len(ops) > 0 || flagged(args, "bF", "--boot", "--file")
	case "date":
		changes = flagged(args, "s", "--set")
	case "hwclock":
		changes = flagged(args, "w", "--systohc", "--set", "--hctosys", "-s")
	case "timedatectl":
		changes = len(ops) > 0 && strings.HasPrefix(ops[0].s, "set")
	case "ifconfig":
		changes = len(ops) > 1
	case "route", "arp":
		changes = hasArg(args, "add", "del", "delete", "flush", "change", "replace", "-d", "-s", "-f")
	default:
		changes = len(ops) > 0 && !slices.Contains([]string{"show", "list", "status", "-listallnetworkservices", "-getinfo"}, ops[0].s)
	}
	if changes {
		c.moderate(scoreModerateHigh, c.name+" changes system or network settings")
	}
}
