package main

import (
	"time"

	"github.com/portcullis/portcullis/approvals"

	"github.com/spf13/cobra"
)

// The people's commands: approval requests, grants and danger-zone blocks.

const peopleLong = `
Without --gateway (or $PORTCULLIS_GATEWAY) the store of --state/--store is
used directly; with it, the gateway's approvals API with its human token.`

type approvalsOptions struct {
	people peopleFlags
	list   approvals.ListOptions
}

func newApprovalsCmd() *cobra.Command {
	var o approvalsOptions
	cmd := &cobra.Command{
		Use:   "approvals [ID] [flags]",
		Short: "Pending approval requests (one in full; --watch: new ones and answers as they come)",
		Long:  "Approval requests: the pending ones, or one in full by ID; --watch prints new ones\nand answers as they come.\n" + peopleLong,
		Example: `  portcullis approvals --watch
  portcullis approvals apr_1`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runApprovals(cmd.Context(), &o, args, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	o.people.register(fs)
	fs.StringVar(&o.list.Status, "status", "pending", "which requests: pending, approved, denied, expired or all")
	fs.StringVar(&o.list.Session, "session", "", "only this session's requests")
	fs.StringVar(&o.list.Agent, "agent", "", "only this agent's requests")
	fs.IntVar(&o.list.Limit, "limit", 100, "at most this many requests, newest first")
	fs.BoolVar(&o.list.JSON, "json", false, "one JSON object per request and line")
	fs.BoolVar(&o.list.Watch, "watch", false, "keep watching: print requests as they arrive and as they are answered, until interrupted")
	fs.DurationVar(&o.list.Interval, "interval", time.Second, "with --watch, how often to look")
	return cmd
}

type approveOptions struct {
	people  peopleFlags
	session bool
}

func newApproveCmd() *cobra.Command {
	var o approveOptions
	cmd := &cobra.Command{
		Use:     "approve ID [--session]",
		Short:   "Approve a request once, or for the rest of its session",
		Long:    "Approve a request once, or for the rest of its session (--session).\n" + peopleLong,
		Example: `  portcullis approve apr_1 --session`,
		Args:    cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runApprove(cmd.Context(), &o, args, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	o.people.register(fs)
	fs.BoolVar(&o.session, "session", false, "approve the tool for the rest of the call's session (CONFIRM_SESSION calls only)")
	return cmd
}

type denyOptions struct {
	people peopleFlags
	reason string
}

func newDenyCmd() *cobra.Command {
	var o denyOptions
	cmd := &cobra.Command{
		Use:     "deny ID --reason TEXT",
		Short:   "Deny a request; the agent is shown the reason",
		Long:    "Deny a request; the agent is shown the reason.\n" + peopleLong,
		Example: `  portcullis deny apr_1 --reason "not on the production database"`,
		Args:    cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDeny(cmd.Context(), &o, args, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	o.people.register(fs)
	fs.StringVar(&o.reason, "reason", "", "why, in words the agent will be shown (required)")
	return cmd
}

type grantsOptions struct {
	people  peopleFlags
	session string
	json    bool
}

func newGrantsCmd() *cobra.Command {
	var o grantsOptions
	run := func(cmd *cobra.Command, pos []string) error {
		return runGrants(cmd.Context(), &o, pos, cmd.OutOrStdout(), cmd.ErrOrStderr())
	}
	cmd := &cobra.Command{
		Use:   "grants [--session S] [--json]",
		Short: "The live grants; revoke some",
		Long:  "The live grants: what was approved for a session, or for longer.\n" + peopleLong,
		Args:  cobra.ArbitraryArgs,
		RunE:  run,
	}
	fs := cmd.Flags()
	o.people.register(fs)
	fs.StringVar(&o.session, "session", "", "only this session's grants")
	fs.BoolVar(&o.json, "json", false, "one JSON object per grant and line")
	revoke := &cobra.Command{
		Use:     "revoke ID...",
		Short:   "Revoke grants",
		Long:    "Revoke grants by ID (portcullis grants lists them).\n" + peopleLong,
		Example: `  portcullis grants revoke grt_1 grt_2`,
		Args:    cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return run(cmd, append([]string{"revoke"}, args...))
		},
	}
	o.people.register(revoke.Flags())
	cmd.AddCommand(revoke)
	return cmd
}

type unblockOptions struct {
	state      stateFlags
	notify     notifyFlags
	challenge  string
	code       string
	reissue    bool
	adminToken string
	all, list  bool
}

func newUnblockCmd() *cobra.Command {
	var o unblockOptions
	cmd := &cobra.Command{
		Use:   "unblock AGENT --challenge ID --code CODE",
		Short: "Clear a danger-zone block (--reissue: a new code; --list)",
		Long: `Clear a danger-zone block with the challenge the agent was given and the
verification code shown on a human channel; or print a new code (--reissue),
clear as the administrator (--admin-token, --all), or list the blocked agents.`,
		Example: `  portcullis unblock claude-code --challenge chl_1 --code 123456
  portcullis unblock claude-code --reissue
  portcullis unblock --all --admin-token "$(cat admin.token)"
  portcullis unblock --list`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runUnblock(cmd.Context(), &o, args, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	o.state.register(fs)
	fs.StringVar(&o.challenge, "challenge", "", "the challenge `id` the agent was given")
	fs.StringVar(&o.code, "code", "", "the verification `code` shown on a human channel")
	fs.BoolVar(&o.reissue, "reissue", false, "replace a lost or expired code; the new one is printed here")
	fs.StringVar(&o.adminToken, "admin-token", "", "clear without a code, as the administrator (the token is in admin.token in the state directory)")
	fs.BoolVar(&o.all, "all", false, "with --admin-token: clear every block")
	fs.BoolVar(&o.list, "list", false, "list the blocked agents")
	o.notify.register(fs)
	return cmd
}
