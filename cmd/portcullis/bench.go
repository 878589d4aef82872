package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/portcullis/portcullis/loadgen"
)

// runBench drives a running gateway with concurrent agent sessions (package
// loadgen) and reports throughput, latency and the audit log's account of
// the run.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench", stderr, "bench --gateway URL --token-file AGENT.token [--via api|mcp|both] [--sessions N] [--duration D | --count N] [--json]")
	var sf stateFlags
	sf.register(fs)
	gateway := fs.String("gateway", "", "the gateway's `URL` (default $PORTCULLIS_GATEWAY, else http://127.0.0.1:8470)")
	tokenFile := fs.String("token-file", "", "`file` holding an agent's token (default $PORTCULLIS_AGENT_TOKEN holds the token itself)")
	humanFile := fs.String("human-token-file", "", "`file` holding the human token that approves writes (default admin.token in the state directory)")
	via := fs.String("via", "both", "entry points: api (POST /v1/decide), mcp (/mcp) or both")
	sessions := fs.Int("sessions", 16, "concurrent agent `sessions`")
	duration := fs.Duration("duration", 30*time.Second, "how long to run (0: until --count)")
	count := fs.Int64("count", 0, "stop after this many calls (0: until --duration)")
	rate := fs.Float64("rate", 0, "overall calls per second (0: as fast as the gateway answers)")
	mix := fs.String("mix", "read=60,write=15,deny=15,shell=10", "weights of the kinds of call: read, write, deny, shell")
	read := fs.String("read", "read_note", "a tool the policy allows")
	write := fs.String("write", "write_note", "a tool that needs a person once per session")
	deny := fs.String("deny", "delete_note", "a tool the policy denies")
	shell := fs.String("shell", "", "the shell tool (empty: no shell commands)")
	shellArg := fs.String("shell-arg", "command", "the shell tool's command argument")
	timeout := fs.Duration("timeout", 30*time.Second, "bound on one call, a held write's approval included")
	progress := fs.Duration("progress", time.Second, "how often to print progress on stderr (0: never)")
	pid := fs.Int("gateway-pid", 0, "the gateway's process `id`, to sample its resident memory (Linux)")
	audit := fs.Bool("audit", true, "check the audit log afterwards (opens the store of --state/--store)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	seed := fs.Uint64("seed", 1, "seed of the mix")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError("bench takes no arguments; unexpected %q", pos[0])
	}
	cfg := loadgen.Config{
		BaseURL: *gateway, Sessions: *sessions, Duration: *duration, Count: *count, Rate: *rate,
		Tools:       loadgen.Tools{Read: *read, Write: *write, Deny: *deny, Shell: *shell, ShellArg: *shellArg},
		CallTimeout: *timeout, ProgressEvery: *progress, Seed: *seed,
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = strings.TrimSpace(os.Getenv("PORTCULLIS_GATEWAY"))
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = "http://127.0.0.1:8470"
	}
	cfg.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	switch *via {
	case "api":
		cfg.Via = []loadgen.Via{loadgen.API}
	case "mcp":
		cfg.Via = []loadgen.Via{loadgen.MCP}
	case "both":
		cfg.Via = []loadgen.Via{loadgen.API, loadgen.MCP}
	default:
		return usageError("--via %q: want api, mcp or both", *via)
	}
	if cfg.Mix, err = parseMix(*mix); err != nil {
		return usageError("--mix: %v", err)
	}
	if cfg.Mix[loadgen.Shell] > 0 && *shell == "" {
		cfg.Mix[loadgen.Shell] = 0 // no shell tool named: no shell commands
	}
	if cfg.AgentToken, err = benchToken(*tokenFile); err != nil {
		return err
	}
	if cfg.Mix[loadgen.Write] > 0 {
		if cfg.HumanToken, err = benchHumanToken(&sf, *humanFile); err != nil {
			return err
		}
	}
	if *progress > 0 {
		cfg.Progress = func(s loadgen.Snapshot) {
			mem := ""
			if s.RSSBytes > 0 {
				mem = fmt.Sprintf(", gateway RSS %.1f MB", float64(s.RSSBytes)/(1<<20))
			}
			fmt.Fprintf(stderr, "bench: %6.1fs  %d calls (%d unanswered)  %.0f/s  p50 %.2fms  p99 %.2fms%s\n",
				s.Elapsed.Seconds(), s.Calls, s.Failed, s.IntervalRate, ms(s.IntervalP50), ms(s.IntervalP99), mem)
		}
	}
	if *pid > 0 {
		p := *pid
		cfg.Sample = func() (int64, bool) { return processRSS(p) }
	}
	rep, err := loadgen.Run(ctx, cfg)
	if err != nil {
		return usageError("%v", err)
	}
	var check *loadgen.AuditCheck
	if *audit {
		// Open only an existing store: a new empty one would report
		// every decision missing.
		if u, err := sf.url(); err == nil && strings.HasPrefix(u, "sqlite:") {
			path := strings.TrimPrefix(strings.TrimPrefix(u, "sqlite://"), "sqlite:")
			if _, err := os.Stat(path); err != nil {
				return fmt.Errorf("the gateway's store: %w (pass the gateway's --state or --store, or --audit=false)", err)
			}
		}
		st, err := sf.open(ctx, cliLogger(stderr))
		if err != nil {
			return fmt.Errorf("open the store to check the audit log: %w (pass --state or --store, or --audit=false)", err)
		}
		check, err = rep.CheckAudit(ctx, st)
		st.Close()
		if err != nil {
			return err
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else if err := rep.WriteTable(stdout); err != nil {
		return err
	}
	if check != nil && !check.Complete() {
		return &exitError{code: 1, msg: "the audit log is not complete for this run"}
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// parseMix reads "read=60,write=15,deny=15,shell=10".
func parseMix(s string) (map[loadgen.Kind]int, error) {
	out := map[loadgen.Kind]int{}
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		n, err := strconv.Atoi(v)
		if !ok || err != nil || n < 0 {
			return nil, fmt.Errorf("%q: want kind=weight, e.g. read=60", part)
		}
		kind := loadgen.Kind(k)
		known := false
		for _, kk := range loadgen.Kinds {
			known = known || kk == kind
		}
		if !known {
			return nil, fmt.Errorf("unknown kind %q (want read, write, deny or shell)", k)
		}
		out[kind] = n
	}
	return out, nil
}

func benchToken(file string) (string, error) {
	if file == "" {
		if t := strings.TrimSpace(os.Getenv("PORTCULLIS_AGENT_TOKEN")); t != "" {
			return t, nil
		}
		return "", usageError("no agent token: pass --token-file FILE or set PORTCULLIS_AGENT_TOKEN")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", usageError("agent token: %v", err)
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", usageError("agent token: %s is empty", file)
	}
	return t, nil
}

func benchHumanToken(sf *stateFlags, file string) (string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", usageError("human token: %v", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	dir, err := sf.dir(false)
	if err != nil {
		return "", err
	}
	t, err := readSecret(dir, "admin.token")
	if err != nil {
		return "", usageError("writes in the mix need a person's approval: %v (pass --human-token-file, or --mix without write)", err)
	}
	return t, nil
}

// processRSS reads a process's resident memory from /proc (Linux).
func processRSS(pid int) (int64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}
