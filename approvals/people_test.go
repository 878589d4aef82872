package approvals_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/approvals"
	"github.com/portcullis/portcullis/client"
)

func TestListOptionsFilter(t *testing.T) {
	ok := approvals.ListOptions{Status: "all", Agent: "bot", Limit: 5}
	if f, err := ok.Filter(nil); err != nil || f.Status != "" || f.Agent != "bot" || f.Limit != 5 {
		t.Errorf("Filter(all) = %+v, %v; want every status of bot, 5 at most", f, err)
	}
	ok.Status = "denied"
	if f, err := ok.Filter([]string{"apr_1"}); err != nil || f.Status != portcullis.ApprovalDenied {
		t.Errorf("Filter(denied) = %+v, %v; want denied", f, err)
	}
	for _, tt := range []struct {
		o    approvals.ListOptions
		ids  []string
		want string
	}{
		{approvals.ListOptions{Status: "pending", Limit: 1}, []string{"a", "b"}, "approvals takes at most one request ID"},
		{approvals.ListOptions{Status: "done", Limit: 1}, nil, `--status: want pending, approved, denied, expired or all, got "done"`},
		{approvals.ListOptions{Status: "pending", Limit: 1001}, nil, "--limit: want 1 to 1000"},
		{approvals.ListOptions{Status: "pending", Limit: 1, Watch: true}, nil, "--watch takes no ID and a positive --interval"},
		{approvals.ListOptions{Status: "pending", Limit: 1, Watch: true, Interval: 1}, []string{"a"}, "--watch takes no ID and a positive --interval"},
	} {
		if _, err := tt.o.Filter(tt.ids); err == nil || err.Error() != tt.want {
			t.Errorf("Filter(%+v, %q) = %v; want %q", tt.o, tt.ids, err, tt.want)
		}
	}
}

// List, ListGrants and Revoke write what the people's commands print, the
// same through the gateway and on the store.
func TestListAndRevoke(t *testing.T) {
	for _, name := range []string{"local", "gateway"} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			w := newWorld(t)
			s := w.services()[name]
			o := approvals.ListOptions{Status: "pending", Limit: 100}
			var out strings.Builder
			if err := approvals.List(ctx, s, o, nil, &out); err != nil || out.String() != "no pending approval requests\n" {
				t.Fatalf("List(none) = %q, %v", out.String(), err)
			}
			id := w.confirm(t, portcullis.Call{Tool: "create_element", Session: "s1", Agent: "bot"})
			out.Reset()
			if err := approvals.List(ctx, s, o, nil, &out); err != nil || !strings.HasPrefix(out.String(), "ID ") || !strings.Contains(out.String(), id) {
				t.Fatalf("List = %q, %v; want a table with %s", out.String(), err, id)
			}
			out.Reset()
			o.JSON = true
			if err := approvals.List(ctx, s, o, []string{id}, &out); err != nil || strings.Count(out.String(), "\n") != 1 || !strings.Contains(out.String(), `"`+id+`"`) {
				t.Fatalf("List(%s, JSON) = %q, %v; want one line", id, out.String(), err)
			}
			if err := approvals.List(ctx, s, o, []string{"apr_nope"}, &out); portcullis.ErrorCode(err) != portcullis.CodeNotFound {
				t.Fatalf("List(unknown) = %v; want NOT_FOUND", err)
			}

			out.Reset()
			if err := approvals.ListGrants(ctx, s, "", false, &out); err != nil || out.String() != "no grants\n" {
				t.Fatalf("ListGrants(none) = %q, %v", out.String(), err)
			}
			out.Reset()
			if err := approvals.Approve(ctx, s, id, true, &out); err != nil || !strings.HasPrefix(out.String(), "approved "+id) {
				t.Fatalf("Approve = %q, %v; want it approved", out.String(), err)
			}
			if err := approvals.Deny(ctx, s, id, "no", &out); portcullis.ErrorCode(err) != portcullis.CodeConflict {
				t.Fatalf("Deny(answered) = %v; want CONFLICT", err)
			}
			del := w.confirm(t, portcullis.Call{Tool: "delete_element", Session: "s1", Agent: "bot"})
			out.Reset()
			if err := approvals.Deny(ctx, s, del, "not today", &out); err != nil || !strings.HasPrefix(out.String(), "denied "+del) {
				t.Fatalf("Deny = %q, %v; want it denied", out.String(), err)
			}
			grants, err := s.Grants(ctx, "")
			if err != nil || len(grants) != 1 {
				t.Fatalf("Grants = %v, %v", grants, err)
			}
			out.Reset()
			if err := approvals.ListGrants(ctx, s, "s1", false, &out); err != nil || !strings.Contains(out.String(), grants[0].ID) {
				t.Fatalf("ListGrants = %q, %v; want %s", out.String(), err, grants[0].ID)
			}

			// One unknown ID: its own error. Two: both, joined, and the
			// grant that exists is revoked in between.
			out.Reset()
			if err := approvals.Revoke(ctx, s, []string{"grt_nope"}, &out); portcullis.ErrorCode(err) != portcullis.CodeNotFound {
				t.Fatalf("Revoke(unknown) = %v; want NOT_FOUND", err)
			}
			err = approvals.Revoke(ctx, s, []string{"grt_a", grants[0].ID, "grt_b"}, &out)
			if out.String() != "revoked "+grants[0].ID+"\n" {
				t.Errorf("Revoke wrote %q; want the one revoked", out.String())
			}
			status, msg, ok := approvals.ExitStatus(err)
			if !ok || status != 2 || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, "grt_a") || !strings.Contains(msg, "grt_b") {
				t.Errorf("ExitStatus(Revoke) = %d %q %v; want 2 and both IDs' messages", status, msg, ok)
			}
		})
	}
}

