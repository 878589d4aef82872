package mcpgw_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis/portcullis/mcpgw"
)

// notesStdioEnv makes the test binary the HTTP benchmarks' notes server
// (benchNotes) on its stdio: the command upstream that the gateway and
// the npm mcp-proxy are both put in front of.
const notesStdioEnv = "PORTCULLIS_TEST_NOTES_STDIO"

// mcpProxyEnv names the npm mcp-proxy's program (its
// dist/bin/mcp-proxy.mjs) when it is not in ../e2e/node_modules.
const mcpProxyEnv = "PORTCULLIS_BENCH_MCP_PROXY"

func TestMain(m *testing.M) {
	if os.Getenv(notesStdioEnv) == "1" {
		if err := benchNotes().server.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, "notes upstream:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// notesCommand is the command that serves the notes server on its stdio,
// with the variable the process needs in its environment.
func notesCommand(tb testing.TB) (cmd []string, env string) {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	return []string{exe}, notesStdioEnv + "=1"
}

// BenchmarkHTTPGatewayCommand is BenchmarkHTTPGatewayFramed with the
// notes server as a real command upstream: another process, started by
// the gateway, on its stdio. It is the gateway in front of the same
// program BenchmarkNpmMCPProxy puts mcp-proxy in front of.
func BenchmarkHTTPGatewayCommand(b *testing.B) {
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	cmd, env := notesCommand(b)
	srv, _ := httpGatewayOver(b, mcpgw.Upstream{Name: "notes", Command: cmd, Env: []string{env}, TrustAnnotations: true})
	rawLoad(b, srv.URL, 1000, watched{"upstream", childOf(os.Getpid())})
}

// BenchmarkNpmMCPProxy is the npm mcp-proxy (no policy, no audit) in
// front of the notes server as a command, under the same load as the
// gateway's benchmarks: 1,000 Streamable HTTP sessions, allowed read_note
// calls from 128 callers. It also reports the proxy's resident memory
// after them. mcp-proxy starts one stdio process for all sessions, as the
// gateway does; each HTTP session gets a server of its own in the proxy.
// It runs with mcp-proxy's defaults but for the address (its event store
// for resumable streams included), and needs Node and `npm ci --prefix
// e2e` (or $PORTCULLIS_BENCH_MCP_PROXY).
func BenchmarkNpmMCPProxy(b *testing.B) {
	url, proxy := startMCPProxy(b)
	rawLoad(b, url, 1000, watched{"proxy", proxy}, watched{"upstream", childOf(proxy)})
	if rss, ok := residentMB(proxy); ok {
		b.ReportMetric(rss, "proxy-rss-MB")
	}
}

// residentMB is pid's resident memory in MB (VmRSS in /proc/PID/status).
func residentMB(pid int) (float64, bool) {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, false
	}
	for line := range strings.Lines(string(raw)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v) // "123456 kB"
			if len(f) != 2 || f[1] != "kB" {
				return 0, false
			}
			kb, err := strconv.ParseFloat(f[0], 64)
			return kb / 1024, err == nil
		}
	}
	return 0, false
}

// mcpProxyProgram finds node and mcp-proxy's program, or skips b.
func mcpProxyProgram(b *testing.B) (node, program string) {
	node, err := exec.LookPath("node")
	if err != nil {
		b.Skip("node is not on $PATH: BenchmarkNpmMCPProxy runs the npm mcp-proxy")
	}
	program = os.Getenv(mcpProxyEnv)
	if program == "" {
		program, err = filepath.Abs(filepath.Join("..", "e2e", "node_modules", "mcp-proxy", "dist", "bin", "mcp-proxy.mjs"))
		if err != nil {
			b.Fatal(err)
		}
	}
	if _, err := os.Stat(program); err != nil {
		b.Skipf("the npm mcp-proxy is not installed: run `npm ci --prefix e2e`, or set $%s to its dist/bin/mcp-proxy.mjs (%v)", mcpProxyEnv, err)
	}
	return node, program
}

// startMCPProxy starts mcp-proxy on a loopback port in front of the notes
// command and returns its Streamable HTTP endpoint, once it accepts
// connections, and its process id. The proxy and its upstream are stopped
// when b ends.
func startMCPProxy(b *testing.B) (url string, pid int) {
	b.Helper()
	node, program := mcpProxyProgram(b)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := l.Addr().String()
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	notes, env := notesCommand(b)
	args := append([]string{program, "--host", "127.0.0.1", "--port", port, "--server", "stream", "--"}, notes...)
	cmd := exec.Command(node, args...)
	// mcp-proxy passes its environment to the command it starts.
	cmd.Env = append(os.Environ(), env)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	b.Cleanup(func() {
		// mcp-proxy shuts down on SIGTERM and closes its upstream's stdin.
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return "http://" + addr + "/mcp", cmd.Process.Pid
		}
		select {
		case <-exited:
			b.Fatalf("mcp-proxy exited before it listened: %s", out.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b.Fatalf("mcp-proxy did not listen on %s within a minute: %s", addr, out.String())
		}
	}
}

// syncBuffer is a bytes.Buffer that a process's stdout and stderr can
// both write to.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// procStat is one process's parent, the CPU time (user and system) it
// has used and when it started (in clock ticks since boot), from
// /proc/PID/stat (Linux).
type procStat struct {
	ppid  int
	cpu   time.Duration
	start int64
}

func readProcStat(pid int) (procStat, bool) {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, false
	}
	// pid (comm) state ppid ... utime stime are fields 14 and 15, starttime
	// 22; comm may hold spaces and parentheses, so count from its last ')'.
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(string(raw[i+1:]))
	if len(f) < 20 {
		return procStat{}, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	ut, err2 := strconv.ParseInt(f[11], 10, 64)
	st, err3 := strconv.ParseInt(f[12], 10, 64)
	start, err4 := strconv.ParseInt(f[19], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil {
		return procStat{}, false
	}
	// In clock ticks, USER_HZ: 100 a second on Linux.
	return procStat{ppid: ppid, cpu: time.Duration(ut+st) * 10 * time.Millisecond, start: start}, true
}

// procs is every live process's procStat, by process id; empty where /proc
// is not Linux's.
func procs() map[int]procStat {
	out := map[int]procStat{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := readProcStat(pid); ok {
			out[pid] = p
		}
	}
	return out
}

// childOf is the process id of pid's youngest live child (the upstream a
// benchmark just started, not one an earlier run is still ending), or 0.
func childOf(pid int) int {
	child, start := 0, int64(-1)
	for c, p := range procs() {
		if p.ppid == pid && p.start > start {
			child, start = c, p.start
		}
	}
	return child
}

// descendantsCPU is the CPU time that the live descendants of this
// process have used: the command upstreams and proxies a benchmark
// started. It is zero where /proc is not Linux's.
func descendantsCPU() time.Duration {
	all := procs()
	self := os.Getpid()
	var total time.Duration
	for _, p := range all {
		for anc, depth := p.ppid, 0; anc > 1 && depth < 64; anc, depth = all[anc].ppid, depth+1 {
			if anc == self {
				total += p.cpu
				break
			}
		}
	}
	return total
}

// watched is a process whose CPU per call a benchmark reports on its own,
// as NAME-cpu-µs/call.
type watched struct {
	name string
	pid  int
}

// processCPU is pid's CPU time so far, or 0 when it cannot be read.
func processCPU(pid int) time.Duration {
	p, _ := readProcStat(pid)
	return p.cpu
}
