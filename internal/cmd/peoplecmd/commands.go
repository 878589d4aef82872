// Package peoplecmd holds the people's commands: approval requests
// (approvals, approve, deny), grants (and grants revoke) and danger-zone
// blocks (unblock). They talk to a running gateway's approvals API
// (--gateway URL or $PORTCULLIS_GATEWAY, with the human token) or, when no
// gateway is named, to the store itself through a gate, which audits each
// action with who did it: either is an approvals.Service.
//
// Like every command package, it reads the process's environment only
// through the cmdutil.Env it is given, does no work that belongs to a
// domain package, and imports no command package but cmdutil.
package peoplecmd

import (
	"cmp"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/approvals"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/internal/cmd/cmdutil"
	"github.com/portcullis/portcullis/internal/secret"
	"github.com/portcullis/portcullis/notify"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

const peopleLong = `
Without --gateway (or $PORTCULLIS_GATEWAY) the store of --state/--store is
used directly; with it, the gateway's approvals API with its human token.`

// peopleFlags are the flags of the people's commands.
type peopleFlags struct {
	state                  cmdutil.StateFlags
	gateway, tokenFile, as string
}

func (p *peopleFlags) register(fs *pflag.FlagSet) {
	p.state.Register(fs)
	fs.StringVar(&p.gateway, "gateway", "", "a running gateway's `URL` (default $PORTCULLIS_GATEWAY); without one, the store is used directly")
	fs.StringVar(&p.tokenFile, "token-file", "", "`file` holding the gateway's human token (default admin.token in the state directory)")
	fs.StringVar(&p.as, "as", "", "who is acting, for the audit log (default the user running the command)")
}

// do hands fn the people's API the flags name, and ends the command as
// approvals.ExitStatus says: the gateway's, as $USER, with the human
// token; or the store's, through a gate, as the account running the
// command.
func (p *peopleFlags) do(cmd *cobra.Command, env *cmdutil.Env, fn func(ctx context.Context, s approvals.Service, w io.Writer) error) error {
	ctx, log := cmd.Context(), cmdutil.Logger(cmd.ErrOrStderr())
	var s approvals.Service
	if url := cmp.Or(p.gateway, strings.TrimSpace(env.Getenv("PORTCULLIS_GATEWAY"))); url != "" {
		token, err := p.token(env)
		if err != nil {
			return err
		}
		name := cmp.Or(p.as, strings.TrimSpace(env.Getenv("USER")), strings.TrimPrefix(approvals.Account(), "cli:"))
		if s, err = approvals.Remote(url, token, name); err != nil {
			return err
		}
	} else {
		st, err := p.state.Open(ctx, env, log)
		if err != nil {
			return err
		}
		defer st.Close()
		g, err := gate.New(&portcullis.Policy{Version: 1}, gate.WithStore(st), gate.WithLogger(log))
		if err != nil {
			return err
		}
		s = &approvals.Local{Store: st, Gate: g, By: cmp.Or(p.as, approvals.Account())}
	}
	err := fn(ctx, s, cmd.OutOrStdout())
	if code, msg, ok := approvals.ExitStatus(err); ok {
		return &cmdutil.ExitError{Code: code, Msg: msg}
	}
	return err
}

// token reads the human token: --token-file, else admin.token in the
// state directory (which `portcullis serve` shares when it runs on this
// machine).
func (p *peopleFlags) token(env *cmdutil.Env) (string, error) {
	if p.tokenFile != "" {
		return approvals.ReadToken(p.tokenFile)
	}
	dir, err := p.state.Dir(env, false)
	if err != nil {
		return "", err
	}
	t, err := secret.ReadToken(filepath.Join(dir, "admin.token"))
	if err != nil {
		return "", cmdutil.UsageError("no human token for the gateway: %v (pass --token-file FILE, the gateway's admin.token)", err)
	}
	return t, nil
}

// NewApprovalsCmd is `portcullis approvals`.
func NewApprovalsCmd(env *cmdutil.Env) *cobra.Command {
	var people peopleFlags
	var o approvals.ListOptions
	cmd := &cobra.Command{
		Use:   "approvals [ID] [flags]",
		Short: "Pending approval requests (one in full; --watch: new ones and answers as they come)",
		Long:  "Approval requests: the pending ones, or one in full by ID; --watch prints new ones\nand answers as they come.\n" + peopleLong,
		Example: `  portcullis approvals --watch
  portcullis approvals apr_1`,
		RunE: func(cmd *cobra.Command, ids []string) error {
			if _, err := o.Filter(ids); err != nil {
				return cmdutil.UsageError("%v", err)
			}
			return people.do(cmd, env, func(ctx context.Context, s approvals.Service, w io.Writer) error {
				return approvals.List(ctx, s, o, ids, w)
			})
		},
	}
	fs := cmd.Flags()
	people.register(fs)
	fs.StringVar(&o.Status, "status", "pending", "which requests: pending, approved, denied, expired or all")
	fs.StringVar(&o.Session, "session", "", "only this session's requests")
	fs.StringVar(&o.Agent, "agent", "", "only this agent's requests")
	fs.IntVar(&o.Limit, "limit", 100, "at most this many requests, newest first")
	fs.BoolVar(&o.JSON, "json", false, "one JSON object per request and line")
	fs.BoolVar(&o.Watch, "watch", false, "keep watching: print requests as they arrive and as they are answered, until interrupted")
	fs.DurationVar(&o.Interval, "interval", time.Second, "with --watch, how often to look")
	return cmd
}

// NewApproveCmd is `portcullis approve`.
func NewApproveCmd(env *cmdutil.Env) *cobra.Command {
	var people peopleFlags
	var session bool
	cmd := &cobra.Command{
		Use:     "approve ID [--session]",
		Short:   "Approve a request once, or for the rest of its session",
		Long:    "Approve a request once, or for the rest of its session (--session).\n" + peopleLong,
		Example: `  portcullis approve apr_1 --session`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return cmdutil.UsageError("approve takes one request ID (portcullis approvals lists them)")
			}
			return people.do(cmd, env, func(ctx context.Context, s approvals.Service, w io.Writer) error {
				return approvals.Approve(ctx, s, args[0], session, w)
			})
		},
	}
	people.register(cmd.Flags())
	cmd.Flags().BoolVar(&session, "session", false, "approve the tool for the rest of the call's session (CONFIRM_SESSION calls only)")
	return cmd
}

