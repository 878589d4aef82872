package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The errors a first session meets name the cause and the next step.

func TestServeWithoutConfigSaysWhatToDo(t *testing.T) {
	t.Chdir(t.TempDir())
	code, _, stderr := runCLI(t, "", "serve")
	want := "portcullis: no gateway configuration at portcullis.yaml (the default of --config) in this directory: pass --config FILE, or start from examples/gateway/portcullis.yaml\n"
	if code != 2 || stderr != want {
		t.Fatalf("serve without a configuration: exit %d\n%s\nwant exit 2 and\n%s", code, stderr, want)
	}
	code, _, stderr = runCLI(t, "", "serve", "--config", "gw.yaml")
	want = "portcullis: no gateway configuration at gw.yaml (--config): check the path, or start from examples/gateway/portcullis.yaml\n"
	if code != 2 || stderr != want {
		t.Fatalf("serve --config of a missing file: exit %d\n%s\nwant exit 2 and\n%s", code, stderr, want)
	}
}

func TestServeMissingPolicyNamesConfigKeyAndPath(t *testing.T) {
	cfg, _ := writeServeConfig(t, "")
	dir := filepath.Dir(cfg)
	if err := os.Remove(filepath.Join(dir, "policy.yaml")); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, "", "serve", "--config", cfg)
	want := "portcullis: " + cfg + ": policy: the policy file " + filepath.Join(dir, "policy.yaml") + ` does not exist ("policy.yaml" is relative to the directory of the configuration)` + "\n"
	if code != 2 || stderr != want {
		t.Fatalf("serve with a missing policy file: exit %d\n%s\nwant exit 2 and\n%s", code, stderr, want)
	}
}

func TestServeListenErrors(t *testing.T) {
	cfg, _ := writeServeConfig(t, "")
	code, _, stderr := runCLI(t, "", "serve", "--config", cfg, "--listen", "8470")
	want := `portcullis: listen address "8470": the form is HOST:PORT, such as 127.0.0.1:8470 (:8470 for every interface)` + "\n"
	if code != 2 || stderr != want {
		t.Fatalf("serve --listen 8470: exit %d\n%s\nwant exit 2 and\n%s", code, stderr, want)
	}

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	addr := busy.Addr().String()
	code, _, stderr = runCLI(t, "", "serve", "--config", cfg, "--listen", addr)
	want = "portcullis: listen on " + addr + ": the address is in use; a `portcullis serve` may already run there: stop it, or pass another --listen HOST:PORT\n"
	if code != 2 || !strings.HasSuffix(stderr, want) {
		t.Fatalf("serve on a port in use: exit %d\n%s\nwant exit 2 and\n%s", code, stderr, want)
	}
	// That first start made the state: it says so, rather than that
	// existing data was migrated.
	if !strings.Contains(stderr, `msg="state file created"`) || strings.Contains(stderr, "migrated") {
		t.Fatalf("the first start's log:\n%s\nwant \"state file created\" and nothing migrated", stderr)
	}
	if _, _, stderr = runCLI(t, "", "serve", "--config", cfg, "--listen", addr); strings.Contains(stderr, "state file") {
		t.Fatalf("the second start's log:\n%s\nwant nothing about the state file, which is current", stderr)
	}
}

