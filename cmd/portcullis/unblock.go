package main

import (
	"crypto/subtle"
	"fmt"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/approvals"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/notify"
	"github.com/spf13/cobra"
)

// newUnblockCmd clears danger-zone blocks: with the challenge's code, by a
// new code (--reissue), or as the administrator (--admin-token, for one
// agent or --all).
func newUnblockCmd() *cobra.Command {
	var sf stateFlags
	var nf notifyFlags
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
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, pos []string) error {
			ctx, stdout := cmd.Context(), cmd.OutOrStdout()
			if nf.set() && !reissue {
				return usageError("--notify-* applies only with --reissue (where the new code is sent)")
			}
			log := cliLogger(cmd.ErrOrStderr())
			// The new code of --reissue is printed here (a human channel:
			// the shell classifier blocks agents from running this
			// command) and sent to the channels of the --notify-* flags.
			extra, cleanup, err := nf.notifier(log)
			if err != nil {
				return err
			}
			defer cleanup()
			st, err := sf.open(ctx, log)
			if err != nil {
				return err
			}
			defer st.Close()
			g, err := gate.New(&portcullis.Policy{Version: 1}, gate.WithStore(st), gate.WithNotifier(notify.Multi{notify.NewCommand(stdout), extra}), gate.WithLogger(log))
			if err != nil {
				return err
			}
			blocks := &approvals.Blocks{Store: st, Gate: g, By: actor()}
			switch {
			case list && len(pos) > 0:
				return usageError("unblock --list takes no agent")
			case list:
				return blocks.List(ctx, stdout)
			case adminToken != "":
				dir, err := sf.dir(true)
				if err != nil {
					return err
				}
				want, err := secretFile(dir, "admin.token")
				if err != nil {
					return fmt.Errorf("admin token: %w", err)
				}
				if subtle.ConstantTimeCompare([]byte(adminToken), []byte(want)) != 1 {
					log.Warn("unblock refused", "severity", "HIGH", "type", "ADMIN_TOKEN_MISMATCH")
					return &exitError{code: 1, msg: "wrong admin token"}
				}
				if all && len(pos) > 0 {
					return usageError("unblock --all takes no agent")
				} else if !all && len(pos) != 1 {
					return usageError("unblock --admin-token takes one agent, or --all")
				}
				return blocks.ClearEach(ctx, pos, all, stdout)
			case len(pos) != 1:
				return usageError("unblock takes one agent")
			case reissue:
				_, err := g.ReissueChallenge(ctx, pos[0])
				return err
			case challenge == "" || code == "":
				return usageError("unblock %s needs --challenge ID and --code CODE (or --reissue for a new code)", pos[0])
			}
			if err := blocks.Unblock(ctx, pos[0], challenge, code); err != nil {
				switch portcullis.ErrorCode(err) {
				case portcullis.CodeVerificationFailed, portcullis.CodeRateLimited, portcullis.CodeNotFound:
					return &exitError{code: 1, msg: err.Error()}
				}
				return err
			}
			fmt.Fprintf(stdout, "unblocked %s\n", pos[0])
			return nil
		},
	}
	fs := cmd.Flags()
	sf.register(fs)
	fs.StringVar(&challenge, "challenge", "", "the challenge `id` the agent was given")
	fs.StringVar(&code, "code", "", "the verification `code` shown on a human channel")
	fs.BoolVar(&reissue, "reissue", false, "replace a lost or expired code; the new one is printed here")
	fs.StringVar(&adminToken, "admin-token", "", "clear without a code, as the administrator (the token is in admin.token in the state directory)")
	fs.BoolVar(&all, "all", false, "with --admin-token: clear every block")
	fs.BoolVar(&list, "list", false, "list the blocked agents")
	nf.register(fs)
	return cmd
}
