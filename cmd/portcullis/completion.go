package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/portcullis/portcullis/hook"
)

// completionCommand is one command of run's dispatch, for the shell
// completions. Flags are not listed here: they are read from each
// command's own -h output, so they cannot drift from the flag sets.
type completionCommand struct {
	name string
	help string
	// subs are the words that may follow the command.
	subs []string
	// subFlags: each sub has its own flag set (policy lint, audit tail);
	// otherwise the command's flags apply after a sub too (grants revoke).
	subFlags bool
}

// completionCommands lists every command of run in main.go (a test keeps
// the two in step).
func completionCommands() []completionCommand {
	return []completionCommand{
		{name: "decide", help: "decide JSON-line requests from stdin"},
		{name: "explain", help: "show which stage decided a request and why"},
		{name: "policy", help: "lint, test, diff and replay policy files; print the built-in default", subs: []string{"lint", "test", "diff", "replay", "show-default"}, subFlags: true},
		{name: "classify", help: "classify a shell command without running it"},
		{name: "audit", help: "read, verify, export and prune the audit log", subs: []string{"tail", "query", "verify", "export", "prune"}, subFlags: true},
		{name: "unblock", help: "clear a danger-zone block"},
		{name: "approvals", help: "list approval requests"},
		{name: "approve", help: "approve a held call"},
		{name: "deny", help: "deny a held call"},
		{name: "grants", help: "list or revoke grants", subs: []string{"revoke"}},
		{name: "mcp", help: "wrap a stdio MCP server"},
		{name: "serve", help: "run the HTTP gateway"},
		{name: "witness", help: "run a reference audit witness", subs: []string{"serve"}, subFlags: true},
		{name: "bench", help: "load a running gateway and check its audit log"},
		{name: "tools", help: "list pinned MCP tools; accept a changed one", subs: []string{"accept"}},
		{name: "budgets", help: "list the use of the policy's budgets"},
		{name: "hook", help: "answer a host's hook event", subs: append(hookHosts(), "install"), subFlags: true},
		{name: "exec", help: "classify, gate and run a shell command"},
		{name: "version", help: "print the version, commit and build date"},
		{name: "completion", help: "print a shell completion script", subs: []string{"bash", "zsh", "fish"}},
		{name: "help", help: "print the usage"},
	}
}

func hookHosts() []string {
	var names []string
	for _, h := range hook.Hosts {
		names = append(names, h.Name())
	}
	return names
}

// completionFlags holds, for each command ("policy lint" for a command
// whose subs have their own flags), its flags and which of them take a
// value.
type completionFlags struct {
	all, valued []string
}

var flagLine = regexp.MustCompile(`(?m)^  -([A-Za-z0-9][\w-]*)(?: (\S+))?(?:\t|$)`)

// readFlags runs the command with -h and reads its flags from the usage
// the flag package prints.
func readFlags(ctx context.Context, args []string) completionFlags {
	var errb bytes.Buffer
	// -h makes every command print its flags and return before it does
	// anything; the error is flag.ErrHelp.
	_ = run(ctx, append(slices.Clip(args), "-h"), strings.NewReader(""), io.Discard, &errb)
	var f completionFlags
	for _, m := range flagLine.FindAllStringSubmatch(errb.String(), -1) {
		// The flag package takes -name and --name alike; the docs write
		// --name, and -v for one letter.
		name := "--" + m[1]
		if len(m[1]) == 1 {
			name = "-" + m[1]
		}
		if slices.Contains(f.all, name) {
			continue
		}
		f.all = append(f.all, name)
		if m[2] != "" {
			f.valued = append(f.valued, "--"+m[1], "-"+m[1])
		}
	}
	return f
}

// completionTable returns the flags of every command, keyed as the
// scripts look them up.
func completionTable(ctx context.Context) (map[string]completionFlags, []string) {
	flags := map[string]completionFlags{}
	var keys []string
	for _, c := range completionCommands() {
		if c.name == "help" || c.name == "completion" {
			continue
		}
		if c.subFlags {
			for _, s := range c.subs {
				k := c.name + " " + s
				flags[k] = readFlags(ctx, []string{c.name, s})
				keys = append(keys, k)
			}
			continue
		}
		flags[c.name] = readFlags(ctx, []string{c.name})
		keys = append(keys, c.name)
	}
	return flags, keys
}

func runCompletion(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("completion", stderr, `completion bash|zsh|fish

  bash:  source <(portcullis completion bash)      (or save it in /etc/bash_completion.d/portcullis)
  zsh:   source <(portcullis completion zsh)       (or save it as _portcullis in a directory of $fpath)
  fish:  portcullis completion fish > ~/.config/fish/completions/portcullis.fish`)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		fs.Usage()
		return usageError("completion takes one shell: bash, zsh or fish")
	}
	flags, keys := completionTable(ctx)
	var script string
	switch pos[0] {
	case "bash":
		script = bashCompletion(flags, keys)
	case "zsh":
		script = zshCompletion(flags, keys)
	case "fish":
		script = fishCompletion(flags, keys)
	default:
		return usageError("completion: unknown shell %q (want bash, zsh or fish)", pos[0])
	}
	_, err = io.WriteString(stdout, script)
	return err
}

func commandNames() []string {
	var names []string
	for _, c := range completionCommands() {
		names = append(names, c.name)
	}
	return names
}

// subFlagCommands are the commands whose subs have flag sets of their own.
func subFlagCommands() []string {
	var names []string
	for _, c := range completionCommands() {
		if c.subFlags {
			names = append(names, c.name)
		}
	}
	return names
}

