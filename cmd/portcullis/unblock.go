package main

import (
	"context"
	"crypto/subtle"
	"fmt"
	"io"
	"os/user"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/approvals"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/notify"
)

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
	if nf.set() && !o.reissue {
		return usageError("--notify-* applies only with --reissue (where the new code is sent)")
	}
	log := cliLogger(stderr)
	// The new code of --reissue is printed here (a human channel: the
	// shell classifier blocks agents from running this command) and sent
	// to the channels of the --notify-* flags.
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
	case o.list && len(pos) > 0:
		return usageError("unblock --list takes no agent")
	case o.list:
		return blocks.List(ctx, stdout)
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
		if o.all && len(pos) > 0 {
			return usageError("unblock --all takes no agent")
		} else if !o.all && len(pos) != 1 {
			return usageError("unblock --admin-token takes one agent, or --all")
		}
		return blocks.ClearEach(ctx, pos, o.all, stdout)
	case len(pos) != 1:
		return usageError("unblock takes one agent")
	case o.reissue:
		_, err := g.ReissueChallenge(ctx, pos[0])
		return err
	case o.challenge == "" || o.code == "":
		return usageError("unblock %s needs --challenge ID and --code CODE (or --reissue for a new code)", pos[0])
	}
	if err := blocks.Unblock(ctx, pos[0], o.challenge, o.code); err != nil {
		switch portcullis.ErrorCode(err) {
		case portcullis.CodeVerificationFailed, portcullis.CodeRateLimited, portcullis.CodeNotFound:
			return &exitError{code: 1, msg: err.Error()}
		}
		return err
	}
	fmt.Fprintf(stdout, "unblocked %s\n", pos[0])
	return nil
}
