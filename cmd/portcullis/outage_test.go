package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/policy"
	"github.com/portcullis/portcullis/postgres"
)

// privateCluster is a PostgreSQL server of this test's own, on a free
// loopback port, that the test may stop and start without disturbing
// anything else.
type privateCluster struct {
	t        *testing.T
	bin, dir string
	port     int
	asUser   []string // runuser prefix when running as root
}

func (c *privateCluster) run(args ...string) {
	c.t.Helper()
	argv := append(append([]string(nil), c.asUser...), args...)
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		c.t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func (c *privateCluster) start() {
	c.t.Helper()
	c.run(filepath.Join(c.bin, "pg_ctl"), "-D", c.dir, "-w", "-t", "60", "-l", filepath.Join(c.dir, "log"),
		"-o", fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off", c.port, c.dir), "start")
}

func (c *privateCluster) stop() {
	c.t.Helper()
	c.run(filepath.Join(c.bin, "pg_ctl"), "-D", c.dir, "-w", "-t", "60", "-m", "immediate", "stop")
}

// newPrivateCluster needs PostgreSQL's server binaries (initdb, pg_ctl);
// CI has them, and fails the build if this test skips.
func newPrivateCluster(t *testing.T) *privateCluster {
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		if p, err := exec.LookPath("initdb"); err == nil {
			bins = []string{p}
		}
	}
	if len(bins) == 0 {
		t.Skip("needs PostgreSQL's server binaries (initdb, pg_ctl): apt-get install postgresql")
	}
	c := &privateCluster{t: t, bin: filepath.Dir(bins[len(bins)-1])}
	// Not t.TempDir: its parent is private to this user, and the server
	// may run as another.
	base, err := os.MkdirTemp("", "portcullis-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	c.dir = filepath.Join(base, "pg")
	if os.Geteuid() == 0 {
		// PostgreSQL refuses to run as root: run it as the postgres user.
		c.asUser = []string{"runuser", "-u", "postgres", "--"}
		if err := os.Chmod(base, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	c.run(filepath.Join(c.bin, "initdb"), "-D", c.dir, "-A", "trust", "-U", "postgres", "--no-sync")
	c.start()
	t.Cleanup(func() {
		argv := append(append([]string(nil), c.asUser...), filepath.Join(c.bin, "pg_ctl"), "-D", c.dir, "-m", "immediate", "stop")
		_ = exec.Command(argv[0], argv[1:]...).Run() // already stopped is fine
	})
	return c
}

// TestPostgresOutageFailsClosedAndRecovers stops the database under a
// running gate: every decision in the outage is a fail-closed deny, the
// gate keeps running, and decisions are allowed again once the database is
// back.
func TestPostgresOutageFailsClosedAndRecovers(t *testing.T) {
	c := newPrivateCluster(t)
	ctx := context.Background()
	dsn := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=2", c.port)
	st, err := postgres.Open(ctx, dsn, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	pol, _, err := policy.Load("testdata/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	g, err := gate.New(pol, gate.WithStore(st))
	if err != nil {
		t.Fatal(err)
	}
	read := portcullis.Call{Tool: "list_elements", Agent: "bot", Session: "s"}
	decideWithin := func(what string) portcullis.Decision {
		t.Helper()
		dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		d, err := g.Decide(dctx, read)
		if err != nil {
			t.Fatalf("%s: Decide: %v", what, err)
		}
		return d
	}
	if d := decideWithin("before"); d.Outcome != portcullis.OutcomeAllow {
		t.Fatalf("before the outage: %s (%s); want allow", d.Outcome, d.Reason)
	}

	c.stop()
	for i := range 3 {
		d := decideWithin("during")
		if d.Outcome == portcullis.OutcomeAllow || !d.FailClosed {
			t.Fatalf("decision %d during the outage = %s failClosed=%v; want a fail-closed refusal", i, d.Outcome, d.FailClosed)
		}
	}

	c.start()
	deadline := time.Now().Add(30 * time.Second)
	for {
		d := decideWithin("after")
		if d.Outcome == portcullis.OutcomeAllow {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("30s after the database came back the gate still says %s (%s)", d.Outcome, d.Reason)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Every allowed decision is in the audit log, and the chain holds.
	v, err := portcullis.VerifyAudit(ctx, st, nil)
	if err != nil || !v.OK() {
		t.Fatalf("VerifyAudit after the outage = %+v, %v", v, err)
	}
	recs, err := st.QueryAudit(ctx, portcullis.AuditQuery{Outcome: portcullis.OutcomeAllow})
	if err != nil || len(recs) < 2 {
		t.Fatalf("allowed rows = %d, %v; want the decisions before and after the outage", len(recs), err)
	}
}
