package policycmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/portcullis/portcullis/auditlog"
	"github.com/portcullis/portcullis/internal/cmd/cmdutil"
	"github.com/portcullis/portcullis/policy"
	"github.com/portcullis/portcullis/replay"
	"github.com/portcullis/portcullis/sqlite"
)

// `portcullis policy replay` re-decides the calls recorded in the audit log
// under a new policy and prints every decision whose outcome or level would
// change (package replay, which also writes them: a table, or JSON lines).

func runPolicyReplay(ctx context.Context, env *cmdutil.Env, o *policyReplayOptions, pos []string, stdout, stderr io.Writer) error {
	if len(pos) > 0 {
		return cmdutil.UsageError("policy replay: unexpected argument %q (the policy goes in --policy)", pos[0])
	}
	path, err := cmdutil.PolicyPath(env, o.policy)
	if err != nil {
		return err
	}
	now := time.Now()
	from, err := auditlog.ParseWhen(o.since, now)
	if err != nil {
		return cmdutil.UsageError("--since: %v", err)
	}
	to, err := auditlog.ParseWhen(o.until, now)
	if err != nil {
		return cmdutil.UsageError("--until: %v", err)
	}
	pol, warnings, err := policy.Load(path)
	if err != nil {
		return &cmdutil.ExitError{Code: 2, Msg: err.Error()}
	}
	policy.WriteWarnings(stderr, warnings)
	if err := mustExist(env, &o.state); err != nil {
		return err
	}
	st, err := o.state.Open(ctx, env, cmdutil.Logger(stderr))
	if err != nil {
		return err
	}
	defer st.Close()
	dir, err := o.state.Dir(env, false)
	if err != nil {
		return err
	}
	// The replaying gates protect what decide's gate protects.
	opts := replay.Options{Since: from, Until: to}
	if exe, err := env.Exe(); err == nil {
		opts.ProtectedPaths = append(opts.ProtectedPaths, exe)
	}
	if dir != "" {
		opts.ProtectedPaths = append(opts.ProtectedPaths, dir)
	}
	if home, err := env.Home(); err == nil {
		opts.HomeDir = home
	}
	if o.progress > 0 {
		opts.ProgressEvery = o.progress
		opts.OnProgress = func(p replay.Progress) { fmt.Fprintln(stderr, p) }
	}
	sum, err := replay.Write(ctx, pol, st, opts, stdout, o.json)
	if err != nil {
		return err
	}
	if sum.Changed > 0 {
		return &cmdutil.ExitError{Code: 1}
	}
	return nil
}

// mustExist refuses to replay a SQLite audit log that is not there, rather
// than creating an empty store and reporting that nothing would change.
func mustExist(env *cmdutil.Env, s *cmdutil.StateFlags) error {
	u, err := s.URL(env)
	if err != nil {
		return err
	}
	if !strings.HasPrefix(u, "sqlite:") {
		return nil
	}
	path, _, err := sqlite.ParseURL(u)
	if err != nil {
		return cmdutil.UsageError("--store: %v", err)
	}
	if _, err := os.Stat(path); err != nil {
		return &cmdutil.ExitError{Code: 2, Msg: fmt.Sprintf("no audit log to replay: %v (pass --state DIR or --store URL)", err)}
	}
	return nil
}
