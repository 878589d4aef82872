package main

import (
	"context"
	"crypto/subtle"
	"fmt"
	"io"
	"os/user"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/approvals"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/notify"
)

// terminal is the notifier of a command a person runs: it prints what the
// person needs, the verification code included. It is a human channel: the
// shell classifier blocks agents from running these commands.
type terminal struct{ w io.Writer }

func (t terminal) Notify(_ context.Context, n portcullis.Notice) error {
	switch n.Kind {
	case portcullis.NoticeBlock:
		_, err := fmt.Fprintf(t.w, "agent %s is blocked (%s)\n  challenge: %s\n  code:      %s   (valid until %s)\n  clear it:  portcullis unblock %s --challenge %s --code %s\n",
			n.Agent, n.Reason, n.ChallengeID, n.Code, n.ExpiresAt.Local().Format(time.Kitchen), n.Agent, n.ChallengeID, n.Code)
		return err
	default:
		_, err := fmt.Fprintf(t.w, "%s: %s (decision %s)\n", n.Kind, n.Reason, n.DecisionID)
		return err
	}
}

// actor names the person running the command, for the audit log.
func actor() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return "cli:" + u.Username
	}
	return "cli"
}

// runUnblock clears danger-zone blocks: with the challenge's code, by a new
// code (--reissue), or as the administrator (--admin-token, for one agent
// or --all).
func runUnblock(ctx context.Context, o *unblockOptions, pos []string, stdout, stderr io.Writer) error {
	sf, nf := &o.state, &o.notify
	var err error
	if nf.set() && !o.reissue {
		return usageError("--notify-* applies only with --reissue (where the new code is sent)")
	}
	log := cliLogger(stderr)
	// The new code of --reissue is printed here and sent to the channels
	// of the --notify-* flags.
	var notifier portcullis.Notifier = terminal{stdout}
	extra, cleanup, err := nf.notifier(log)
	if err != nil {
		return err
	}
	defer cleanup()
	if extra != nil {
		notifier = notify.Multi{notifier, extra}
	}
	st, err := sf.open(ctx, log)
	if err != nil {
		return err
	}
	defer st.Close()
	g, err := gate.New(&portcullis.Policy{Version: 1}, gate.WithStore(st), gate.WithNotifier(notifier), gate.WithLogger(log))
	if err != nil {
		return err
	}
	blocks := &approvals.Blocks{Store: st, Gate: g, By: actor()}
	switch {
	case o.list:
		if len(pos) > 0 {
			return usageError("unblock --list takes no agent")
		}
		list, err := st.Blocks(ctx)
		if err != nil {
			return err
		}
		if len(list) == 0 {
			fmt.Fprintln(stdout, "no agent is blocked")
			return nil
		}
		return approvals.WriteBlocks(stdout, list)
	case o.adminToken != "":
		dir, err := sf.dir(true)
		if err != nil {
			return err
		}
		want, err := secretFile(dir, "admin.token")
		if err != nil {
			return fmt.Errorf("admin token: %w", err)
		}
		if subtle.ConstantTimeCompare([]byte(o.adminToken), []byte(want)) != 1 {
			log.Warn("unblock refused", "severity", "HIGH", "type", "ADMIN_TOKEN_MISMATCH")
			return &exitError{code: 1, msg: "wrong admin token"}
		}
		agents := pos
		if o.all {
			if len(pos) > 0 {
				return usageError("unblock --all takes no agent")
			}
			list, err := st.Blocks(ctx)
			if err != nil {
				return err
			}
			for _, b := range list {
				agents = append(agents, b.Agent)
			}
		} else if len(pos) != 1 {
			return usageError("unblock --admin-token takes one agent, or --all")
		}
		for _, a := range agents {
			if err := blocks.Clear(ctx, a); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "unblocked %s (administrator)\n", a)
		}
		if len(agents) == 0 {
			fmt.Fprintln(stdout, "no agent is blocked")
		}
		return nil
	}
	if len(pos) != 1 {
		return usageError("unblock takes one agent")
	}
	agent := pos[0]
	if o.reissue {
		if _, err := g.ReissueChallenge(ctx, agent); err != nil {
			return err
		}
		return nil
	}
	if o.challenge == "" || o.code == "" {
		return usageError("unblock %s needs --challenge ID and --code CODE (or --reissue for a new code)", agent)
	}
	if err := blocks.Unblock(ctx, agent, o.challenge, o.code); err != nil {
		switch portcullis.ErrorCode(err) {
		case portcullis.CodeVerificationFailed, portcullis.CodeRateLimited, portcullis.CodeNotFound:
			return &exitError{code: 1, msg: err.Error()}
		}
		return err
	}
	fmt.Fprintf(stdout, "unblocked %s\n", agent)
	return nil
}
