package shell

import (
	"slices"
	"strconv"
	"strings"
)

// registerFiles registers the handlers of file tools (see loadHandlers).
func registerFiles() {
	register(rmCmd, "rm")
	// rimraf and del-cli are rm -rf written in JavaScript.
	register(func(c *cmd) {
		c.run(append([]field{synth("rm"), synth("-rf")}, operands(c.args())...))
	}, "rimraf", "del-cli")
	register(findCmd, "find")
	register(fdCmd, "fd", "fdfind")
	register(func(c *cmd) {
		c.danger(scoreDestroy, true, c.name+" overwrites files so they cannot be recovered")
	}, "shred", "srm", "wipe")
	register(func(c *cmd) {
		c.danger(scoreDestroy-5, true, "truncate cuts files short, destroying their contents")
	}, "truncate")
	register(func(c *cmd) {
		c.danger(scoreCatastrophe, true, c.name+" creates a file system, erasing the device")
	}, "mkfs", "mke2fs", "mkswap", "newfs", "mkdosfs")
	register(func(c *cmd) {
		c.danger(scoreCatastrophe, true, "wipefs erases file system signatures")
	}, "wipefs")
	register(partitionCmd, "fdisk", "sfdisk", "gdisk", "sgdisk", "cfdisk", "parted", "diskutil")
	register(ddCmd, "dd")
	register(chmodCmd, "chmod")
	register(chownCmd, "chown", "chgrp")
	register(copyCmd, "cp", "mv", "install", "ln", "rsync", "scp")
	register(teeCmd, "tee")
	register(sedCmd, "sed", "gsed")
	register(awkCmd, "awk", "gawk", "mawk", "nawk")
	register(func(c *cmd) { c.moderate(scoreWrite, c.name+" changes files") },
		"touch", "mkdir", "rmdir", "zip", "gzip", "gunzip", "bzip2", "bunzip2", "xz", "unxz", "7z", "zstd",
		"patch", "mktemp", "mkfifo", "dos2unix", "unix2dos", "sponge", "git-lfs")
	register(func(c *cmd) { c.add(Moderate, scoreWrite, true, "unlink deletes a file") }, "unlink")
	register(tarCmd, "tar")
	register(editorCmd, "vi", "vim", "nvim", "view", "ex", "nano", "emacs", "ed", "micro", "code", "subl")
	register(unzipCmd, "unzip")
	register(func(c *cmd) {
		c.danger(scoreDangerous, false, c.name+" changes file attributes that even root must undo")
	}, "chattr", "chflags")
	register(func(c *cmd) { c.danger(scoreDangerous, false, c.name+" changes file capabilities") }, "setcap", "setfacl")
}

// rmCmd: rm with -r and -f (in any spelling) is dangerous; with -r or on a
// critical path (/, ~, /etc, *) too; a plain rm is moderate.
func rmCmd(c *cmd) {
	args := c.args()
	recursive := flagged(args, "rR", "--recursive")
	force := flagged(args, "f", "--force")
	noRoot := flagged(args, "", "--no-preserve-root")
	ops := operands(args)
	critical := ""
	for _, o := range ops {
		if isCritical(c.w.c.normPath(o.s)) {
			critical = o.s
			break
		}
	}
	cleanup := len(ops) > 0
	for _, o := range ops {
		cleanup = cleanup && c.w.inCleanup(o)
	}
	switch {
	case noRoot:
		c.danger(scoreCatastrophe, true, "rm --no-preserve-root")
	case cleanup && critical == "":
		c.add(Moderate, scoreModerateHigh, true, "rm "+flagWords(recursive, force)+"deletes regenerated files inside the working directory ("+ops[0].s+")")
	case critical != "" && (recursive || force):
		c.danger(scoreCatastrophe, true, "rm "+flagWords(recursive, force)+"on "+critical)
	case recursive && force:
		c.danger(scoreDestroy, true, "rm with -r and -f"+describeTargets(ops))
	case critical != "":
		c.danger(scoreDestroy, true, "rm on "+critical)
	case recursive:
		c.add(Moderate, scoreModerateHigh, true, "rm -r deletes directory trees")
	default:
		c.add(Moderate, scoreModerate, true, "rm deletes files")
	}
}

func flagWords(r, f bool) string {
	switch {
	case r && f:
		return "with -r and -f "
	case r:
		return "with -r "
	}
	return "with -f "
}

