package main

import (
	"time"

	"github.com/portcullis/portcullis/auditlog"

	"github.com/spf13/cobra"
)

// The audit group and the reference witness.

func newAuditCmd() *cobra.Command {
	return groupCmd("audit", "Read, verify, export and prune the audit log", `Read, verify, export and prune the audit log of the state directory (--state)
or store (--store).`,
		newAuditTailCmd(), newAuditQueryCmd(), newAuditVerifyCmd(), newAuditExportCmd(), newAuditPruneCmd())
}

type auditTailOptions struct {
	state stateFlags
	tail  auditlog.TailOptions
}

func newAuditTailCmd() *cobra.Command {
	var o auditTailOptions
	cmd := &cobra.Command{
		Use:     "tail [-n N] [-f] [--json]",
		Short:   "The newest audit rows (and new ones as they come)",
		Example: `  portcullis audit tail -n 50 -f`,
		Args:    cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAuditTail(cmd.Context(), &o, args, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	o.state.register(fs)
	fs.IntVarP(&o.tail.Lines, "lines", "n", 20, "how many of the newest rows to show")
	fs.BoolVarP(&o.tail.Follow, "follow", "f", false, "keep printing new rows as they are written (until interrupted)")
	fs.BoolVar(&o.tail.JSON, "json", false, "print JSON lines instead of a table")
	fs.DurationVar(&o.tail.Interval, "interval", 500*time.Millisecond, "how often --follow looks for new rows")
	aliasFlag(fs, "n", "lines")
	aliasFlag(fs, "f", "follow")
	return cmd
}

type auditQueryOptions struct {
	state  stateFlags
	filter auditlog.Filter
	json   bool
	format string
}

func newAuditQueryCmd() *cobra.Command {
	var o auditQueryOptions
	cmd := &cobra.Command{
		Use:     "query [flags]",
		Short:   "Audit rows by session, agent, tool, outcome, kind, time",
		Example: `  portcullis audit query --agent claude-code --outcome deny --since 24h`,
		Args:    cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAuditQuery(cmd.Context(), &o, args, cmd.OutOrStdout(), cmd.ErrOrStderr(), false)
		},
	}
	fs := cmd.Flags()
	o.state.register(fs)
	registerFilter(fs, &o.filter)
	fs.IntVar(&o.filter.Limit, "limit", 0, "at most this many rows (default 100)")
	fs.BoolVar(&o.json, "json", false, "print JSON lines instead of a table")
	return cmd
}

func newAuditExportCmd() *cobra.Command {
	var o auditQueryOptions
	cmd := &cobra.Command{
		Use:     "export --format jsonl [flags]",
		Short:   "The audit log as decision-log JSON lines",
		Long:    "The audit log as decision-log JSON lines, filtered as by audit query.",
		Example: `  portcullis audit export --format jsonl --since 7d > audit.jsonl`,
		Args:    cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAuditQuery(cmd.Context(), &o, args, cmd.OutOrStdout(), cmd.ErrOrStderr(), true)
		},
	}
	fs := cmd.Flags()
	o.state.register(fs)
	registerFilter(fs, &o.filter)
	fs.IntVar(&o.filter.Limit, "limit", 0, "at most this many rows (default all)")
	fs.StringVar(&o.format, "format", "jsonl", "export `format` (jsonl)")
	return cmd
}

type auditVerifyOptions struct {
	state            stateFlags
	json             bool
	anchors          auditlog.Anchors
	witnesses        []string
	witnessTokenFile string
}

func newAuditVerifyCmd() *cobra.Command {
	var o auditVerifyOptions
	cmd := &cobra.Command{
		Use:   "verify [--expect SEQ:HASH]... [--witness URL|FILE]... [--json]",
		Short: "Check the audit log's hash chain, columns, and heads kept outside the host",
		Long: `Check the audit log's hash chain, its columns, the signed checkpoint of
pruned rows, and heads kept outside the host (--expect, --witness).

Exit status: 0 the log is whole, 1 it is not, 2 bad input.`,
		Example: `  portcullis audit verify --witness https://witness.example/heads/gw1`,
		Args:    cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAuditVerify(cmd.Context(), &o, args, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	o.state.register(fs)
	fs.BoolVar(&o.json, "json", false, "print the result as JSON")
	fs.Var(&o.anchors, "expect", "a head `SEQ:HASH` kept earlier (audit verify prints it): the log must still hold row SEQ with this hash (repeatable)")
	fs.Func("witness", "check the log against every head this witness kept: an http(s) `URL` or a file (repeatable)", func(s string) error {
		o.witnesses = append(o.witnesses, s)
		return nil
	})
	fs.StringVar(&o.witnessTokenFile, "witness-token-file", "", "the HTTP witnesses' bearer token, read from this `file`")
	return cmd
}

type auditPruneOptions struct {
	state   stateFlags
	maxAge  string
	maxRows int64
	policy  string
}

func newAuditPruneCmd() *cobra.Command {
	var o auditPruneOptions
	cmd := &cobra.Command{
		Use:     "prune [--max-age 2160h|90d] [--max-rows N] [--policy FILE]",
		Short:   "Drop old rows behind a signed checkpoint",
		Example: `  portcullis audit prune --max-age 90d`,
		Args:    cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAuditPrune(cmd.Context(), &o, args, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	o.state.register(fs)
	fs.StringVar(&o.maxAge, "max-age", "", "prune rows older than this (a duration, or days as 90d)")
	fs.Int64Var(&o.maxRows, "max-rows", 0, "keep only the newest this many rows")
	fs.StringVar(&o.policy, "policy", "", "take audit.retention from this policy `file` (default $PORTCULLIS_POLICY) when neither --max-age nor --max-rows is given")
	return cmd
}

type witnessServeOptions struct {
	dir       string
	listen    string
	tokenFile string
}

func newWitnessCmd() *cobra.Command {
	return groupCmd("witness", "A reference audit witness", `A reference audit witness: keeps the audit heads gateways publish
(--witness of serve and mcp) append-only over HTTP.`, newWitnessServeCmd())
}

func newWitnessServeCmd() *cobra.Command {
	var o witnessServeOptions
	cmd := &cobra.Command{
		Use:     "serve --dir DIR [--listen ADDR] [--token-file FILE]",
		Short:   "Keep published heads append-only over HTTP",
		Example: `  portcullis witness serve --dir /var/lib/portcullis-witness --token-file witness.token`,
		Args:    cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runWitnessServe(cmd.Context(), &o, args, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.dir, "dir", "", "keep the heads in this `directory`, NAME.jsonl for each gateway (required)")
	fs.StringVar(&o.listen, "listen", "127.0.0.1:8480", "listen on this `address`")
	fs.StringVar(&o.tokenFile, "token-file", "", "require this bearer token (read from `file`) on every request")
	_ = cmd.MarkFlagRequired("dir")
	return cmd
}
