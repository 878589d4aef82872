package shell

import (
	"strings"
	"sync"
)

// registerGit registers the handlers of git (see loadHandlers).
func registerGit() {
	register(gitCmd, "git")
}

var gitReadOnly = sync.OnceValue(func() map[string]bool {
	return map[string]bool{
		"status": true, "log": true, "diff": true, "show": true, "shortlog": true, "blame": true, "annotate": true,
		"describe": true, "rev-parse": true, "rev-list": true, "ls-files": true, "ls-tree": true, "ls-remote": true,
		"cat-file": true, "grep": true, "fetch": true, "help": true, "version": true, "whatchanged": true, "var": true,
		"for-each-ref": true, "show-ref": true, "show-branch": true, "cherry": true, "range-diff": true,
		"diff-tree": true, "diff-files": true, "diff-index": true, "merge-base": true, "name-rev": true,
		"count-objects": true, "fsck": true, "verify-commit": true, "verify-tag": true, "check-ignore": true,
		"check-attr": true, "check-ref-format": true, "show-index": true, "difftool": true,
	}
})

var gitChanging = sync.OnceValue(func() map[string]bool {
	return map[string]bool{
		"add": true, "pull": true, "merge": true, "cherry-pick": true, "revert": true, "mv": true, "init": true,
		"clone": true, "am": true, "apply": true, "notes": true, "sparse-checkout": true, "bundle": true,
		"archive": true, "format-patch": true, "lfs": true, "maintenance": true, "replace": true, "repack": true,
		"stage": true, "send-email": true, "commit": true, "rebase": true, "prune": true, "worktree": true,
		"gc": true, "mergetool": true, "request-pull": true, "citool": true, "gui": true, "range-diff": true,
	}
})

// gitCmd judges git by its subcommand, after its global options: history
// loss (push --force, reset --hard, clean -f, checkout --, branch -D,
// stash drop/clear, filter-branch) is dangerous and irreversible.
func gitCmd(c *cmd) {
	opts, i := scanOpts(c.argv, 1, "Cc", "--git-dir", "--work-tree", "--namespace", "--config-env", "--super-prefix")
	for _, o := range opts {
		if o.name == "-c" {
			c.gitConfig(o.val, o.f)
		}
	}
	if i >= len(c.argv) {
		return // prints help or the version
	}
	sub := c.argv[i].s
	rest := c.argv[i+1:]
	c.canon = append([]string{"git", sub}, strs(rest)...)
	ops := operands(rest)
	op0 := ""
	if len(ops) > 0 {
		op0 = ops[0].s
	}
	switch {
	case sub == "status" || sub == "log" || sub == "ls-files" || sub == "check-ignore" || sub == "check-attr":
		c.sh.meta = true
	case gitReadOnly()[sub]:
	case sub == "push":
		gitPush(c, rest)
	case sub == "reset":
		if flagged(rest, "", "--hard") {
			c.danger(scoreDestroy-5, true, "git reset --hard discards uncommitted changes")
		} else {
			c.moderate(scoreModerate, "git reset moves the branch")
		}
	case sub == "clean":
		switch {
		case flagged(rest, "n", "--dry-run"):
		case flagged(rest, "f", "--force"):
			c.danger(scoreDestroy-5, true, "git clean -f deletes untracked files")
		default:
			c.moderate(scoreModerate, "git clean")
		}
	case sub == "checkout":
		gitCheckout(c, rest)
	case sub == "restore":
		if flagged(rest, "S", "--staged") && !flagged(rest, "W", "--worktree") {
			c.moderate(scoreModerate, "git restore --staged unstages changes")
		} else {
			c.danger(scoreDangerHigh, true, "git restore discards uncommitted changes")
		}
	case sub == "switch":
		if flagged(rest, "f", "--discard-changes", "--force") {
			c.danger(scoreDangerHigh, true, "git switch --discard-changes discards uncommitted changes")
		} else {
			c.moderate(scoreModerate, "git switch changes branch")
		}
	case sub == "branch":
		gitBranch(c, rest, ops)
	case sub == "tag":
		switch {
		case flagged(rest, "d", "--delete"):
			c.add(Moderate, scoreModerate, true, "git tag -d deletes a tag")
		case len(ops) == 0 || flagged(rest, "l", "--list", "--contains", "--points-at", "--merged"):
		default:
			c.moderate(scoreModerate, "git tag creates a tag")
		}
	case sub == "remote":
		if op0 != "" && op0 != "show" && op0 != "get-url" {
			c.moderate(scoreModerate, "git remote "+op0+" changes the remotes")
		}
	case sub == "config":
		gitConfigCmd(c, rest, ops)
	case sub == "stash":
		switch op0 {
		case "list", "show":
		case "drop", "clear":
			c.danger(scoreDangerHigh, true, "git stash "+op0+" deletes stashed changes")
		default:
			c.moderate(scoreModerate, "git stash sets changes aside")
		}
	case sub == "filter-branch" || sub == "filter-repo":
		c.danger(scoreDestroy, true, "git "+sub+" rewrites the whole history")
	case sub == "reflog":
		if op0 == "expire" || op0 == "delete" {
			c.danger(scoreDestroy-5, true, "git reflog "+op0+" removes the history of where branches pointed")
		}
	case sub == "gc" && hasPrefixArg(rest, "--prune=now", "--prune=all"):
		c.danger(scoreDangerHigh, true, "git gc --prune=now deletes unreachable commits for good")
	case sub == "update-ref" && flagged(rest, "d", "--delete"):
		c.danger(scoreDangerHigh, true, "git update-ref -d deletes a ref")
	case sub == "submodule" && op0 == "foreach":
		k := 0
		for k < len(rest) && rest[k].s != "foreach" {
			k++
		}
		_, j := scanOpts(rest, k+1, "")
		if j < len(rest) {
			c.code(joinFields(rest[j:]), "git submodule foreach")
		}
	case sub == "bisect" && op0 == "run":
		c.run(ops[1:])
	case sub == "rm" && flagged(rest, "f", "--force") && !flagged(rest, "", "--cached"):
		c.sh.meta = true
		c.danger(scoreDestroy-5, true, "git rm -f deletes files with their uncommitted changes")
	case sub == "rm":
		c.sh.meta = true
		c.add(Moderate, scoreModerate, true, "git rm deletes files (they stay in the history)")
	case sub == "worktree" && op0 == "remove" && flagged(rest, "f", "--force"):
		c.danger(scoreDestroy-5, true, "git worktree remove --force deletes a worktree with its uncommitted changes")
	case gitChanging()[sub] || sub == "submodule" || sub == "bisect" || sub == "gc" || sub == "update-ref":
		c.moderate(scoreModerate, "git "+sub+" changes the repository")
	default:
		c.moderate(scoreModerate, "unknown git subcommand (it may be an alias): "+sub)
	}
}