// NewDenyCmd is `portcullis deny`.
func NewDenyCmd(env *cmdutil.Env) *cobra.Command {
	var people peopleFlags
	var reason string
	cmd := &cobra.Command{
		Use:     "deny ID --reason TEXT",
		Short:   "Deny a request; the agent is shown the reason",
		Long:    "Deny a request; the agent is shown the reason.\n" + peopleLong,
		Example: `  portcullis deny apr_1 --reason "not on the production database"`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return cmdutil.UsageError("deny takes one request ID (portcullis approvals lists them)")
			}
			if strings.TrimSpace(reason) == "" {
				return cmdutil.UsageError("deny %s needs --reason TEXT: the agent is shown it", args[0])
			}
			return people.do(cmd, env, func(ctx context.Context, s approvals.Service, w io.Writer) error {
				return approvals.Deny(ctx, s, args[0], reason, w)
			})
		},
	}
	people.register(cmd.Flags())
	cmd.Flags().StringVar(&reason, "reason", "", "why, in words the agent will be shown (required)")
	return cmd
}

// NewGrantsCmd is `portcullis grants`.
func NewGrantsCmd(env *cmdutil.Env) *cobra.Command {
	var people peopleFlags
	var session string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "grants [--session S] [--json]",
		Short: "The live grants; revoke some",
		Long:  "The live grants: what was approved for a session, or for longer.\n" + peopleLong,
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return cmdutil.UsageError("unknown grants command %q (want revoke)", args[0])
			}
			return people.do(cmd, env, func(ctx context.Context, s approvals.Service, w io.Writer) error {
				return approvals.ListGrants(ctx, s, session, asJSON, w)
			})
		},
	}
	fs := cmd.Flags()
	people.register(fs)
	fs.StringVar(&session, "session", "", "only this session's grants")
	fs.BoolVar(&asJSON, "json", false, "one JSON object per grant and line")
	revoke := &cobra.Command{
		Use:     "revoke ID...",
		Short:   "Revoke grants",
		Long:    "Revoke grants by ID (portcullis grants lists them).\n" + peopleLong,
		Example: `  portcullis grants revoke grt_1 grt_2`,
		RunE: func(cmd *cobra.Command, ids []string) error {
			if len(ids) == 0 {
				return cmdutil.UsageError("grants revoke takes one or more grant IDs (portcullis grants lists them)")
			}
			return people.do(cmd, env, func(ctx context.Context, s approvals.Service, w io.Writer) error {
				return approvals.Revoke(ctx, s, ids, w)
			})
		},
	}
	people.register(revoke.Flags())
	cmd.AddCommand(revoke)
	return cmd
}