// findCmd: find only lists, unless it deletes (-delete) or runs commands
// (-exec), which are judged as commands of their own.
func findCmd(c *cmd) {
	args := c.args()
	root := ""
	for _, a := range args {
		if strings.HasPrefix(a.s, "-") || a.s == "(" || a.s == "!" {
			break
		}
		if root == "" {
			root = a.s
		}
	}
	cleanup := findCleanup(c.w, root, args)
	if p := c.w.c.normPath(root); root != "" && p != "." && (isCritical(p) || isSystemPath(p) || isHomeish(root)) {
		c.flags.lists = true
	}
	for i := 0; i < len(args); i++ {
		switch args[i].s {
		case "-delete":
			if cleanup {
				c.add(Moderate, scoreModerateHigh, true, "find -delete deletes regenerated files inside the working directory")
				continue
			}
			score := scoreDestroy
			if isCritical(c.w.c.normPath(root)) {
				score = scoreCatastrophe
			}
			c.danger(score, true, "find -delete deletes every file it matches")
		case "-exec", "-execdir", "-ok", "-okdir":
			j := i + 1
			for j < len(args) && args[j].s != ";" && args[j].s != "+" {
				j++
			}
			run := args[i+1 : j]
			if len(run) > 0 && cleanup && commandName(run[0].s) == "rm" {
				c.add(Moderate, scoreModerateHigh, true, "find "+args[i].s+" rm deletes regenerated files inside the working directory")
				if id := run[0].id; id >= 0 && id < len(c.sh.cmdPos) {
					c.sh.cmdPos[id] = true
				}
				c.w.res.record(strs(run))
			} else if len(run) > 0 {
				if n := commandName(run[0].s); n == "rm" || n == "shred" || n == "unlink" {
					c.danger(scoreDestroy, true, "find "+args[i].s+" "+n+" deletes every file it matches")
				}
				if id := run[0].id; id >= 0 && id < len(c.sh.cmdPos) {
					c.sh.cmdPos[id] = true
				}
				c.w.simple(slices.Clone(run), stdin{})
			}
			i = j
		case "-fprint", "-fprint0", "-fprintf", "-fls":
			c.moderate(scoreWrite, "find "+args[i].s+" writes a file")
		}
	}
}

func fdCmd(c *cmd) {
	args := c.args()
	for i, a := range args {
		if a.s == "-x" || a.s == "--exec" || a.s == "-X" || a.s == "--exec-batch" {
			run := args[i+1:]
			if len(run) > 0 {
				if n := commandName(run[0].s); n == "rm" || n == "shred" {
					c.danger(scoreDestroy, true, c.name+" "+a.s+" "+n+" deletes every file it matches")
				}
				c.w.simple(slices.Clone(run), stdin{})
			}
			return
		}
	}
}

func partitionCmd(c *cmd) {
	if flagged(c.args(), "lp", "--list", "--print") || c.name == "diskutil" && (c.arg(1) == "list" || c.arg(1) == "info") {
		c.moderate(scoreModerate, c.name+" reads the partition table")
		return
	}
	c.danger(scoreCatastrophe, true, c.name+" changes a disk's partitions")
}

// ddCmd: dd of= writes straight to a file or a device.
func ddCmd(c *cmd) {
	out := ""
	for _, a := range c.args() {
		if v, ok := strings.CutPrefix(a.s, "of="); ok {
			out = v
			c.keyField(a) // written, not read
		}
	}
	switch p := c.w.c.normPath(out); {
	case out == "":
		c.moderate(scoreModerate, "dd copies raw data")
	case p == "/dev/null":
		// reads and discards: a disk or throughput check
	case harmlessDevice(p):
		c.moderate(scoreModerate, "dd copies raw data")
	case isDiskDevice(p):
		c.danger(scoreCatastrophe, true, "dd writes straight to the disk device "+p)
	default:
		c.danger(scoreDestroy-5, true, "dd of= overwrites "+out)
	}
}

// chmodCmd: world-writable modes, setuid and setgid are dangerous, as is a
// recursive change on a system path.
func chmodCmd(c *cmd) {
	args := c.args()
	recursive := flagged(args, "R", "--recursive")
	ops := operands(args)
	if len(ops) == 0 {
		return
	}
	mode := ops[0].s
	var targets []string
	for _, t := range ops[1:] {
		targets = append(targets, t.s)
	}
	switch {
	case worldWritable(mode):
		score := scoreDangerous
		if recursive {
			score = scoreDangerHigh
		}
		c.danger(score, false, "chmod "+mode+" makes files writable by everyone")
	case setID(mode):
		c.danger(scoreDangerHigh, false, "chmod "+mode+" sets setuid or setgid, letting a program run with its owner's rights")
	case recursive && anySystem(c, targets):
		c.danger(scoreDangerous, false, "chmod -R on a system path")
	default:
		c.moderate(scoreWrite, "chmod changes file permissions")
	}
}