func hasPrefixArg(args []field, prefixes ...string) bool {
	for _, a := range args {
		for _, p := range prefixes {
			if strings.HasPrefix(a.s, p) {
				return true
			}
		}
	}
	return false
}

func gitPush(c *cmd, rest []field) {
	if flagged(rest, "n", "--dry-run") {
		return
	}
	force := flagged(rest, "f", "--force", "--force-with-lease", "--force-if-includes", "--mirror")
	del := flagged(rest, "d", "--delete", "--prune")
	for _, o := range operands(rest) {
		switch {
		case strings.HasPrefix(o.s, "+"):
			force = true
		case strings.HasPrefix(o.s, ":") && len(o.s) > 1:
			del = true
		}
	}
	switch {
	case force:
		c.danger(scoreDestroy-5, true, "git push --force rewrites shared history")
	case del:
		c.danger(scoreDestroy-5, true, "git push deletes remote branches")
	default:
		c.moderate(scoreModerate, "git push publishes commits")
	}
}

func gitCheckout(c *cmd, rest []field) {
	if flagged(rest, "f", "--force") {
		c.danger(scoreDangerHigh, true, "git checkout -f discards uncommitted changes")
		return
	}
	for i, a := range rest {
		if a.s == "--" && i+1 < len(rest) {
			c.danger(scoreDangerHigh, true, "git checkout -- discards uncommitted changes to the files")
			return
		}
	}
	for _, o := range operands(rest) {
		if o.s == "." || o.s == "*" || o.s == ":/" {
			c.danger(scoreDangerHigh, true, "git checkout "+o.s+" discards uncommitted changes")
			return
		}
	}
	c.moderate(scoreModerate, "git checkout changes branch or files")
}

func gitBranch(c *cmd, rest, ops []field) {
	switch {
	case flagged(rest, "D") || flagged(rest, "d", "--delete") && flagged(rest, "f", "--force"):
		c.danger(scoreDangerHigh, true, "git branch -D deletes a branch even when it is not merged")
	case flagged(rest, "d", "--delete"):
		c.add(Moderate, scoreModerate, true, "git branch -d deletes a merged branch")
	case flagged(rest, "mMcCu", "--move", "--copy", "--set-upstream-to", "--unset-upstream", "--edit-description", "--track"):
		c.moderate(scoreModerate, "git branch changes branches")
	case len(ops) == 0 || flagged(rest, "alrv", "--list", "--all", "--remotes", "--contains", "--merged", "--no-merged", "--show-current", "--points-at"):
	default:
		c.moderate(scoreModerate, "git branch creates a branch")
	}
}

func gitConfigCmd(c *cmd, rest, ops []field) {
	if flagged(rest, "l", "--get", "--get-all", "--get-regexp", "--list", "--get-urlmatch", "--get-color", "--get-colorbool", "--show-origin", "--show-scope") && !flagged(rest, "", "--add", "--replace-all", "--unset", "--unset-all") {
		return
	}
	switch len(ops) {
	case 0:
		return
	case 1:
		if ops[0].s == "get" || ops[0].s == "list" {
			return
		}
		if !strings.Contains(ops[0].s, " ") {
			return // reads one key
		}
	}
	if len(ops) >= 2 {
		key, val := ops[0], ops[1]
		if key.s == "set" && len(ops) >= 3 {
			key, val = ops[1], ops[2]
		}
		c.gitConfig(key.s+"="+val.s, val)
	}
	c.moderate(scoreModerate, "git config changes the configuration")
}

// gitConfig judges a git setting that runs commands: an alias starting
// with !, a pager, an editor, an ssh command, a credential helper.
func (c *cmd) gitConfig(kv string, f field) {
	key, val, _ := strings.Cut(kv, "=")
	key = strings.ToLower(key)
	run := ""
	switch {
	case strings.HasPrefix(key, "alias.") && strings.HasPrefix(val, "!"):
		run = val[1:]
	case key == "credential.helper" && strings.HasPrefix(val, "!"):
		run = val[1:]
	case key == "core.pager" || key == "core.sshcommand" || key == "core.editor" || key == "core.fsmonitor" ||
		key == "sequence.editor" || key == "diff.external" || key == "gpg.program" || key == "core.askpass" ||
		key == "uploadpack.packobjectshook" || strings.HasPrefix(key, "pager.") || strings.HasSuffix(key, ".textconv"):
		run = val
	case key == "core.hookspath":
		c.moderate(scoreModerate, "git -c core.hooksPath runs hooks from another directory")
		return
	default:
		return
	}
	c.moderate(scoreModerate, "git setting "+key+" runs a command")
	c.skipField(f)
	c.w.nested(run)
}