// NewUnblockCmd clears danger-zone blocks: with the challenge's code, by a
// new code (--reissue), or as the administrator (--admin-token, for one
// agent or --all).
func NewUnblockCmd(env *cmdutil.Env) *cobra.Command {
	var sf cmdutil.StateFlags
	var nf cmdutil.NotifyFlags
	var challenge, code, adminToken string
	var reissue, all, list bool
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
		RunE: func(cmd *cobra.Command, pos []string) error {
			if nf.Set() && !reissue {
				return cmdutil.UsageError("--notify-* applies only with --reissue (where the new code is sent)")
			}
			log := cmdutil.Logger(cmd.ErrOrStderr())
			// The new code of --reissue is printed here (a human channel:
			// the shell classifier blocks agents from running this
			// command) and sent to the channels of the --notify-* flags.
			extra, cleanup, err := nf.Notifier(log)
			if err != nil {
				return err
			}
			defer cleanup()
			return cmdutil.WithStore(cmd, env, &sf, func(ctx context.Context, st portcullis.Store, stdout io.Writer) error {
				g, err := gate.New(&portcullis.Policy{Version: 1}, gate.WithStore(st), gate.WithNotifier(notify.Multi{notify.NewCommand(stdout), extra}), gate.WithLogger(log))
				if err != nil {
					return err
				}
				if adminToken != "" && !list {
					dir, err := sf.Dir(env, true)
					if err != nil {
						return err
					}
					want, _, err := secret.ReadOrCreate(filepath.Join(dir, "admin.token"))
					if err != nil {
						return fmt.Errorf("admin token: %w", err)
					}
					if subtle.ConstantTimeCompare([]byte(adminToken), []byte(want)) != 1 {
						log.Warn("unblock refused", "severity", "HIGH", "type", "ADMIN_TOKEN_MISMATCH")
						return &cmdutil.ExitError{Code: 1, Msg: "wrong admin token"}
					}
				}
				blocks := &approvals.Blocks{Store: st, Gate: g, By: approvals.Account()}
				err = blocks.Do(ctx, approvals.UnblockRequest{Agents: pos, List: list, Admin: adminToken != "", All: all, Reissue: reissue, Challenge: challenge, Code: code}, stdout)
				if re := (*approvals.RefusedError)(nil); errors.As(err, &re) {
					return &cmdutil.ExitError{Code: 1, Msg: err.Error()}
				}
				return err
			})
		},
	}
	fs := cmd.Flags()
	sf.Register(fs)
	fs.StringVar(&challenge, "challenge", "", "the challenge `id` the agent was given")
	fs.StringVar(&code, "code", "", "the verification `code` shown on a human channel")
	fs.BoolVar(&reissue, "reissue", false, "replace a lost or expired code; the new one is printed here")
	fs.StringVar(&adminToken, "admin-token", "", "clear without a code, as the administrator (the token is in admin.token in the state directory)")
	fs.BoolVar(&all, "all", false, "with --admin-token: clear every block")
	fs.BoolVar(&list, "list", false, "list the blocked agents")
	nf.Register(fs)
	return cmd
}
