// Package auditcmd holds the audit group (tail, query, verify, export,
// prune) and budgets. Their work is in packages auditlog and budgets; here
// are their flags, the one call each makes and its exit status.
//
// Like every command package, it reads the process's environment only
// through the cmdutil.Env it is given, does no work that belongs to a
// domain package, and imports no command package but cmdutil.
package auditcmd

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/auditlog"
	"github.com/portcullis/portcullis/budgets"
	"github.com/portcullis/portcullis/internal/cmd/cmdutil"
	"github.com/portcullis/portcullis/internal/secret"
	"github.com/portcullis/portcullis/policy"
	"github.com/portcullis/portcullis/server"
	"github.com/spf13/cobra"
)

// NewAuditCmd is `portcullis audit` and its subcommands.
func NewAuditCmd(env *cmdutil.Env) *cobra.Command {
	return cmdutil.GroupCmd("audit", "Read, verify, export and prune the audit log", `Read, verify, export and prune the audit log of the state directory (--state)
or store (--store).`,
		newAuditTailCmd(env), newAuditQueryCmd(env), newAuditVerifyCmd(env), newAuditExportCmd(env), newAuditPruneCmd(env))
}

func newAuditTailCmd(env *cmdutil.Env) *cobra.Command {
	var sf cmdutil.StateFlags
	var o auditlog.TailOptions
	cmd := &cobra.Command{
		Use:     "tail [-n N] [-f] [--json]",
		Short:   "The newest audit rows (and new ones as they come)",
		Example: `  portcullis audit tail -n 50 -f`,
		Args:    cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Lines < 0 || o.Interval <= 0 {
				return cmdutil.UsageError("audit tail: --lines (-n) must be 0 or more and --interval more than 0")
			}
			return cmdutil.WithStore(cmd, env, &sf, func(ctx context.Context, st portcullis.Store, w io.Writer) error {
				return auditlog.WriteTail(ctx, st, o, w)
			})
		},
	}
	fs := cmd.Flags()
	sf.Register(fs)
	fs.IntVarP(&o.Lines, "lines", "n", 20, "how many of the newest rows to show")
	fs.BoolVarP(&o.Follow, "follow", "f", false, "keep printing new rows as they are written (until interrupted)")
	fs.BoolVar(&o.JSON, "json", false, "print JSON lines instead of a table")
	fs.DurationVar(&o.Interval, "interval", 500*time.Millisecond, "how often --follow looks for new rows")
	cmdutil.AliasFlag(fs, "n", "lines")
	cmdutil.AliasFlag(fs, "f", "follow")
	return cmd
}

// newAuditRowsCmd is audit query, or with export audit export: the
// rows the filter flags select.
func newAuditRowsCmd(env *cmdutil.Env, export bool, cmd *cobra.Command) *cobra.Command {
	var sf cmdutil.StateFlags
	var f auditlog.Filter
	var asJSON bool
	var format string
	cmd.Args = cmdutil.NoArgs
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if export && format != "jsonl" {
			return cmdutil.UsageError("--format %q: only jsonl is supported", format)
		}
		q, err := f.Query(time.Now())
		if err != nil {
			return cmdutil.UsageError("%v", err)
		}
		return cmdutil.WithStore(cmd, env, &sf, func(ctx context.Context, st portcullis.Store, w io.Writer) error {
			if export {
				_, err := auditlog.Export(ctx, st, q, w)
				return err
			}
			return auditlog.WriteQuery(ctx, st, q, asJSON, w)
		})
	}
	fs := cmd.Flags()
	sf.Register(fs)
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

func newAuditQueryCmd(env *cmdutil.Env) *cobra.Command {
	return newAuditRowsCmd(env, false, &cobra.Command{
		Use:     "query [flags]",
		Short:   "Audit rows by session, agent, tool, outcome, kind, time",
		Example: `  portcullis audit query --agent claude-code --outcome deny --since 24h`,
	})
}

func newAuditExportCmd(env *cmdutil.Env) *cobra.Command {
	return newAuditRowsCmd(env, true, &cobra.Command{
		Use:     "export --format jsonl [flags]",
		Short:   "The audit log as decision-log JSON lines",
		Long:    "The audit log as decision-log JSON lines, filtered as by audit query.",
		Example: `  portcullis audit export --format jsonl --since 7d > audit.jsonl`,
	})
}