func TestExitStatus(t *testing.T) {
	hint := " (portcullis approvals lists the requests, portcullis grants the grants)"
	for _, tt := range []struct {
		err    error
		status int
		msg    string
	}{
		{portcullis.Errorf(portcullis.CodeConflict, "already answered"), 1, "already answered"},
		{portcullis.Errorf("UNAUTHORIZED", "wrong token"), 1, "wrong token"},
		{portcullis.Errorf(portcullis.CodeNotFound, "no request apr_1"), 2, "no request apr_1" + hint},
		{portcullis.Errorf(portcullis.CodeInvalidRequest, "single-use"), 2, "single-use"},
		{&client.UnreachableError{Gateway: "http://127.0.0.1:1", Err: errors.New("refused")}, 2,
			"no gateway answers at http://127.0.0.1:1 (refused): is `portcullis serve` running at http://127.0.0.1:1? (--gateway or $PORTCULLIS_GATEWAY names it)"},
		// The worst status of several, at least 1, with every message.
		{errors.Join(portcullis.Errorf(portcullis.CodeConflict, "a"), errors.New("b")), 1, "a\nb"},
		{errors.Join(portcullis.Errorf(portcullis.CodeConflict, "a"), portcullis.Errorf(portcullis.CodeNotFound, "c")), 2, "a\nc" + hint},
	} {
		status, msg, ok := approvals.ExitStatus(tt.err)
		if !ok || status != tt.status || msg != tt.msg {
			t.Errorf("ExitStatus(%v) = %d %q %v; want %d %q", tt.err, status, msg, ok, tt.status, tt.msg)
		}
	}
	if _, _, ok := approvals.ExitStatus(nil); ok {
		t.Error("ExitStatus(nil) is ok")
	}
	if _, _, ok := approvals.ExitStatus(errors.New("disk full")); ok {
		t.Error("ExitStatus(other error) is ok; want it left to the caller")
	}
}

func TestRemoteAndReadToken(t *testing.T) {
	if _, err := approvals.Remote("ftp://x", "t", "ana"); err == nil || !strings.HasPrefix(err.Error(), "--gateway: ") {
		t.Errorf("Remote(ftp://x) = %v; want a --gateway error", err)
	}
	if s, err := approvals.Remote("http://127.0.0.1:1", "t", "ana"); err != nil || s == nil {
		t.Errorf("Remote = %v, %v", s, err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	if err := os.WriteFile(file, []byte(" tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if tok, err := approvals.ReadToken(file); err != nil || tok != "tok" {
		t.Errorf("ReadToken = %q, %v; want tok", tok, err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := approvals.ReadToken(empty); err == nil || err.Error() != "--token-file: "+empty+" is empty" {
		t.Errorf("ReadToken(empty) = %v", err)
	}
	if _, err := approvals.ReadToken(filepath.Join(dir, "missing")); err == nil || !strings.HasPrefix(err.Error(), "--token-file: ") {
		t.Errorf("ReadToken(missing) = %v", err)
	}
}

func TestAccount(t *testing.T) {
	if a := approvals.Account(); a != "cli" && (!strings.HasPrefix(a, "cli:") || len(a) == len("cli:")) {
		t.Errorf("Account() = %q; want cli:NAME, or cli", a)
	}
}
