// Command portcullis is the one binary of the Portcullis permission gateway.
// It is the only package that wires the engine to its adapters: flags,
// environment and files are read here and nowhere else.
//
// main calls run, which takes its arguments and streams explicitly, so tests
// run the real command in process.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	args := os.Args[1:]
	// Started as portcullis-sh (a link to this binary): a login-shell
	// wrapper that gates every command it is given.
	if sh, ok := shellInvocation(os.Args[0], args); ok {
		args = sh
	}
	err := run(ctx, args, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// exitError carries an exit status; its message, when non-empty, is printed.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// usageError is a command-line mistake: exit status 2.
func usageError(format string, args ...any) error {
	return &exitError{code: 2, msg: fmt.Sprintf(format, args...)}
}

// exitCode prints err (if it has a message) and returns the process status:
// 0 for nil, the code of an exitError, 2 for anything else (bad input).
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintln(stderr, "portcullis: "+ee.msg)
		}
		return ee.code
	}
	fmt.Fprintln(stderr, "portcullis: "+err.Error())
	return 2
}

const usage = `portcullis: a permission gateway for AI agents

Usage:
  portcullis decide  --policy FILE           decide JSON-line requests from stdin, one JSON decision per line on stdout
  portcullis explain --policy FILE REQUEST   show which stage decided a request and why (REQUEST is JSON, or - for stdin)
  portcullis policy lint [--strict] FILE     check a policy file and print its warnings
  portcullis policy test [-v] FILE...        run policy unit-test files
  portcullis policy diff [--json] OLD NEW    what changes between two policies: tools, elements, effective levels
  portcullis policy replay --policy NEW [--since 7d]
                                             re-decide the audit log's calls under NEW; list every decision that would change
  portcullis classify [--policy FILE] -- CMD classify a shell command without running it (or {"command": ...} JSON lines from stdin)
  portcullis audit tail [-n N] [-f]          the newest audit rows (and new ones as they come)
  portcullis audit query [filters]           audit rows by session, agent, tool, outcome, kind, time
  portcullis audit verify [--expect SEQ:HASH] [--witness URL|FILE]
                                             check the audit log's hash chain, columns, and heads kept outside the host
  portcullis audit export --format jsonl     the audit log as decision-log JSON lines
  portcullis audit prune --max-age D         drop old rows behind a signed checkpoint
  portcullis unblock AGENT --challenge ID --code CODE
                                             clear a danger-zone block (--reissue: a new code; --list)
  portcullis approvals [ID] [--watch]        pending approval requests (one in full; --watch: new ones and answers as they come)
  portcullis approve ID [--session]          approve a request once, or for the rest of its session
  portcullis deny ID --reason TEXT           deny a request; the agent is shown the reason
  portcullis grants [revoke ID...]           the live grants; revoke some
  portcullis mcp [--policy FILE] -- SERVER...  wrap a stdio MCP server: every tools/call goes through the gate
  portcullis serve --config FILE             the HTTP gateway: MCP upstreams on /mcp, tokens for agents
  portcullis witness serve --dir DIR         a reference audit witness: keeps published heads append-only over HTTP
  portcullis bench --token-file FILE [--via api|mcp|both] [--sessions N] [--duration D] [--json]
                                             load a running gateway with agent sessions; throughput, latency, audit completeness
  portcullis tools [accept UPSTREAM TOOL]    pinned MCP tool definitions; accept a changed one (shows the diff)
  portcullis hook HOST [--policy FILE]      a host's tool hook (claude-code, codex, gemini): the event on stdin, the answer on stdout
  portcullis hook install claude-code [--project|--user] --policy FILE
                                             add the hook to Claude Code's settings (merged, with a backup)
  portcullis hook install codex --policy FILE
                                             add Codex's hooks to $CODEX_HOME/hooks.json and trust them in config.toml
  portcullis hook install gemini [--project|--user] --policy FILE
                                             add the hook to Gemini CLI's settings (merged, with a backup)
  portcullis init claude-code|codex|gemini|claude-desktop|cursor [--project]
                                             protect a client: a starter policy, its hook or MCP wrapper, then doctor
  portcullis init mcp [--client claude-desktop|cursor] -- SERVER...
                                             classify an MCP server's tools into a policy for review; add it wrapped to a client
  portcullis doctor [CLIENT...] [--json]     is each installed client protected? why not, and the command that fixes it
  portcullis exec [--policy FILE] -- CMD...  decide a shell command, wait for a person if one must approve it, run it (-c 'CMDS': shell commands)
  portcullis version [--json]                the version, commit and build date
  portcullis completion bash|zsh|fish        a shell completion script

Stateful commands take --state DIR (default $PORTCULLIS_STATE, else $XDG_STATE_HOME/portcullis)
and --store URL (sqlite:///path or postgres://...; default $PORTCULLIS_STORE, else SQLite there).
approvals, approve, deny and grants talk to a running gateway with --gateway URL (or $PORTCULLIS_GATEWAY)
and its human token (--token-file, default admin.token in the state directory), else to the store.

The policy file may also be named by $PORTCULLIS_POLICY.
Exit status: 0 success, 1 a policy test failed (or lint --strict found warnings, or diff or replay found changes), 2 bad input.
See docs/POLICY.md for the policy file and docs/ARCHITECTURE.md for the pipeline.
`

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	return root.ExecuteContext(ctx)
}

// newFlagSet returns a flag set that reports errors through run's error
// rather than exiting.
func newFlagSet(name string, stderr io.Writer, help string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: portcullis %s\n", help)
		fs.PrintDefaults()
	}
	return fs
}

// parseArgs parses flags wherever they stand among the positional
// arguments (`explain '{...}' --policy p.yaml` works as well as the other
// order); everything after "--" is positional.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		before := len(args)
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, &exitError{code: 2}
		}
		rest := fs.Args()
		if n := before - len(rest); n > 0 && args[n-1] == "--" {
			// Parse stopped at "--" and consumed it: the rest is the
			// upstream's command, flags and all (`-- npx -y server`).
			return append(pos, rest...), nil
		}
		args = rest
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// policyPath returns the --policy value or $PORTCULLIS_POLICY.
func policyPath(flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	if env := strings.TrimSpace(os.Getenv("PORTCULLIS_POLICY")); env != "" {
		return env, nil
	}
	return "", usageError("no policy file: pass --policy FILE or set PORTCULLIS_POLICY")
}

// defaultPolicyNotice is said once on stderr by a command that falls back
// on the built-in default policy.
const defaultPolicyNotice = "no --policy given: using the built-in default policy (portcullis policy show-default prints it)"

// agentPolicyPath is policyPath for the commands that gate an agent (hook,
// exec, mcp, decide): with neither --policy nor $PORTCULLIS_POLICY it says
// so on stderr and returns "", which loadAgentGate reads as the built-in
// default policy.
func agentPolicyPath(flagValue string, stderr io.Writer) string {
	if path, err := policyPath(flagValue); err == nil {
		return path
	}
	fmt.Fprintln(stderr, defaultPolicyNotice)
	return ""
}