func newAuditVerifyCmd(env *cmdutil.Env) *cobra.Command {
	var sf cmdutil.StateFlags
	var asJSON bool
	var anchors auditlog.Anchors
	var witnesses []string
	var tokenFile string
	cmd := &cobra.Command{
		Use:   "verify [--expect SEQ:HASH]... [--witness URL|FILE]... [--json]",
		Short: "Check the audit log's hash chain, columns, and heads kept outside the host",
		Long: `Check the audit log's hash chain, its columns, the signed checkpoint of
pruned rows, and heads kept outside the host (--expect, --witness); on SQLite,
also the tables its filtered queries look rows up in.

Exit status: 0 the log is whole, 1 it is not, 2 bad input.`,
		Example: `  portcullis audit verify --witness https://witness.example/heads/gw1`,
		Args:    cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sources, err := server.WitnessSources(witnesses, tokenFile, cmd.ErrOrStderr())
			if err != nil {
				return cmdutil.UsageError("%v", err)
			}
			key := func() (string, error) {
				dir, err := sf.Dir(env, false)
				if err != nil {
					return "", err
				}
				return secret.Read(filepath.Join(dir, "audit.key"))
			}
			return cmdutil.WithStore(cmd, env, &sf, func(ctx context.Context, st portcullis.Store, w io.Writer) error {
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
	sf.Register(fs)
	fs.BoolVar(&asJSON, "json", false, "print the result as JSON")
	fs.Var(&anchors, "expect", "a head `SEQ:HASH` kept earlier (audit verify prints it): the log must still hold row SEQ with this hash (repeatable)")
	fs.Func("witness", "check the log against every head this witness kept: an http(s) `URL` or a file (repeatable)", func(s string) error {
		witnesses = append(witnesses, s)
		return nil
	})
	fs.StringVar(&tokenFile, "witness-token-file", "", "the HTTP witnesses' bearer token, read from this `file`")
	return cmd
}

func newAuditPruneCmd(env *cmdutil.Env) *cobra.Command {
	var sf cmdutil.StateFlags
	var maxAge, policyFile string
	var maxRows int64
	cmd := &cobra.Command{
		Use:     "prune [--max-age 2160h|90d] [--max-rows N] [--policy FILE]",
		Short:   "Drop old rows behind a signed checkpoint",
		Example: `  portcullis audit prune --max-age 90d`,
		Args:    cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			now := time.Now()
			r, err := auditlog.RetentionFor(maxAge, maxRows, now, func() (portcullis.AuditRetention, string, error) {
				path, err := cmdutil.PolicyPath(env, policyFile)
				if err != nil {
					return portcullis.AuditRetention{}, "", cmdutil.UsageError("audit prune needs --max-age, --max-rows, or a policy with audit.retention (--policy FILE)")
				}
				pol, _, err := policy.Load(path)
				if err != nil {
					return portcullis.AuditRetention{}, "", &cmdutil.ExitError{Code: 2, Msg: err.Error()}
				}
				return pol.Audit.Retention, path, nil
			})
			if err != nil {
				return err
			}
			return cmdutil.WithStore(cmd, env, &sf, func(ctx context.Context, st portcullis.Store, w io.Writer) error {
				dir, err := sf.Dir(env, true)
				if err != nil {
					return err
				}
				key, _, err := secret.ReadOrCreate(filepath.Join(dir, "audit.key"))
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
	sf.Register(fs)
	fs.StringVar(&maxAge, "max-age", "", "prune rows older than this (a duration, or days as 90d)")
	fs.Int64Var(&maxRows, "max-rows", 0, "keep only the newest this many rows")
	fs.StringVar(&policyFile, "policy", "", "take audit.retention from this policy `file` (default $PORTCULLIS_POLICY) when neither --max-age nor --max-rows is given")
	return cmd
}

// NewBudgetsCmd is `portcullis budgets`.
func NewBudgetsCmd(env *cmdutil.Env) *cobra.Command {
	var sf cmdutil.StateFlags
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
			return cmdutil.WithStore(cmd, env, &sf, func(ctx context.Context, st portcullis.Store, w io.Writer) error {
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
	sf.Register(cmd.Flags())
	return cmd
}
