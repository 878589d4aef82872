package sqlite_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/sqlite"
)

// crashChildEnv, when set to a file's path, makes the test binary the
// child of TestKillMidLoad instead of running tests; crashSyncEnv names the
// child's Options.Sync.
const (
	crashChildEnv = "PORTCULLIS_SQLITE_CRASH_CHILD"
	crashSyncEnv  = "PORTCULLIS_SQLITE_CRASH_SYNC"
)

func TestMain(m *testing.M) {
	if path := os.Getenv(crashChildEnv); path != "" {
		crashChild(path)
		return
	}
	if path := os.Getenv(blockChildEnv); path != "" {
		blockChild(path)
		return
	}
	code := m.Run()
	removeBenchLog()
	os.Exit(code)
}

// crashChild appends audit rows from 8 goroutines until it is killed,
// printing the sequence number of every row whose AppendAudit returned.
func crashChild(path string) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, path, sqlite.Options{Sync: sqlite.Sync(os.Getenv(crashSyncEnv))})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var mu sync.Mutex
	for w := range 8 {
		go func() {
			for i := 0; ; i++ {
				recs, err := s.AppendAudit(ctx, event(w*1_000_000+i, time.Now(), fmt.Sprintf("s%d", w)))
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(3)
				}
				mu.Lock()
				fmt.Fprintf(os.Stdout, "%d\n", recs[0].Seq) // one write(2): a line is whole or absent
				mu.Unlock()
			}
		}()
	}
	time.Sleep(time.Minute) // the parent kills it long before
	fmt.Fprintln(os.Stderr, "crash child was not killed")
	os.Exit(4)
}

// TestKillMidLoad SIGKILLs a process appending under load and finds every
// append it acknowledged in the file, with the chain intact: with
// SyncFull, and with SyncProcess, whose commits are in the write-ahead log
// (the page cache) but not yet on the disk when the process dies.
func TestKillMidLoad(t *testing.T) {
	for _, mode := range []sqlite.Sync{sqlite.SyncFull, sqlite.SyncProcess} {
		t.Run(string(mode), func(t *testing.T) { killMidLoad(t, mode) })
	}
}

func killMidLoad(t *testing.T, mode sqlite.Sync) {
	path := filepath.Join(t.TempDir(), "state.db")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+path, crashSyncEnv+"="+string(mode))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	seqs := make(chan int64, 1024)
	scanErr := make(chan error, 1)
	go func() {
		defer close(seqs)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			n, err := strconv.ParseInt(sc.Text(), 10, 64)
			if err != nil {
				scanErr <- fmt.Errorf("child printed %q: %w", sc.Text(), err)
				return
			}
			seqs <- n
		}
		scanErr <- sc.Err()
	}()

	// Kill it once it has acknowledged enough rows, or after two seconds.
	const enough = 2000
	acked := map[int64]bool{}
	deadline := time.After(2 * time.Second)
	killed := false
	for seq := range seqs {
		acked[seq] = true
		if !killed {
			select {
			case <-deadline:
			default:
				if len(acked) < enough {
					continue
				}
			}
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
	}
	if !killed {
		t.Fatalf("the child ended before it was killed: %s", stderr.String())
	}
	if err := <-scanErr; err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil {
		t.Fatalf("the killed child exited cleanly; stderr: %s", stderr.String())
	}
	if len(acked) == 0 {
		t.Fatalf("the child acknowledged no row; stderr: %s", stderr.String())
	}

	s := openAt(t, path, nil)
	present := map[int64]bool{}
	if err := s.ScanAudit(context.Background(), 0, func(r portcullis.AuditRecord) (bool, error) {
		present[r.Seq] = true
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	for seq := range acked {
		if !present[seq] {
			t.Errorf("row %d was acknowledged but is not in the file after kill -9", seq)
		}
	}
	v := verify(t, s)
	if !v.OK() {
		t.Fatalf("VerifyAudit after kill -9 = %+v", v)
	}
	// The index tables are as consistent as the rows: the lookups by
	// session, agent, tool and time find exactly what a scan finds.
	checkIndexConsistent(t, path)
	all := scanAll(t, s)
	mid := all[len(all)/2].Columns.Time
	for _, q := range []portcullis.AuditQuery{
		{Agent: "bot", Limit: len(all)}, {Tool: "write_file", Newest: true, Limit: len(all)},
		{Since: mid, Limit: len(all)}, {Until: mid, Newest: true, Limit: len(all)},
	} {
		checkQuery(t, s, all, q)
	}
	for w := range 8 {
		checkQuery(t, s, all, portcullis.AuditQuery{Session: fmt.Sprintf("s%d", w), Limit: len(all)})
		checkQuery(t, s, all, portcullis.AuditQuery{Session: fmt.Sprintf("s%d", w), Newest: true, Limit: 100})
	}
	t.Logf("killed after %d acknowledged rows; %d rows in the file (%d indexed), chain verified", len(acked), v.Rows, watermark(t, path))
}