func worldWritable(mode string) bool {
	if n, err := strconv.ParseUint(mode, 8, 32); err == nil && len(mode) >= 3 {
		return n&0o002 != 0
	}
	for _, clause := range strings.Split(mode, ",") {
		who, perm, ok := cutAny(clause, "+=")
		if !ok {
			continue
		}
		if strings.ContainsAny(who, "oa") && strings.Contains(perm, "w") {
			return true
		}
	}
	return false
}

func setID(mode string) bool {
	if n, err := strconv.ParseUint(mode, 8, 32); err == nil && len(mode) >= 4 {
		return n&0o6000 != 0
	}
	for _, clause := range strings.Split(mode, ",") {
		if _, perm, ok := cutAny(clause, "+="); ok && strings.Contains(perm, "s") {
			return true
		}
	}
	return false
}

// cutAny cuts s around the first of the separator characters.
func cutAny(s, seps string) (before, after string, found bool) {
	if i := strings.IndexAny(s, seps); i >= 0 {
		return s[:i], s[i+1:], true
	}
	return s, "", false
}

func anySystem(c *cmd, paths []string) bool {
	for _, p := range paths {
		n := c.w.c.normPath(p)
		if isSystemPath(n) || isCritical(n) {
			return true
		}
	}
	return false
}

func chownCmd(c *cmd) {
	args := c.args()
	ops := operands(args)
	var targets []string
	for _, t := range ops[min(1, len(ops)):] {
		targets = append(targets, t.s)
	}
	switch {
	case anySystem(c, targets):
		c.danger(scoreDangerous+5, false, c.name+" changes the owner of system files")
	case flagged(args, "R", "--recursive"):
		c.danger(scoreDangerous, false, c.name+" -R changes the owner of whole trees")
	default:
		c.moderate(scoreWrite, c.name+" changes file ownership")
	}
}

// copyCmd: cp, mv, install, ln, rsync and scp write their destination;
// onto a disk device, /dev/null, a system path or a start-up file they are
// dangerous; rsync --delete destroys.
func copyCmd(c *cmd) {
	args := c.args()
	ops := operands(args)
	if c.name == "rsync" && flagged(args, "n", "--dry-run") {
		return
	}
	if c.name == "scp" {
		if v, ok := value(optsOf(args), "-i"); ok {
			c.keyField(v.f)
		}
	}
	if c.name == "rsync" && flagged(args, "", "--delete", "--delete-before", "--delete-during", "--delete-after", "--delete-excluded", "--del", "--remove-source-files") {
		c.danger(scoreDestroy-5, true, "rsync --delete deletes files at the destination")
		return
	}
	if len(ops) == 0 {
		c.moderate(scoreWrite, c.name+" writes files")
		return
	}
	dest := ops[len(ops)-1].s
	if v, ok := value(optsOf(args), "-t", "--target-directory"); ok {
		dest = v.val
	} else if len(ops) > 1 {
		c.keyField(ops[len(ops)-1]) // written, not read: cp .env.example .env
	}
	p := c.w.c.normPath(dest)
	switch {
	case isDiskDevice(p):
		c.danger(scoreCatastrophe, true, c.name+" writes straight to the disk device "+p)
	case p == "/dev/null" && c.name == "mv":
		c.danger(scoreDestroy, true, "mv to /dev/null destroys the files")
	case harmlessDevice(p):
		c.moderate(scoreWrite, c.name+" writes to "+p)
	case isStartupFile(p):
		c.danger(scoreDangerHigh, false, c.name+" changes "+dest+", which runs or grants access at every login")
	case isSystemPath(p):
		c.danger(scoreDangerHigh, true, c.name+" overwrites system files in "+dest)
	case c.name == "mv" && movesSystem(c, ops[:len(ops)-1]):
		c.danger(scoreDestroy, true, "mv moves a system directory or the home directory away")
	case c.name == "mv":
		c.moderate(scoreWrite, "mv moves files")
	default:
		c.moderate(scoreWrite, c.name+" writes files")
	}
}

// optsOf reads every option wherever it stands, for the few handlers that
// need an option's value.
func optsOf(args []field) []opt {
	var out []opt
	for i, f := range args {
		if f.s == "--" {
			break
		}
		if strings.HasPrefix(f.s, "--") {
			name, val, _ := strings.Cut(f.s, "=")
			out = append(out, opt{name: name, val: val})
		} else if len(f.s) == 2 && f.s[0] == '-' && i+1 < len(args) {
			out = append(out, opt{name: f.s, val: args[i+1].s, f: args[i+1]})
		}
	}
	return out
}

