package approvals

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/user"
	"strings"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/client"
	"github.com/portcullis/portcullis/internal/secret"
)

// Account names the account running the process, for the audit log:
// "cli:" and its user name, or "cli" when it has none.
func Account() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return "cli:" + u.Username
	}
	return "cli"
}

// Remote returns the approvals API of the gateway at url as a Service:
// used with the human token, as actor (who answers, for the audit log).
func Remote(url, token, actor string) (Service, error) {
	c, err := client.New(url, token, client.WithActor(actor))
	if err != nil {
		return nil, fmt.Errorf("--gateway: %v", err)
	}
	return c, nil
}

// ReadToken reads the human token a person keeps in file (--token-file).
func ReadToken(file string) (string, error) {
	t, err := secret.ReadToken(file)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	return t, nil
}

// ExitStatus says how a person's command ends on err, and with what
// message: status 1 for what the person can fix or must know (a request
// already answered, a wrong code or token, too many tries), 2 for an
// unknown ID (with where the IDs are listed) or an answer that does not
// fit, and 2 for a gateway that does not answer (named, with the command
// that runs it). Several errors joined (a revocation of several grants)
// end with the worst status, at least 1, and every message. ok is false
// for nil and for any other error, which the caller reports as it is.
func ExitStatus(err error) (status int, msg string, ok bool) {
	if err == nil {
		return 0, "", false
	}
	if j, isJoin := err.(interface{ Unwrap() []error }); isJoin && len(j.Unwrap()) > 1 {
		status = 1
		var msgs []string
		for _, e := range j.Unwrap() {
			s, m, ok := ExitStatus(e)
			if !ok {
				m = e.Error()
			}
			status, msgs = max(status, s), append(msgs, m)
		}
		return status, strings.Join(msgs, "\n"), true
	}
	msg = err.Error()
	var pe *portcullis.Error
	if errors.As(err, &pe) {
		msg = pe.Message
	}
	switch portcullis.ErrorCode(err) {
	case portcullis.CodeConflict, portcullis.CodeVerificationFailed, portcullis.CodeRateLimited,
		"UNAUTHORIZED", "FORBIDDEN":
		return 1, msg, true
	case portcullis.CodeNotFound:
		return 2, msg + " (portcullis approvals lists the requests, portcullis grants the grants)", true
	case portcullis.CodeInvalidRequest:
		return 2, msg, true
	}
	var ue *client.UnreachableError
	if errors.As(err, &ue) {
		return 2, fmt.Sprintf("no gateway answers at %s (%v): is `portcullis serve` running at %s? (--gateway or $PORTCULLIS_GATEWAY names it)", ue.Gateway, ue.Err, ue.Gateway), true
	}
	return 0, "", false
}

// ListOptions are what `portcullis approvals` shows: the requests of a
// status ("all" for every status), session and agent, at most Limit of
// them; as JSON lines; or, with Watch, the pending ones as they arrive
// and are answered, looking every Interval.
type ListOptions struct {
	Status         string
	Session, Agent string
	Limit          int
	JSON, Watch    bool
	Interval       time.Duration
}

// Filter checks the options with the request IDs a person named (at most
// one, shown in full) and returns the requests' filter.
func (o ListOptions) Filter(ids []string) (portcullis.ApprovalFilter, error) {
	f := portcullis.ApprovalFilter{Session: o.Session, Agent: o.Agent, Limit: o.Limit}
	if len(ids) > 1 {
		return f, errors.New("approvals takes at most one request ID")
	}
	switch s := portcullis.ApprovalStatus(o.Status); s {
	case "all":
	case portcullis.ApprovalPending, portcullis.ApprovalApproved, portcullis.ApprovalDenied, portcullis.ApprovalExpired:
		f.Status = s
	default:
		return f, fmt.Errorf("--status: want pending, approved, denied, expired or all, got %q", o.Status)
	}
	if o.Limit < 1 || o.Limit > 1000 {
		return f, errors.New("--limit: want 1 to 1000")
	}
	if o.Watch && (o.Interval <= 0 || len(ids) > 0) {
		return f, errors.New("--watch takes no ID and a positive --interval")
	}
	return f, nil
}

// List writes to w the request ids names in full; or, with o.Watch, the
// pending requests, then each new one and each answer as they come until
// ctx ends; or the requests o selects (or that there are none). The
// errors of s are returned as they are.
func List(ctx context.Context, s Service, o ListOptions, ids []string, w io.Writer) error {
	f, err := o.Filter(ids)
	if err != nil {
		return err
	}
	if len(ids) == 1 {
		a, err := s.Approval(ctx, ids[0])
		if err != nil {
			return err
		}
		if o.JSON {
			return WriteJSONLines(w, []portcullis.Approval{a})
		}
		return WriteDetail(w, a)
	}
	if o.Watch {
		f.Status = portcullis.ApprovalPending
		return Watch(ctx, s, f, o.Interval, func(r Round) error {
			return WriteRound(w, r, time.Now(), o.JSON)
		})
	}
	list, err := s.Approvals(ctx, f)
	if err != nil {
		return err
	}
	if o.JSON {
		return WriteJSONLines(w, list)
	}
	if len(list) == 0 {
		what := "approval requests"
		if f.Status != "" {
			what = string(f.Status) + " " + what
		}
		_, err := fmt.Fprintf(w, "no %s\n", what)
		return err
	}
	return WriteTable(w, list, time.Now())
}

// ListGrants writes to w the live grants (of session, when set), as a
// table or JSON lines, or that there are none.
func ListGrants(ctx context.Context, s Service, session string, asJSON bool, w io.Writer) error {
	list, err := s.Grants(ctx, session)
	if err != nil {
		return err
	}
	if asJSON {
		return WriteJSONLines(w, list)
	}
	if len(list) == 0 {
		_, err := fmt.Fprintln(w, "no grants")
		return err
	}
	return WriteGrants(w, list)
}

// Revoke revokes the grants ids names, writing a line to w for each one
// revoked; it goes on past a failure and returns the failures joined.
func Revoke(ctx context.Context, s Service, ids []string, w io.Writer) error {
	var failed []error
	for _, id := range ids {
		if err := s.RevokeGrant(ctx, id); err != nil {
			failed = append(failed, err)
			continue
		}
		fmt.Fprintf(w, "revoked %s\n", id)
	}
	if len(failed) == 1 {
		return failed[0]
	}
	return errors.Join(failed...)
}

// Approve approves the pending request id, once or for the rest of its
// session, and writes the answer to w as WriteAnswer does.
func Approve(ctx context.Context, s Service, id string, forSession bool, w io.Writer) error {
	a, err := s.Approve(ctx, id, forSession)
	if err != nil {
		return err
	}
	return WriteAnswer(w, a, forSession)
}

// Deny denies the pending request id with a reason the agent is shown,
// and writes the answer to w as WriteAnswer does.
func Deny(ctx context.Context, s Service, id, reason string, w io.Writer) error {
	a, err := s.Deny(ctx, id, reason)
	if err != nil {
		return err
	}
	return WriteAnswer(w, a, false)
}
