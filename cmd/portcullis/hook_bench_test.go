package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/sqlite"
)

// BenchmarkHookColdStart measures what Claude Code waits for on every tool
// call: a new `portcullis hook claude-code` process, from exec to its
// answer on stdout and its exit — loading the policy, opening the SQLite
// store (or calling a gateway), deciding, writing the audit row durably.
//
//	go test -run XX -bench HookColdStart -benchtime 200x ./cmd/portcullis/
func BenchmarkHookColdStart(b *testing.B) {
	dir := b.TempDir()
	bin := buildPortcullis(b, dir)
	policyPath, err := filepath.Abs(claudePolicy)
	if err != nil {
		b.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	read := claudeEvent(b, "Read", map[string]any{"file_path": "/home/dev/project/go.mod"})
	bash := claudeEvent(b, "Bash", map[string]any{"command": "git status && go test ./... | tail -n 20"})
	env := []string{"PORTCULLIS_POLICY=" + policyPath, "PORTCULLIS_STATE=" + state}

	// The store is created and migrated once, as on a machine in use.
	if code, _, stderr := runBinary(b, env, read, bin, "hook", "claude-code"); code != 0 {
		b.Fatalf("warm-up: exit %d: %s", code, stderr)
	}
	run := func(b *testing.B, event string, args ...string) {
		for b.Loop() {
			cmd := exec.Command(bin, args...)
			cmd.Env = append(os.Environ(), env...)
			cmd.Stdin = strings.NewReader(event)
			out, err := cmd.Output()
			if err != nil || !strings.Contains(string(out), `"allow"`) {
				b.Fatalf("hook: %v: %s", err, out)
			}
		}
	}
	b.Run("process-only", func(b *testing.B) {
		// The floor: starting the binary and printing its usage.
		for b.Loop() {
			if err := exec.Command(bin, "help").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("read/sqlite", func(b *testing.B) { run(b, read, "hook", "claude-code") })
	b.Run("bash/sqlite", func(b *testing.B) { run(b, bash, "hook", "claude-code") })

	// A store with a long audit log: the hook's open does not read it all.
	large := filepath.Join(dir, "large")
	fillAudit(b, filepath.Join(large, "portcullis.db"), largeRows())
	b.Run("read/sqlite-large", func(b *testing.B) {
		run(b, read, "hook", "claude-code", "--state", large)
	})

	// Through a running gateway: no store to open in the hook.
	e := newGatewayEnv(b)
	b.Run("read/gateway", func(b *testing.B) {
		run(b, read, "hook", "claude-code", "--gateway", e.url, "--token-file", e.tokenFile)
	})
}

// largeRows is the audit log length of the large store
// ($PORTCULLIS_BENCH_HOOK_ROWS, default 200,000).
func largeRows() int {
	if n, err := strconv.Atoi(os.Getenv("PORTCULLIS_BENCH_HOOK_ROWS")); err == nil && n > 0 {
		return n
	}
	return 200_000
}

// fillAudit writes n decision rows of 100 sessions into a new store.
func fillAudit(b *testing.B, path string, n int) {
	b.Helper()
	ctx := context.Background()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		b.Fatal(err)
	}
	st, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	now := time.Now().UTC()
	for i := 0; i < n; i += 1000 {
		evs := make([]portcullis.AuditEvent, min(1000, n-i))
		for j := range evs {
			c := portcullis.Call{Tool: "Read", Session: "s" + strconv.Itoa((i+j)%100), Agent: "claude-code",
				Args: map[string]any{"file_path": "/home/dev/project/file" + strconv.Itoa(i+j) + ".go"}}
			evs[j] = portcullis.AuditEvent{Kind: portcullis.AuditDecision, Time: now, DecisionID: "d" + strconv.Itoa(i+j),
				Session: c.Session, Agent: c.Agent, Tool: c.Tool, Outcome: portcullis.OutcomeAllow, Request: &c,
				Decision: &portcullis.Decision{DecisionID: "d" + strconv.Itoa(i+j), Outcome: portcullis.OutcomeAllow, PermissionLevel: portcullis.AutoApprove,
					Reason: `Operation "Read" auto-approved by default policy`, Source: portcullis.SourceOperationDefault}}
		}
		if _, err := st.AppendAudit(ctx, evs...); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHookStoreOpen is the store's part of a cold start, in process:
// opening the state directory's SQLite file and closing it, with and
// without the whole-file quick_check, on a new store and on one with a
// long audit log.
func BenchmarkHookStoreOpen(b *testing.B) {
	ctx := context.Background()
	small := filepath.Join(b.TempDir(), "portcullis.db")
	fillAudit(b, small, 0)
	large := filepath.Join(b.TempDir(), "portcullis.db")
	fillAudit(b, large, largeRows())
	for _, tc := range []struct {
		name string
		path string
		opts sqlite.Options
	}{
		{"new/quick_check", small, sqlite.Options{}},
		{"new/per-call", small, sqlite.Options{NoQuickCheck: true}},
		{"large/quick_check", large, sqlite.Options{}},
		{"large/per-call", large, sqlite.Options{NoQuickCheck: true}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				st, err := sqlite.Open(ctx, tc.path, tc.opts)
				if err != nil {
					b.Fatal(err)
				}
				st.Close()
			}
		})
	}
}