func teeCmd(c *cmd) {
	appendOnly := flagged(c.args(), "a", "--append")
	for _, o := range operands(c.args()) {
		c.w.checkTarget(o, true, appendOnly)
		c.skipField(o)
	}
}

// sedCmd: sed prints unless it edits in place (-i) or its script writes
// files (w) or runs commands (e).
func sedCmd(c *cmd) {
	args := c.args()
	if flagged(args, "i", "--in-place") {
		c.moderate(scoreWrite, "sed -i edits files in place")
	}
	if flagged(args, "i", "--in-place") {
		// The files named are written: a start-up file or a system file
		// edited in place is judged like a redirect into it.
		values := map[int]bool{}
		explicit := false
		for k, a := range args {
			if (a.s == "-e" || a.s == "-f" || a.s == "--expression" || a.s == "--file" || a.s == "-l") && k+1 < len(args) {
				values[args[k+1].id] = true
				explicit = explicit || a.s != "-l"
			}
		}
		ops := operands(args)
		for k, o := range ops {
			if values[o.id] || k == 0 && !explicit {
				continue
			}
			if p := c.w.c.normPath(o.s); isStartupFile(p) || isSystemPath(p) {
				c.w.checkTarget(o, true, false)
				c.keyField(o)
			}
		}
	}
	var scripts []string
	opts, i := scanOpts(c.argv, 1, "efl", "--expression", "--file", "--line-length")
	for _, o := range opts {
		if o.name == "-e" || o.name == "--expression" {
			scripts = append(scripts, o.val)
		}
	}
	if len(scripts) == 0 && i < len(c.argv) {
		scripts = append(scripts, c.argv[i].s)
	}
	for _, s := range scripts {
		if sedRuns(s) {
			c.danger(scoreDangerous, false, "the sed script runs commands (e)")
		} else if sedWrites(s) {
			c.moderate(scoreWrite, "the sed script writes files (w)")
		}
	}
}

// sedRuns reports whether a sed script uses the e command or the s///e
// flag, which run shell commands.
func sedRuns(s string) bool {
	for _, cmdText := range strings.FieldsFunc(s, func(r rune) bool { return r == ';' || r == '\n' }) {
		t := strings.TrimLeft(strings.TrimSpace(cmdText), "0123456789,$/!^ ")
		if t == "e" || strings.HasPrefix(t, "e ") {
			return true
		}
		if strings.HasPrefix(strings.TrimSpace(cmdText), "s") && len(cmdText) > 1 {
			sep := strings.TrimSpace(cmdText)[1]
			parts := strings.Split(strings.TrimSpace(cmdText), string(sep))
			if len(parts) >= 4 && strings.Contains(parts[len(parts)-1], "e") {
				return true
			}
		}
	}
	return false
}

func sedWrites(s string) bool {
	for _, cmdText := range strings.FieldsFunc(s, func(r rune) bool { return r == ';' || r == '\n' }) {
		t := strings.TrimLeft(strings.TrimSpace(cmdText), "0123456789,$/!^ ")
		if strings.HasPrefix(t, "w ") || strings.HasPrefix(t, "W ") {
			return true
		}
	}
	return false
}

// awkCmd: an awk program that calls system(), pipes to a command or opens
// a network socket is judged by what it can do.
func awkCmd(c *cmd) {
	opts, i := scanOpts(c.argv, 1, "fvF", "--file", "--assign", "--field-separator")
	if has(opts, "-f", "--file") || i >= len(c.argv) {
		if has(opts, "-f", "--file") {
			c.moderate(scoreModerate, c.name+" runs a program file")
		}
		return
	}
	prog := strings.ToLower(c.argv[i].s)
	switch {
	case strings.Contains(prog, "/inet/"):
		c.block("reverse shell: " + c.name + " opens a network socket (/inet/)")
	case strings.Contains(prog, "system(") || strings.Contains(prog, "| getline") || strings.Contains(prog, "|&") ||
		strings.Contains(prog, "print |") || strings.Contains(prog, "printf |") || strings.Contains(prog, `print|`):
		c.danger(scoreDangerous, false, "the "+c.name+" program runs shell commands")
	case strings.Contains(prog, "print >") || strings.Contains(prog, "printf >") || strings.Contains(prog, "print>"):
		c.moderate(scoreWrite, "the "+c.name+" program writes files")
	}
}

