package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// runFunc is the work of a command, given its arguments and streams.
type runFunc func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error

// newRootCmd builds the command tree.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "portcullis",
		Short:         "a permission gateway for AI agents",
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				fmt.Fprint(cmd.ErrOrStderr(), usage)
				return &exitError{code: 2}
			}
			return unknownCommand(cmd, args[0])
		},
	}
	defaultHelp := root.HelpFunc()
	root.SetHelpFunc(func(cmd *cobra.Command, args []string) {
		if cmd == root {
			fmt.Fprint(cmd.OutOrStdout(), usage)
			return
		}
		defaultHelp(cmd, args)
	})
	root.AddCommand(
		legacyCmd("decide", "decide JSON-line requests from stdin", runDecide),
		legacyCmd("explain", "show which stage decided a request and why", runExplain),
		groupCmd("policy", "check, test, compare and replay policy files",
			legacyCmd("lint", "check a policy file and print its warnings", func(_ context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
				return runPolicyLint(args, stdout, stderr)
			}),
			legacyCmd("test", "run policy unit-test files", func(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
				return runPolicyTest(ctx, args, stdout, stderr)
			}),
			legacyCmd("diff", "what changes between two policies", func(_ context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
				return runPolicyDiff(args, stdout, stderr)
			}),
			legacyCmd("replay", "re-decide the audit log's calls under a new policy", func(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
				return runPolicyReplay(ctx, args, stdout, stderr)
			}),
			legacyCmd("show-default", "print the built-in default policy", func(_ context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
				return runPolicyShowDefault(args, stdout, stderr)
			}),
		),
		legacyCmd("classify", "classify a shell command without running it", runClassify),
		groupCmd("audit", "read, verify, export and prune the audit log",
			legacyCmd("tail", "the newest audit rows", func(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
				return runAuditTail(ctx, args, stdout, stderr)
			}),
			legacyCmd("query", "audit rows by session, agent, tool, outcome, kind, time", func(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
				return runAuditQuery(ctx, args, stdout, stderr, false)
			}),
			legacyCmd("verify", "check the audit log's hash chain", func(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
				return runAuditVerify(ctx, args, stdout, stderr)
			}),
			legacyCmd("export", "the audit log as decision-log JSON lines", func(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
				return runAuditQuery(ctx, args, stdout, stderr, true)
			}),
			legacyCmd("prune", "drop old rows behind a signed checkpoint", func(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
				return runAuditPrune(ctx, args, stdout, stderr)
			}),
		),
		legacyCmd("unblock", "clear a danger-zone block", noStdin(runUnblock)),
		legacyCmd("approvals", "pending approval requests", noStdin(runApprovals)),
		legacyCmd("approve", "approve a request", noStdin(runApprove)),
		legacyCmd("deny", "deny a request", noStdin(runDeny)),
		legacyCmd("grants", "the live grants; revoke some", noStdin(runGrants)),
		legacyCmd("mcp", "wrap a stdio MCP server", runMCP),
		legacyCmd("serve", "the HTTP gateway", noStdin(runServe)),
		legacyCmd("witness", "a reference audit witness", noStdin(runWitness)),
		legacyCmd("bench", "load a running gateway with agent sessions", noStdin(runBench)),
		legacyCmd("tools", "pinned MCP tool definitions", noStdin(runTools)),
		hookCmd(),
		newInitCmd(),
		newDoctorCmd(),
		legacyCmd("exec", "decide a shell command, then run it", runExec),
		legacyCmd("version", "the version, commit and build date", func(_ context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
			return runVersion(args, stdout, stderr)
		}),
	)
	return root
}

// legacyCmd is a command whose flags its own work parses.
func legacyCmd(use, short string, fn runFunc) *cobra.Command {
	return &cobra.Command{
		Use:                use,
		Short:              short,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return fn(cmd.Context(), args, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
}

// noStdin adapts the work of a command that reads no input.
func noStdin(fn func(ctx context.Context, args []string, stdout, stderr io.Writer) error) runFunc {
	return func(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
		return fn(ctx, args, stdout, stderr)
	}
}

// groupCmd is a command that only holds subcommands: without one, or with
// an unknown one, it is bad input.
func groupCmd(use, short string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				cmd.SetOut(cmd.ErrOrStderr())
				_ = cmd.Usage()
				return usageError("%s needs a subcommand", cmd.CommandPath())
			}
			return unknownCommand(cmd, args[0])
		},
	}
	c.AddCommand(subs...)
	return c
}

// unknownCommand is the error for a subcommand cmd does not have, with the
// names it may have meant.
func unknownCommand(cmd *cobra.Command, name string) error {
	msg := fmt.Sprintf("unknown command %q for %q", name, cmd.CommandPath())
	if s := cmd.SuggestionsFor(name); len(s) > 0 {
		msg += "; did you mean " + s[0] + "?"
	}
	return usageError("%s\nRun '%s --help' for usage.", msg, cmd.CommandPath())
}
