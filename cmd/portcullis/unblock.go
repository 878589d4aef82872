package main

import (
	"context"
	"crypto/subtle"
	"fmt"
	"io"
	"os/user"
	"text/tabwriter"
	"time"

	"github.com/portcullis/portcullis"
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
	switch {
	case o.list:
		if len(pos) > 0 {
			return usageError("unblock --list takes no agent")
		}
		blocks, err := st.Blocks(ctx)
		if err != nil {
			return err
		}
		if len(blocks) == 0 {
			fmt.Fprintln(stdout, "no agent is blocked")
			return nil
		}
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "AGENT\tSINCE\tCHALLENGE\tREASON")
		for _, b := range blocks {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", b.Agent, b.CreatedAt.UTC().Format(time.RFC3339), b.ChallengeID, oneLine(b.Reason, 80))
		}
		return tw.Flush()
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
			blocks, err := st.Blocks(ctx)
			if err != nil {
				return err
			}
			for _, b := range blocks {
				agents = append(agents, b.Agent)
			}
		} else if len(pos) != 1 {
			return usageError("unblock --admin-token takes one agent, or --all")
		}
		for _, a := range agents {
			if err := g.ClearBlock(ctx, a); err != nil {
				return err
			}
			if err := auditHuman(ctx, st, portcullis.AuditUnblock, a, "cleared by the administrator"); err != nil {
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
	if err := g.Unblock(ctx, agent, o.challenge, o.code); err != nil {
		switch portcullis.ErrorCode(err) {
		case portcullis.CodeVerificationFailed, portcullis.CodeRateLimited, portcullis.CodeNotFound:
			return &exitError{code: 1, msg: err.Error()}
		}
		return err
	}
	if err := auditHuman(ctx, st, portcullis.AuditUnblock, agent, "cleared with challenge "+o.challenge); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "unblocked %s\n", agent)
	return nil
}

// auditHuman records a person's action in the audit log.
func auditHuman(ctx context.Context, st portcullis.Store, kind portcullis.AuditKind, agent, detail string) error {
	_, err := st.AppendAudit(ctx, portcullis.AuditEvent{Kind: kind, Time: time.Now().UTC(), Agent: agent, Actor: actor(), Detail: detail})
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	return nil
}