func tarCmd(c *cmd) {
	args := c.args()
	for i, a := range args {
		name, val, hasEq := strings.Cut(a.s, "=")
		if !hasEq && i+1 < len(args) && (name == "-I" || name == "--to-command" || name == "--use-compress-program" || name == "--info-script" || name == "--new-volume-script") {
			val, hasEq = args[i+1].s, true
		}
		switch {
		case !hasEq:
		case name == "--checkpoint-action" && strings.HasPrefix(val, "exec="):
			val = strings.TrimPrefix(val, "exec=")
		case name == "-I" || name == "--to-command" || name == "--use-compress-program" || name == "--info-script" || name == "--new-volume-script":
		default:
			continue
		}
		if hasEq {
			c.moderate(scoreModerate, "tar "+name+" runs a command")
			c.w.nested(val)
		}
	}
	first := c.arg(1)
	mode := first
	if strings.HasPrefix(first, "-") {
		mode = first[1:]
	}
	switch {
	case flagged(args, "", "--list") || !strings.HasPrefix(first, "--") && strings.Contains(mode, "t"):
		return
	case flagged(args, "", "--remove-files"):
		c.add(Moderate, scoreModerateHigh, true, "tar --remove-files deletes the files it archives")
	case flagged(args, "", "--extract", "--get") || !strings.HasPrefix(first, "--") && strings.Contains(mode, "x"):
		if v, ok := value(optsOf(args), "-C", "--directory"); ok && (isSystemPath(c.w.c.normPath(v.val)) || c.w.c.normPath(v.val) == "/") {
			c.danger(scoreDangerHigh, true, "tar extracts over system files in "+v.val)
			return
		}
		c.moderate(scoreWrite, "tar extracts files")
	default:
		c.moderate(scoreWrite, "tar writes an archive")
	}
}

func unzipCmd(c *cmd) {
	if flagged(c.args(), "lvtZ", "--list") {
		return
	}
	if v, ok := value(optsOf(c.args()), "-d"); ok {
		if p := c.w.c.normPath(v.val); p == "/" || isSystemPath(p) {
			c.danger(scoreDangerHigh, true, "unzip extracts over system files in "+v.val)
			return
		}
	}
	c.moderate(scoreWrite, "unzip extracts files")
}

// editorCmd: an editor changes files; vim's -c and +commands starting with
// ! run shell commands, judged in turn.
func editorCmd(c *cmd) {
	c.moderate(scoreWrite, c.name+" edits files")
	args := c.args()
	for i, a := range args {
		cmdText := ""
		switch {
		case a.s == "-c" && i+1 < len(args):
			cmdText = args[i+1].s
		case strings.HasPrefix(a.s, "+") || strings.HasPrefix(a.s, "--cmd="):
			cmdText = strings.TrimPrefix(strings.TrimPrefix(a.s, "+"), "--cmd=")
		default:
			continue
		}
		if sh, ok := strings.CutPrefix(strings.TrimLeft(cmdText, ": "), "!"); ok {
			c.moderate(scoreModerate, c.name+" runs a shell command")
			c.w.nested(sh)
		}
	}
}

// findCleanup reports whether a find only matches regenerated files inside
// the working directory: a relative root without "..", every -name or
// -iname a pattern of generated files, no -o, -not or "!" that could widen
// the match.
func findCleanup(w *walker, root string, args []field) bool {
	if root == "" {
		root = "."
	}
	if w.cwdMoved || !insideWorkdir(root) {
		return false
	}
	named := false
	for i, a := range args {
		switch a.s {
		case "-o", "-or", "-not", "!", ",", "-regex", "-iregex", "-path", "-ipath", "-wholename":
			return false
		case "-name", "-iname":
			if i+1 >= len(args) || !cleanupPatterns()[args[i+1].s] {
				return false
			}
			named = true
		}
	}
	return named
}

// describeTargets names, for the reason people read, where an rm deletes
// when that is not plainly inside the working directory: the home
// directory, above the working directory, a path known only at run time.
func describeTargets(ops []field) string {
	for _, o := range ops {
		s := o.s
		switch {
		case strings.HasPrefix(s, "~/") || strings.HasPrefix(s, "$HOME/"):
			return " in the home directory (" + s + ")"
		case s == ".." || strings.HasPrefix(s, "../") || strings.Contains(s, "/../"):
			return " above the working directory (" + s + ")"
		case !o.static:
			return " of a path known only at run time (" + s + ")"
		}
	}
	return ""
}

// movesSystem reports whether an mv moves the root, the home directory or
// a system path away: mv /etc ~/.Trash is deleting it by another name.
func movesSystem(c *cmd, srcs []field) bool {
	for _, f := range srcs {
		p := c.w.c.normPath(f.s)
		if p == "/" || p == "~" || isHomeish(f.s) || isSystemPath(p) {
			return true
		}
	}
	return false
}
