package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/auditlog"
	"github.com/portcullis/portcullis/budgets"
	"github.com/portcullis/portcullis/policy"
	"github.com/portcullis/portcullis/server"
	"github.com/spf13/cobra"
)

// The audit group, and the use of the budgets.

func newAuditCmd() *cobra.Command {
	return groupCmd("audit", "Read, verify, export and prune the audit log", `Read, verify, export and prune the audit log of the state directory (--state)
or store (--store).`,
		newAuditTailCmd(), newAuditQueryCmd(), newAuditVerifyCmd(), newAuditExportCmd(), newAuditPruneCmd())
}

// noArgs refuses the arguments of a command that takes none (as its Args,
// or first thing in its RunE).
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError("%s: unexpected argument %q", strings.TrimPrefix(cmd.CommandPath(), "portcullis "), args[0])
	}
	return nil
}

// withStore hands fn the store the flags name, and ends a command whose
// audit log does not verify with exit status 1 and the reason.
func withStore(cmd *cobra.Command, sf *stateFlags, fn func(ctx context.Context, st portcullis.Store, w io.Writer) error) error {
	st, err := sf.open(cmd.Context(), cliLogger(cmd.ErrOrStderr()))
	if err != nil {
		return err
	}
	defer st.Close()
	err = fn(cmd.Context(), st, cmd.OutOrStdout())
	if ve := (*auditlog.VerifyError)(nil); errors.As(err, &ve) {
		return &exitError{code: 1, msg: ve.Reason}
	}
	return err
}

// parseWhen is auditlog.ParseWhen, for the commands that take times.
func parseWhen(s string, now time.Time) (time.Time, error) { return auditlog.ParseWhen(s, now) }

func newAuditTailCmd() *cobra.Command {
	var sf stateFlags
	var o auditlog.TailOptions
	cmd := &cobra.Command{
		Use:     "tail [-n N] [-f] [--json]",
		Short:   "The newest audit rows (and new ones as they come)",
		Example: `  portcullis audit tail -n 50 -f`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Lines < 0 || o.Interval <= 0 {
				return usageError("audit tail: --lines (-n) must be 0 or more and --interval more than 0")
			}
			return withStore(cmd, &sf, func(ctx context.Context, st portcullis.Store, w io.Writer) error {
				return auditlog.WriteTail(ctx, st, o, w)
			})
		},
	}
	fs := cmd.Flags()
	sf.register(fs)
	fs.IntVarP(&o.Lines, "lines", "n", 20, "how many of the newest rows to show")
	fs.BoolVarP(&o.Follow, "follow", "f", false, "keep printing new rows as they are written (until interrupted)")
	fs.BoolVar(&o.JSON, "json", false, "print JSON lines instead of a table")
	fs.DurationVar(&o.Interval, "interval", 500*time.Millisecond, "how often --follow looks for new rows")
	aliasFlag(fs, "n", "lines")
	aliasFlag(fs, "f", "follow")
	return cmd
}

// newAuditRowsCmd is audit query, or with export audit export: the
// rows the filter flags select.
func newAuditRowsCmd(export bool, cmd *cobra.Command) *cobra.Command {
	var sf stateFlags
	var f auditlog.Filter
	var asJSON bool
	var format string
	cmd.Args = noArgs
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if export && format != "jsonl" {
			return usageError("--format %q: only jsonl is supported", format)
		}
		q, err := f.Query(time.Now())
		if err != nil {
			return usageError("%v", err)
		}
		return withStore(cmd, &sf, func(ctx context.Context, st portcullis.Store, w io.Writer) error {
			if export {
				_, err := auditlog.Export(ctx, st, q, w)
				return err
			}
			return auditlog.WriteQuery(ctx, st, q, asJSON, w)
		})
	}
	fs := cmd.Flags()
	sf.register(fs)
	fs.StringVar(&f.Session, "session", "", "only this session")
	fs.StringVar(&f.Agent, "agent", "", "only this agent")
	fs.StringVar(&f.Tool, "tool", "", "only this tool")
	fs.StringVar(&f.Outcome, "outcome", "", "only this outcome (allow, confirm, deny, stop)")
	fs.StringVar(&f.Kind, "kind", "", "only this kind (decision, approval, unblock, grant, policy, tool)")
	fs.StringVar(&f.Since, "since", "", "from this `time` (RFC 3339) or this long ago (90m, 24h, 7d)")
	fs.StringVar(&f.Until, "until", "", "before this `time` (RFC 3339) or this long ago")
	fs.BoolVar(&f.Newest, "newest", false, "newest rows first")
	if export {
		fs.IntVar(&f.Limit, "limit", 0, "at most this many rows (default all)")
		fs.StringVar(&format, "format", "jsonl", "export `format` (jsonl)")
	} else {
		fs.IntVar(&f.Limit, "limit", 0, "at most this many rows (default 100)")
		fs.BoolVar(&asJSON, "json", false, "print JSON lines instead of a table")
	}
	return cmd
}

func newAuditQueryCmd() *cobra.Command {
	return newAuditRowsCmd(false, &cobra.Command{
		Use:     "query [flags]",
		Short:   "Audit rows by session, agent, tool, outcome, kind, time",
		Example: `  portcullis audit query --agent claude-code --outcome deny --since 24h`,
	})
}

