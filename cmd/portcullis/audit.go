package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/portcullis/portcullis/auditlog"
	"github.com/portcullis/portcullis/policy"
	"github.com/portcullis/portcullis/server"
	"github.com/spf13/pflag"
)

// registerFilter adds the query flags shared by query and export.
func registerFilter(fs *pflag.FlagSet, f *auditlog.Filter) {
	fs.StringVar(&f.Session, "session", "", "only this session")
	fs.StringVar(&f.Agent, "agent", "", "only this agent")
	fs.StringVar(&f.Tool, "tool", "", "only this tool")
	fs.StringVar(&f.Outcome, "outcome", "", "only this outcome (allow, confirm, deny, stop)")
	fs.StringVar(&f.Kind, "kind", "", "only this kind (decision, approval, unblock, grant, policy, tool)")
	fs.StringVar(&f.Since, "since", "", "from this `time` (RFC 3339) or this long ago (90m, 24h, 7d)")
	fs.StringVar(&f.Until, "until", "", "before this `time` (RFC 3339) or this long ago")
	fs.BoolVar(&f.Newest, "newest", false, "newest rows first")
}

// parseWhen is auditlog.ParseWhen, for the commands that take times.
func parseWhen(s string, now time.Time) (time.Time, error) { return auditlog.ParseWhen(s, now) }

// auditError ends an audit command whose log does not verify with exit
// status 1 and the reason.
func auditError(err error) error {
	var ve *auditlog.VerifyError
	if errors.As(err, &ve) {
		return &exitError{code: 1, msg: ve.Reason}
	}
	return err
}

func runAuditQuery(ctx context.Context, o *auditQueryOptions, pos []string, stdout, stderr io.Writer, export bool) error {
	name := map[bool]string{false: "audit query", true: "audit export"}[export]
	if len(pos) > 0 {
		return usageError("%s: unexpected argument %q", name, pos[0])
	}
	if export && o.format != "jsonl" {
		return usageError("--format %q: only jsonl is supported", o.format)
	}
	q, err := o.filter.Query(time.Now())
	if err != nil {
		return usageError("%v", err)
	}
	st, err := o.state.open(ctx, cliLogger(stderr))
	if err != nil {
		return err
	}
	defer st.Close()
	if export {
		_, err = auditlog.Export(ctx, st, q, stdout)
		return err
	}
	return auditlog.WriteQuery(ctx, st, q, o.json, stdout)
}

func runAuditTail(ctx context.Context, o *auditTailOptions, pos []string, stdout, stderr io.Writer) error {
	if len(pos) > 0 {
		return usageError("audit tail: unexpected argument %q", pos[0])
	}
	if o.tail.Lines < 0 || o.tail.Interval <= 0 {
		return usageError("audit tail: --lines (-n) must be 0 or more and --interval more than 0")
	}
	st, err := o.state.open(ctx, cliLogger(stderr))
	if err != nil {
		return err
	}
	defer st.Close()
	return auditlog.WriteTail(ctx, st, o.tail, stdout)
}

func runAuditVerify(ctx context.Context, o *auditVerifyOptions, pos []string, stdout, stderr io.Writer) error {
	sf := &o.state
	if len(pos) > 0 {
		return usageError("audit verify: unexpected argument %q", pos[0])
	}
	sources, err := server.WitnessSources(o.witnesses, o.witnessTokenFile, stderr)
	if err != nil {
		return usageError("%v", err)
	}
	st, err := sf.open(ctx, cliLogger(stderr))
	if err != nil {
		return err
	}
	defer st.Close()
	rep, err := auditlog.Verify(ctx, st, auditlog.VerifyOptions{
		Key: func() (string, error) {
			dir, err := sf.dir(false)
			if err != nil {
				return "", err
			}
			return readSecret(dir, "audit.key")
		},
		Anchors: o.anchors, Witnesses: sources, Progress: auditlog.Progress(stderr),
	})
	if err != nil {
		return auditError(err)
	}
	return auditError(rep.Write(stdout, stderr, o.json))
}

func runAuditPrune(ctx context.Context, o *auditPruneOptions, pos []string, stdout, stderr io.Writer) error {
	if len(pos) > 0 {
		return usageError("audit prune: unexpected argument %q", pos[0])
	}
	now, r := time.Now(), auditlog.Retention{KeepRows: o.maxRows}
	var err error
	if r.Before, err = parseWhen(o.maxAge, now); err != nil {
		return usageError("--max-age: %v", err)
	}
	if o.maxAge == "" && o.maxRows <= 0 {
		path, err := policyPath(o.policy)
		if err != nil {
			return usageError("audit prune needs --max-age, --max-rows, or a policy with audit.retention (--policy FILE)")
		}
		pol, _, err := policy.Load(path)
		if err != nil {
			return &exitError{code: 2, msg: err.Error()}
		}
		var ok bool
		if r, ok = auditlog.RetentionOf(pol.Audit.Retention, now); !ok {
			return usageError("%s has no audit.retention; pass --max-age or --max-rows", path)
		}
	}
	st, err := o.state.open(ctx, cliLogger(stderr))
	if err != nil {
		return err
	}
	defer st.Close()
	dir, err := o.state.dir(true)
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
	return auditlog.WritePruned(stdout, cp, pruned)
}
