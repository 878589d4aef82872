package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/portcullis/portcullis/sqlite"
)

// fileSize is the size of path, 0 when it does not exist.
func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// waitFor polls cond every 20 ms until it holds or d has passed.
func waitFor(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// An agent's calls come one at a time, seconds apart. Were the log
// checkpointed after each, the next commit would start it anew: it writes
// and, under synchronous=FULL, fsyncs the log's header before its frames,
// two fsyncs for one row. The background checkpointer leaves a few
// isolated commits in the log: each appends to it, and the log grows.
func TestIsolatedCommitsAppendToTheLog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	at := time.Now()
	wal := path + "-wal"
	var sizes []int64
	for i := range 5 {
		if _, err := s.AppendAudit(ctx, event(i, at, "s1")); err != nil {
			t.Fatal(err)
		}
		// Longer than the checkpointer's least interval: time enough
		// for it to run, were it to run after each commit.
		time.Sleep(250 * time.Millisecond)
		sizes = append(sizes, fileSize(t, wal))
	}
	for i := 1; i < len(sizes); i++ {
		if sizes[i] <= sizes[i-1] {
			t.Fatalf("the log's size after each of 5 isolated commits = %v: commit %d started the log anew (it was checkpointed after the commit before)", sizes, i+1)
		}
	}
}

// The log does not grow without bound: after 64 commits the background
// checkpointer copies it into the database file, without waiting for the
// commits to pause. Which commit is the 64th is not known here (the store's
// own trim at Open counts too), and a commit that lands after the
// checkpoint began stays in the log for the next one, so whether the log
// then starts anew is checked after a pause (TestCheckpointWhenCommitsPause).
func TestCheckpointAfterManyCommits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	at := time.Now()
	if _, err := s.AppendAudit(ctx, event(0, at, "s1")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(250 * time.Millisecond)
	before := fileSize(t, path)
	for i := 1; i <= 64; i++ {
		if _, err := s.AppendAudit(ctx, event(i, at, "s1")); err != nil {
			t.Fatal(err)
		}
	}
	if !waitFor(5*time.Second, func() bool { return fileSize(t, path) > before }) {
		t.Fatalf("the database file is %d bytes 5 s after 65 commits, as before them: the log was not checkpointed", before)
	}
}

// Commits that stop are checkpointed all the same, 10 s after the first
// of them, not at once.
func TestCheckpointWhenCommitsPause(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	before := fileSize(t, path)
	if _, err := s.AppendAudit(ctx, event(0, time.Now(), "s1")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if !waitFor(20*time.Second, func() bool { return fileSize(t, path) > before }) {
		t.Fatalf("the database file is %d bytes 20 s after a commit, as before it: the log was not checkpointed", before)
	}
	if took := time.Since(start); took < 5*time.Second {
		t.Errorf("the log was checkpointed %s after a lone commit: sooner than the pause the checkpointer waits for", took)
	}
	// The log, checkpointed whole with no commit after it (give the
	// checkpoint that has begun copying time to end), starts anew: the
	// next commit writes at its beginning, so the file does not grow.
	time.Sleep(250 * time.Millisecond)
	walSize := fileSize(t, path+"-wal")
	if _, err := s.AppendAudit(ctx, event(1, time.Now(), "s1")); err != nil {
		t.Fatal(err)
	}
	if got := fileSize(t, path+"-wal"); got > walSize {
		t.Errorf("the log grew from %d to %d bytes after a checkpoint: it was not started anew", walSize, got)
	}
}

// Commits that never pause, fewer than 64, are checkpointed within 10 s
// of the first: under `sync: process` a commit reaches the disk with the
// checkpoint, so a steady trickle of commits must not put it off.
func TestCheckpointDeadlineNotPutOff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{Sync: sqlite.SyncProcess})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	before := fileSize(t, path)
	at := time.Now()
	for i := 0; ; i++ {
		if _, err := s.AppendAudit(ctx, event(i, at, "s1")); err != nil {
			t.Fatal(err)
		}
		if fileSize(t, path) > before {
			return
		}
		if i >= 40 { // 40 commits 400 ms apart: 16 s, and fewer than 64
			t.Fatalf("the database file is %d bytes after %d commits in %s, as before them: the log was not checkpointed while the commits went on", before, i+1, time.Since(at).Round(time.Second))
		}
		time.Sleep(400 * time.Millisecond)
	}
}

// A store that closes copies its commits into the database file, though
// another store (another process: the gateway) keeps the file open: a
// hook's or the CLI's commits do not wait in the log for the other's
// commits or for the log's safety net.
func TestCloseCheckpointsItsCommits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	gateway, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer gateway.Close()
	// Let the gateway's own start-up commits be checkpointed first.
	if !waitFor(15*time.Second, func() bool { return fileSize(t, path) > 0 }) {
		t.Fatal("the gateway's start was never checkpointed")
	}
	hook, err := sqlite.Open(ctx, path, sqlite.Options{NoQuickCheck: true})
	if err != nil {
		t.Fatal(err)
	}
	before := fileSize(t, path)
	at := time.Now()
	for i := range 20 {
		if _, err := hook.AppendAudit(ctx, event(i, at, "hook")); err != nil {
			t.Fatal(err)
		}
	}
	if err := hook.Close(); err != nil {
		t.Fatal(err)
	}
	if got := fileSize(t, path); got <= before {
		t.Fatalf("the database file is %d bytes after the hook's 20 rows and its Close, as before them: its commits were left in the log", got)
	}
}