func newAuditExportCmd() *cobra.Command {
	return newAuditRowsCmd(true, &cobra.Command{
		Use:     "export --format jsonl [flags]",
		Short:   "The audit log as decision-log JSON lines",
		Long:    "The audit log as decision-log JSON lines, filtered as by audit query.",
		Example: `  portcullis audit export --format jsonl --since 7d > audit.jsonl`,
	})
}

func newAuditVerifyCmd() *cobra.Command {
	var sf stateFlags
	var asJSON bool
	var anchors auditlog.Anchors
	var witnesses []string
	var tokenFile string
	cmd := &cobra.Command{
		Use:   "verify [--expect SEQ:HASH]... [--witness URL|FILE]... [--json]",
		Short: "Check the audit log's hash chain, columns, and heads kept outside the host",
		Long: `Check the audit log's hash chain, its columns, the signed checkpoint of
pruned rows, and heads kept outside the host (--expect, --witness).

Exit status: 0 the log is whole, 1 it is not, 2 bad input.`,
		Example: `  portcullis audit verify --witness https://witness.example/heads/gw1`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sources, err := server.WitnessSources(witnesses, tokenFile, cmd.ErrOrStderr())
			if err != nil {
				return usageError("%v", err)
			}
			key := func() (string, error) {
				dir, err := sf.dir(false)
				if err != nil {
					return "", err
				}
				return readSecret(dir, "audit.key")
			}
			return withStore(cmd, &sf, func(ctx context.Context, st portcullis.Store, w io.Writer) error {
				opts := auditlog.VerifyOptions{Key: key, Anchors: anchors, Witnesses: sources, Progress: auditlog.Progress(cmd.ErrOrStderr())}
				rep, err := auditlog.Verify(ctx, st, opts)
				if err != nil {
					return err
				}
				return rep.Write(w, cmd.ErrOrStderr(), asJSON)
			})
		},
	}
	fs := cmd.Flags()
	sf.register(fs)
	fs.BoolVar(&asJSON, "json", false, "print the result as JSON")
	fs.Var(&anchors, "expect", "a head `SEQ:HASH` kept earlier (audit verify prints it): the log must still hold row SEQ with this hash (repeatable)")
	fs.Func("witness", "check the log against every head this witness kept: an http(s) `URL` or a file (repeatable)", func(s string) error {
		witnesses = append(witnesses, s)
		return nil
	})
	fs.StringVar(&tokenFile, "witness-token-file", "", "the HTTP witnesses' bearer token, read from this `file`")
	return cmd
}

func newAuditPruneCmd() *cobra.Command {
	var sf stateFlags
	var maxAge, policyFile string
	var maxRows int64
	cmd := &cobra.Command{
		Use:     "prune [--max-age 2160h|90d] [--max-rows N] [--policy FILE]",
		Short:   "Drop old rows behind a signed checkpoint",
		Example: `  portcullis audit prune --max-age 90d`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			now := time.Now()
			r, err := auditlog.RetentionFor(maxAge, maxRows, now, func() (portcullis.AuditRetention, string, error) {
				path, err := policyPath(policyFile)
				if err != nil {
					return portcullis.AuditRetention{}, "", usageError("audit prune needs --max-age, --max-rows, or a policy with audit.retention (--policy FILE)")
				}
				pol, _, err := policy.Load(path)
				if err != nil {
					return portcullis.AuditRetention{}, "", &exitError{code: 2, msg: err.Error()}
				}
				return pol.Audit.Retention, path, nil
			})
			if err != nil {
				return err
			}
			return withStore(cmd, &sf, func(ctx context.Context, st portcullis.Store, w io.Writer) error {
				dir, err := sf.dir(true)
				if err != nil {
					return err
				}
				key, err := secretFile(dir, "audit.key")
				if err != nil {
					return fmt.Errorf("audit key: %w", err)
				}
				cp, pruned, err := auditlog.Prune(ctx, st, key, now, r)
				if err != nil {
					return err
				}
				return auditlog.WritePruned(w, cp, pruned)
			})
		},
	}
	fs := cmd.Flags()
	sf.register(fs)
	fs.StringVar(&maxAge, "max-age", "", "prune rows older than this (a duration, or days as 90d)")
	fs.Int64Var(&maxRows, "max-rows", 0, "keep only the newest this many rows")
	fs.StringVar(&policyFile, "policy", "", "take audit.retention from this policy `file` (default $PORTCULLIS_POLICY) when neither --max-age nor --max-rows is given")
	return cmd
}

func newBudgetsCmd() *cobra.Command {
	var sf stateFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "budgets [BUDGET] [--json]",
		Short: "The use of the policy's budgets in their current windows, and when each reopens",
		Long: `The use of the policy's rate limits and spend caps (budgets:) in their current
windows, read from the store: each budget, whom it counts (agent, session or
tool), what it has used of its limit, and when its window reopens.`,
		Example: `  portcullis budgets
  portcullis budgets payments --json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, names []string) error {
			return withStore(cmd, &sf, func(ctx context.Context, st portcullis.Store, w io.Writer) error {
				now := time.Now()
				use, err := budgets.Use(ctx, st, now, names)
				if err != nil {
					return err
				}
				return budgets.Write(w, use, now, asJSON)
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per counter instead of a table")
	sf.register(cmd.Flags())
	return cmd
}