func TestApproveGatewayDownAsksIfServeRuns(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now
	tok := filepath.Join(t.TempDir(), "admin.token")
	if err := os.WriteFile(tok, []byte("a-human-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, "", "approve", "apr_x", "--gateway", base, "--token-file", tok)
	if code != 2 || !strings.HasPrefix(stderr, "portcullis: no gateway answers at "+base+" (") ||
		!strings.HasSuffix(stderr, "is `portcullis serve` running at "+base+"? (--gateway or $PORTCULLIS_GATEWAY names it)\n") {
		t.Fatalf("approve with the gateway down: exit %d\n%s\nwant exit 2 asking whether portcullis serve runs at %s", code, stderr, base)
	}
}

func TestPolicyTestOfMissingFilePrintsOnlyTheError(t *testing.T) {
	code, stdout, stderr := runCLI(t, "", "policy", "test", "testdata/no_such_test.yaml")
	if code != 2 || stdout != "" || stderr != "portcullis: the test file testdata/no_such_test.yaml does not exist\n" {
		t.Fatalf("policy test of a missing file: exit %d, stdout %q, stderr %q; want exit 2 and the error alone", code, stdout, stderr)
	}
	// With a file that loads, its results are printed, and the status is 2.
	code, stdout, stderr = runCLI(t, "", "policy", "test", "testdata/pass_test.yaml", "testdata/no_such_test.yaml")
	if code != 2 || !strings.Contains(stdout, "2 passed, 0 failed") || !strings.Contains(stderr, "no_such_test.yaml does not exist") {
		t.Fatalf("policy test of a file and a missing one: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

func TestCountsAgreeWithTheirNouns(t *testing.T) {
	p := filepath.Join(t.TempDir(), "one.yaml")
	if err := os.WriteFile(p, []byte("version: 1\ntools:\n  read_note: {endpoint: READ}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, "", "policy", "lint", p)
	if want := p + ": 1 tool, 0 elements, 0 warnings\n"; code != 0 || stdout != want {
		t.Fatalf("policy lint of one tool: exit %d, %q %q; want %q", code, stdout, stderr, want)
	}
}

func TestServeRefusesAnUpstreamThatCannotStart(t *testing.T) {
	for _, c := range []struct{ command, want string }{
		{"no-such-portcullis-upstream", `the command "no-such-portcullis-upstream" cannot start: executable file not found in $PATH (it is looked up in $PATH: install it, or give its full path)`},
		{"./notes-server", `the command "./notes-server" cannot start: stat DIR/notes-server: no such file or directory (a relative path is relative to the upstream's dir, else to where serve runs)`},
	} {
		cfg, _ := writeServeConfig(t, "")
		dir := filepath.Dir(cfg)
		raw, err := os.ReadFile(cfg)
		if err != nil {
			t.Fatal(err)
		}
		i := strings.Index(string(raw), "    command: ")
		j := strings.Index(string(raw[i:]), "\n")
		fixed := string(raw[:i]) + "    command: [" + c.command + ", --stdio]\n    dir: .\n" + string(raw[i+j+1:])
		if err := os.WriteFile(cfg, []byte(fixed), 0o600); err != nil {
			t.Fatal(err)
		}
		// A serve that starts anyway runs until the context ends: end it
		// so that such a start fails the test rather than hang it.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var outb, errb bytes.Buffer
		code := exitCode(run(ctx, []string{"serve", "--config", cfg, "--listen", "127.0.0.1:0"}, strings.NewReader(""), &outb, &errb), &errb)
		cancel()
		stdout, stderr := outb.String(), errb.String()
		want := "portcullis: " + cfg + ": upstreams[0] (notes): " + strings.ReplaceAll(c.want, "DIR", dir) + "\n"
		if code != 2 || stderr != want || strings.Contains(stdout, "serving") {
			t.Fatalf("serve with upstream command %s: exit %d\nstdout %q\nstderr %q\nwant exit 2, nothing served, and\n%q", c.command, code, stdout, stderr, want)
		}
	}
}

func TestMCPRefusesAServerThatCannotStart(t *testing.T) {
	pol := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(pol, []byte(servePolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var outb, errb bytes.Buffer
	code := exitCode(run(ctx, []string{"mcp", "--policy", pol, "--state", t.TempDir(), "--", "no-such-portcullis-upstream", "--stdio"}, strings.NewReader(""), &outb, &errb), &errb)
	want := `portcullis: the command "no-such-portcullis-upstream" cannot start: executable file not found in $PATH (it is looked up in $PATH: install it, or give its full path)` + "\n"
	if code != 2 || errb.String() != want || outb.Len() != 0 {
		t.Fatalf("mcp -- a missing command: exit %d\nstdout %q\nstderr %q\nwant exit 2 and %q", code, outb.String(), errb.String(), want)
	}
}

func TestMissingPolicyFileSaysSoOnce(t *testing.T) {
	code, stdout, stderr := runCLI(t, "", "policy", "lint", "testdata/no_such_policy.yaml")
	if want := "portcullis: the policy file testdata/no_such_policy.yaml does not exist\n"; code != 2 || stdout != "" || stderr != want {
		t.Fatalf("policy lint of a missing file: exit %d, %q %q; want exit 2 and %q", code, stdout, stderr, want)
	}
}
