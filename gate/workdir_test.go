package gate_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/memstore"
)

const workdirPolicy = `
version: 1
tools:
  Write:
    endpoint: UPDATE
    pathArg: file_path
    defaultLevel: CONFIRM_SESSION
    outsideWorkdir: CONFIRM_SINGLE_USE
  Delete:
    endpoint: DELETE
    pathArg: path
    defaultLevel: CONFIRM_SESSION
    outsideWorkdir: DENY
`

// TestOutsideWorkdir: a write's level depends on where its path is, as
// the host states the working directory. Inside it the tool's level
// stands; outside it, or where nobody trusted said where the agent works,
// the outsideWorkdir level applies. A path that climbs out with "..", or
// through a symbolic link inside the directory to a file outside it, is
// outside; an agent's own word for its working directory is not believed.
func TestOutsideWorkdir(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	work := filepath.Join(root, "project")
	if err := os.MkdirAll(filepath.Join(work, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	outsideFile := filepath.Join(root, "secret.txt")
	if err := os.WriteFile(outsideFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outsideFile, filepath.Join(work, "link.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(root, filepath.Join(work, "up")); err != nil {
		t.Fatal(err)
	}
	// A working directory reached through a link is the directory itself.
	workLink := filepath.Join(root, "work-link")
	if err := os.Symlink(work, workLink); err != nil {
		t.Fatal(err)
	}

	g := mustGate(t, workdirPolicy)
	for _, tc := range []struct {
		name    string
		call    portcullis.Call
		level   portcullis.Level
		outside bool
	}{
		{"a file inside", portcullis.Call{Tool: "Write", Workdir: work, Args: map[string]any{"file_path": filepath.Join(work, "src", "main.go")}}, portcullis.ConfirmSession, false},
		{"a file not yet created, in a directory not yet created", portcullis.Call{Tool: "Write", Workdir: work, Args: map[string]any{"file_path": filepath.Join(work, "new", "deeper", "x.go")}}, portcullis.ConfirmSession, false},
		{"a relative path, against the working directory", portcullis.Call{Tool: "Write", Workdir: work, Args: map[string]any{"file_path": "src/main.go"}}, portcullis.ConfirmSession, false},
		{"the working directory named through a link", portcullis.Call{Tool: "Write", Workdir: workLink, Args: map[string]any{"file_path": filepath.Join(work, "a.go")}}, portcullis.ConfirmSession, false},
		{"a file outside", portcullis.Call{Tool: "Write", Workdir: work, Args: map[string]any{"file_path": outsideFile}}, portcullis.ConfirmSingleUse, true},
		{"a sibling whose name starts like the directory", portcullis.Call{Tool: "Write", Workdir: work, Args: map[string]any{"file_path": work + "-evil/x"}}, portcullis.ConfirmSingleUse, true},
		{"climbing out with ..", portcullis.Call{Tool: "Write", Workdir: work, Args: map[string]any{"file_path": filepath.Join(work, "src") + "/../../secret.txt"}}, portcullis.ConfirmSingleUse, true},
		{"a relative path climbing out", portcullis.Call{Tool: "Write", Workdir: work, Args: map[string]any{"file_path": "../secret.txt"}}, portcullis.ConfirmSingleUse, true},
		{"a link inside to a file outside", portcullis.Call{Tool: "Write", Workdir: work, Args: map[string]any{"file_path": filepath.Join(work, "link.txt")}}, portcullis.ConfirmSingleUse, true},
		{"a new file under a link inside to a directory outside", portcullis.Call{Tool: "Write", Workdir: work, Args: map[string]any{"file_path": filepath.Join(work, "up", "new.txt")}}, portcullis.ConfirmSingleUse, true},
		{"no working directory", portcullis.Call{Tool: "Write", Args: map[string]any{"file_path": filepath.Join(work, "a.go")}}, portcullis.ConfirmSingleUse, true},
		{"a relative working directory", portcullis.Call{Tool: "Write", Workdir: "project", Args: map[string]any{"file_path": "project/a.go"}}, portcullis.ConfirmSingleUse, true},
		{"no path", portcullis.Call{Tool: "Write", Workdir: work, Args: map[string]any{"content": "x"}}, portcullis.ConfirmSingleUse, true},
		{"a path that is not a string", portcullis.Call{Tool: "Write", Workdir: work, Args: map[string]any{"file_path": []any{"a"}}}, portcullis.ConfirmSingleUse, true},
		{"the agent's own word", portcullis.Call{Tool: "Write", Workdir: root, ContextSource: portcullis.ContextAgent, Args: map[string]any{"file_path": outsideFile}}, portcullis.ConfirmSingleUse, true},
		{"the host's word", portcullis.Call{Tool: "Write", Workdir: root, ContextSource: portcullis.ContextHost, Args: map[string]any{"file_path": outsideFile}}, portcullis.ConfirmSession, false},
		{"outside, where the policy says deny", portcullis.Call{Tool: "Delete", Workdir: work, Args: map[string]any{"path": outsideFile}}, portcullis.Deny, true},
		{"inside, where the policy says deny outside", portcullis.Call{Tool: "Delete", Workdir: work, Args: map[string]any{"path": filepath.Join(work, "a.go")}}, portcullis.ConfirmSession, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := g.Explain(ctx, tc.call)
			if err != nil {
				t.Fatal(err)
			}
			if d.PermissionLevel != tc.level {
				t.Errorf("level %s; want %s (trace %v)", d.PermissionLevel, tc.level, d.Trace)
			}
			var facts []portcullis.Fact
			for _, e := range d.Trace {
				if e.Stage == "route" {
					facts = e.Facts
				}
			}
			if got := slices.Contains(facts, portcullis.FactOutsideWorkdir); got != tc.outside {
				t.Errorf("route facts %v; want outside-workdir %v", facts, tc.outside)
			}
		})
	}
}

// TestSessionGrantStopsAtTheWorkdir: a person's "approve for this session"
// of a write covers the session's later writes inside the working
// directory, never one outside it.
func TestSessionGrantStopsAtTheWorkdir(t *testing.T) {
	ctx := context.Background()
	clock := newClock()
	st := memstore.New(clock)
	g := mustGate(t, workdirPolicy, gate.WithStore(st), gate.WithClock(clock))
	work := t.TempDir()
	if _, err := st.AddGrant(ctx, portcullis.Grant{Kind: portcullis.GrantSession, Tool: "Write", Session: "s1", ExpiresAt: clock.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	inside := decide(t, g, portcullis.Call{Tool: "Write", Session: "s1", Workdir: work, Args: map[string]any{"file_path": filepath.Join(work, "a.go")}})
	if inside.Outcome != portcullis.OutcomeAllow || inside.Source != portcullis.SourceSessionGrant {
		t.Errorf("a write inside, with a session grant: %s/%s; want allow/session_grant", inside.Outcome, inside.Source)
	}
	outside := decide(t, g, portcullis.Call{Tool: "Write", Session: "s1", Workdir: work, Args: map[string]any{"file_path": filepath.Join(filepath.Dir(work), "b.go")}})
	if outside.Outcome != portcullis.OutcomeConfirm || outside.PermissionLevel != portcullis.ConfirmSingleUse {
		t.Errorf("a write outside, with a session grant: %s at %s; want confirm at CONFIRM_SINGLE_USE", outside.Outcome, outside.PermissionLevel)
	}
}
