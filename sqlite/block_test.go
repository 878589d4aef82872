package sqlite_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/sqlite"
)

// blockChildEnv, when set to a file's path, makes the test binary the
// child of TestBlockFromAnotherProcess instead of running tests;
// blockSyncEnv names the child's Options.Sync.
const (
	blockChildEnv = "PORTCULLIS_SQLITE_BLOCK_CHILD"
	blockSyncEnv  = "PORTCULLIS_SQLITE_BLOCK_SYNC"
)

// blockChild opens its own store on the file and, for each line of its
// standard input ("put AGENT" or "delete AGENT"), writes or clears that
// agent's block, printing "ok" once the write has returned: a host hook
// or the CLI blocking an agent beside a running gateway.
func blockChild(path string) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, path, sqlite.Options{Sync: sqlite.Sync(os.Getenv(blockSyncEnv)), NoQuickCheck: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		op, agent, _ := strings.Cut(sc.Text(), " ")
		switch op {
		case "put":
			err = s.PutBlock(ctx, portcullis.Block{Agent: agent, Reason: "stopped by the child", ChallengeID: "c-" + agent, CreatedAt: time.Now()})
		case "delete":
			err = s.DeleteBlock(ctx, agent)
		default:
			err = fmt.Errorf("unknown command %q", sc.Text())
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		fmt.Println("ok")
	}
	if err := s.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(4)
	}
}

// TestBlockFromAnotherProcess writes and clears blocks from another
// process, with its own store on the same file, while this process reads
// them as a gateway does: many reads before each write, on several
// connections at once, and an audit row committed by this process between
// reads. The first read that starts after the other process's write
// returned must see it, on every connection.
func TestBlockFromAnotherProcess(t *testing.T) {
	for _, mode := range []sqlite.Sync{sqlite.SyncFull, sqlite.SyncProcess} {
		t.Run(string(mode), func(t *testing.T) { blockFromAnotherProcess(t, mode) })
	}
}

func blockFromAnotherProcess(t *testing.T, mode sqlite.Sync) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	gw, err := sqlite.Open(ctx, path, sqlite.Options{Sync: mode})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := gw.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), blockChildEnv+"="+path, blockSyncEnv+"="+string(mode))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acks := bufio.NewScanner(stdout)
	// write has the child write and waits until its write has returned.
	write := func(op, agent string) {
		t.Helper()
		if _, err := io.WriteString(stdin, op+" "+agent+"\n"); err != nil {
			t.Fatalf("%s %s: %v; child's stderr: %s", op, agent, err, stderr.String())
		}
		if !acks.Scan() || acks.Text() != "ok" {
			t.Fatalf("%s %s: the child answered %q (%v); its stderr: %s", op, agent, acks.Text(), acks.Err(), stderr.String())
		}
	}
	t.Cleanup(func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("child: %v; stderr: %s", err, stderr.String())
		}
	})

	// read reads the agent's block from `readers` goroutines at once, so
	// that several of the store's connections have read the block (and
	// cached what they read) before the next write; every read must say
	// want.
	read := func(step string, agent string, readers int, want bool) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, readers)
		for range readers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				b, blocked, err := gw.Block(ctx, agent)
				switch {
				case err != nil:
					errs <- err
				case blocked != want:
					errs <- fmt.Errorf("%s: Block(%s) = %v; want %v", step, agent, blocked, want)
				case blocked && (b.Agent != agent || b.ChallengeID != "c-"+agent || b.Reason != "stopped by the child"):
					errs <- fmt.Errorf("%s: Block(%s) = %+v; want the child's block", step, agent, b)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}

	at := time.Now()
	for i := range 40 {
		agent := fmt.Sprintf("agent-%d", i%3)
		readers := 1 + i%8
		// Warm: reads and this process's own commits, as allowed calls make.
		for j := range 5 {
			read(fmt.Sprintf("round %d, before the block", i), agent, readers, false)
			if _, err := gw.AppendAudit(ctx, event(i*10+j, at, "s1")); err != nil {
				t.Fatal(err)
			}
		}
		write("put", agent)
		read(fmt.Sprintf("round %d, first read after the block", i), agent, readers, true)
		if _, err := gw.AppendAudit(ctx, event(i*10+8, at, "s1")); err != nil {
			t.Fatal(err)
		}
		read(fmt.Sprintf("round %d, after the block and a commit", i), agent, 8, true)
		write("delete", agent)
		read(fmt.Sprintf("round %d, first read after the block was cleared", i), agent, readers, false)
	}
}

// TestBlockReadFailsClosed: when the blocks cannot be read, Block says so
// with an error (which the gate takes for a block), on connections that
// read the table before as well as on new ones, and after Close.
func TestBlockReadFailsClosed(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	readAll := func(n int) []error {
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _, errs[i] = s.Block(ctx, "bot")
			}()
		}
		wg.Wait()
		return errs
	}
	for _, err := range readAll(8) {
		noErr(t, err)
	}
	if _, err := rawDB(t, path).Exec(`DROP TABLE blocks`); err != nil {
		t.Fatal(err)
	}
	for i, err := range readAll(16) {
		if err == nil {
			t.Fatalf("read %d: Block after the blocks table was dropped = nil error; want one", i)
		}
	}
	noErr(t, s.Close())
	if _, _, err := s.Block(ctx, "bot"); err == nil {
		t.Fatal("Block after Close = nil error; want one")
	}
}
