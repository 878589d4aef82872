package server_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/portcullis/portcullis/server"
)

// writeConfig writes a gateway configuration (head, then the rest) beside
// a policy file and returns its path. Its upstream's command is this test
// binary: a program that exists.
func writeConfig(t *testing.T, rest string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte(testPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf("policy: policy.yaml\nagents: [{name: bot, tokenFile: bot.token}]\n%s", rest)
	path := filepath.Join(dir, "portcullis.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func upstreamCommand() string {
	return fmt.Sprintf("upstreams: [{name: notes, command: [%q]}]\n", os.Args[0])
}

func TestLoadConfigDefaultsAndPaths(t *testing.T) {
	path := writeConfig(t, upstreamCommand()+"state: st\n")
	c, err := server.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(path)
	if c.Policy != filepath.Join(dir, "policy.yaml") || c.State != filepath.Join(dir, "st") || c.Agents[0].TokenFile != filepath.Join(dir, "bot.token") {
		t.Errorf("paths not resolved against the configuration's directory: policy %s, state %s, token %s", c.Policy, c.State, c.Agents[0].TokenFile)
	}
	if c.Listen != server.DefaultListen {
		t.Errorf("Listen = %q; want %q", c.Listen, server.DefaultListen)
	}
	if c.HTTP.ReadHeaderTimeout != server.DefaultReadHeaderTimeout || c.HTTP.BodyTimeout != server.DefaultBodyTimeout || c.HTTP.IdleTimeout != server.DefaultIdleTimeout {
		t.Errorf("http defaults: %+v", c.HTTP)
	}
	if c.Path() != path {
		t.Errorf("Path() = %q; want %q", c.Path(), path)
	}
}

func TestLoadConfigTrustAnnotations(t *testing.T) {
	path := writeConfig(t, fmt.Sprintf("upstreams:\n  - {name: fs, command: [%q], trustAnnotations: true}\n  - {name: web, url: \"http://127.0.0.1:9/mcp\"}\n", os.Args[0]))
	c, err := server.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Upstreams[0].TrustAnnotations || c.Upstreams[1].TrustAnnotations {
		t.Fatalf("trustAnnotations = %v, %v; want true for fs only (the default is false)", c.Upstreams[0].TrustAnnotations, c.Upstreams[1].TrustAnnotations)
	}
}

// TestLoadConfigErrors: each fault names the file and the key, and says
// what to write instead. The upstream list is checked by the gateway's
// own check (mcpgw.CheckUpstreams): one set of rules and messages.
func TestLoadConfigErrors(t *testing.T) {
	up := upstreamCommand()
	for _, tc := range []struct{ name, rest, want string }{
		{"unknown key", up + "listn: x\n", "field listn not found"},
		{"no upstream", "", "upstreams: at least one upstream MCP server is needed"},
		{"upstream without name", "upstreams: [{url: 'http://127.0.0.1:9/mcp'}]\n", "upstreams[0]: name is required"},
		{"upstream twice", "upstreams: [{name: a, url: 'http://127.0.0.1:9/mcp'}, {name: a, url: 'http://127.0.0.1:9/mcp'}]\n", `upstreams[1]: name "a" is used twice`},
		{"command and url", "upstreams: [{name: a, url: 'http://127.0.0.1:9/mcp', command: [x]}]\n", "upstreams[0] (a): give exactly one of command and url"},
		{"neither", "upstreams: [{name: a}]\n", "upstreams[0] (a): give exactly one of command and url"},
		{"command missing", "upstreams: [{name: a, command: [no-such-portcullis-upstream]}]\n", `upstreams[0] (a): the command "no-such-portcullis-upstream" cannot start`},
		{"bad root", "upstreams: [{name: a, url: 'http://127.0.0.1:9/mcp', roots: ['http://x']}]\n", "roots[0]"},
		{"negative timeout", up + "http:\n  bodyTimeout: -1s\n", "http.bodyTimeout"},
		{"witness both", up + "audit: {witnesses: [{url: 'http://w/heads/a', file: x}]}\n", "exactly one of url, file and stderr"},
		{"witness none", up + "audit: {witnesses: [{}]}\n", "exactly one of url, file and stderr"},
		{"witness scheme", up + "audit: {witnesses: [{url: 'ftp://w'}]}\n", "want http:// or https://"},
		{"witness token", up + "audit: {witnesses: [{file: x, tokenEnv: T}]}\n", "a token is for a url witness"},
		{"witness token file", up + "audit: {witnesses: [{url: 'http://w/heads/a', tokenFile: missing.token}]}\n", "missing.token"},
		{"witness interval", up + "audit: {witnessInterval: -1m}\n", "negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeConfig(t, tc.rest)
			_, err := server.LoadConfig(path)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), path+": ") {
				t.Errorf("LoadConfig(%s) = %v; want an error naming %s and saying %q", tc.rest, err, path, tc.want)
			}
		})
	}
}

func TestLoadConfigMissingPolicyNamesKeyAndPath(t *testing.T) {
	path := writeConfig(t, upstreamCommand())
	if err := os.Remove(filepath.Join(filepath.Dir(path), "policy.yaml")); err != nil {
		t.Fatal(err)
	}
	_, err := server.LoadConfig(path)
	want := fmt.Sprintf("%s: policy: the policy file %s does not exist (%q is relative to the directory of the configuration)", path, filepath.Join(filepath.Dir(path), "policy.yaml"), "policy.yaml")
	if err == nil || err.Error() != want {
		t.Errorf("LoadConfig = %v; want %s", err, want)
	}
}

func TestLoadConfigWitness(t *testing.T) {
	path := writeConfig(t, upstreamCommand()+"audit:\n  witnesses:\n    - url: http://127.0.0.1:1/heads/gw\n  witnessInterval: 50ms\n")
	c, err := server.LoadConfig(path)
	if err != nil || len(c.Audit.Witnesses) != 1 || c.Audit.WitnessInterval != 50*time.Millisecond {
		t.Fatalf("LoadConfig with a witness = %+v, %v", c, err)
	}
}