func bashCompletion(flags map[string]completionFlags, keys []string) string {
	var b strings.Builder
	b.WriteString(`# bash completion for portcullis; generated by ` + "`portcullis completion bash`" + `.
# Load it with: source <(portcullis completion bash)

_portcullis() {
    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"
    local cmd="${COMP_WORDS[1]}" key i
    COMPREPLY=()
    if [[ $COMP_CWORD -eq 1 ]]; then
        COMPREPLY=($(compgen -W "` + strings.Join(commandNames(), " ") + `" -- "$cur"))
        return
    fi
    # After --, the words are a command's own: complete file names.
    for ((i = 2; i < COMP_CWORD; i++)); do
        [[ ${COMP_WORDS[i]} == "--" ]] && return
    done
    if [[ $COMP_CWORD -eq 2 && $cur != -* ]]; then
        case "$cmd" in
`)
	for _, c := range completionCommands() {
		if len(c.subs) > 0 {
			fmt.Fprintf(&b, "            %s) COMPREPLY=($(compgen -W %q -- \"$cur\")); return ;;\n", c.name, strings.Join(c.subs, " "))
		}
	}
	b.WriteString(`        esac
    fi
    key="$cmd"
    case "$cmd" in
        ` + strings.Join(subFlagCommands(), "|") + `) key="$cmd ${COMP_WORDS[2]}" ;;
    esac
    local flags="" valued=""
    case "$key" in
`)
	for _, k := range keys {
		f := flags[k]
		fmt.Fprintf(&b, "        %q) flags=%q; valued=%q ;;\n", k, strings.Join(f.all, " "), strings.Join(f.valued, " "))
	}
	b.WriteString(`    esac
    # A flag that takes a value: leave it to the default (file names).
    [[ -n $valued && " $valued " == *" $prev "* ]] && return
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$flags" -- "$cur"))
    fi
}

complete -o default -F _portcullis portcullis
`)
	return b.String()
}

func zshCompletion(flags map[string]completionFlags, keys []string) string {
	var b strings.Builder
	b.WriteString(`#compdef portcullis
# zsh completion for portcullis; generated by ` + "`portcullis completion zsh`" + `.
# Load it with: source <(portcullis completion zsh), or save it as _portcullis in $fpath.

_portcullis() {
    local -a commands subs flags valued
    commands=(
`)
	for _, c := range completionCommands() {
		fmt.Fprintf(&b, "        %s\n", zshQuote(c.name+":"+c.help))
	}
	b.WriteString(`    )
    if (( CURRENT == 2 )); then
        _describe -t commands 'portcullis command' commands
        return
    fi
    local cmd=${words[2]} key i
    for (( i = 3; i < CURRENT; i++ )); do
        [[ ${words[i]} == -- ]] && { _files; return }
    done
    if (( CURRENT == 3 )) && [[ $PREFIX != -* ]]; then
        case $cmd in
`)
	for _, c := range completionCommands() {
		if len(c.subs) > 0 {
			fmt.Fprintf(&b, "            %s) subs=(%s); compadd -a subs; return ;;\n", c.name, strings.Join(c.subs, " "))
		}
	}
	b.WriteString(`        esac
    fi
    key=$cmd
    case $cmd in
        ` + strings.Join(subFlagCommands(), "|") + `) key="$cmd ${words[3]}" ;;
    esac
    case $key in
`)
	for _, k := range keys {
		f := flags[k]
		fmt.Fprintf(&b, "        %s) flags=(%s); valued=(%s) ;;\n", zshQuote(k), strings.Join(f.all, " "), strings.Join(f.valued, " "))
	}
	b.WriteString(`    esac
    if (( ${valued[(Ie)${words[CURRENT-1]}]} )); then
        _files
        return
    fi
    if [[ $PREFIX == -* ]]; then
        compadd -a flags
        return
    fi
    _files
}

if [[ $funcstack[1] == _portcullis ]]; then
    _portcullis "$@"
else
    compdef _portcullis portcullis
fi
`)
	return b.String()
}

// zshQuote quotes s in single quotes for zsh.
func zshQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func fishCompletion(flags map[string]completionFlags, keys []string) string {
	var b strings.Builder
	b.WriteString(`# fish completion for portcullis; generated by ` + "`portcullis completion fish`" + `.
# Save it as ~/.config/fish/completions/portcullis.fish

`)
	for _, c := range completionCommands() {
		fmt.Fprintf(&b, "complete -c portcullis -n __fish_use_subcommand -f -a %s -d %s\n", c.name, zshQuote(c.help))
	}
	for _, c := range completionCommands() {
		if len(c.subs) == 0 {
			continue
		}
		subs := strings.Join(c.subs, " ")
		fmt.Fprintf(&b, "complete -c portcullis -n '__fish_seen_subcommand_from %s; and not __fish_seen_subcommand_from %s' -f -a %s\n", c.name, subs, zshQuote(subs))
	}
	for _, k := range keys {
		cond := "__fish_seen_subcommand_from " + k
		if cmd, sub, ok := strings.Cut(k, " "); ok {
			cond = "__fish_seen_subcommand_from " + cmd + "; and __fish_seen_subcommand_from " + sub
		}
		f := flags[k]
		for _, name := range f.all {
			opt := "-l " + strings.TrimPrefix(name, "--")
			if !strings.HasPrefix(name, "--") {
				opt = "-s " + strings.TrimPrefix(name, "-")
			}
			line := fmt.Sprintf("complete -c portcullis -n '%s' %s", cond, opt)
			if slices.Contains(f.valued, "--"+strings.TrimLeft(name, "-")) {
				line += " -r -F"
			}
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}
