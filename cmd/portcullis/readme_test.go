package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// readmeBlocks returns the ```sh blocks of the README's section that
// starts with heading, in order, one command line each.
func readmeBlocks(t *testing.T, heading string) []string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("README has no section %q", heading)
	}
	s = s[i+len(heading)+2:]
	if j := strings.Index(s, "\n## "); j >= 0 {
		s = s[:j]
	}
	var cmds []string
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(s, -1) {
		cmds = append(cmds, strings.Split(strings.TrimSpace(m[1]), "\n")...)
	}
	return cmds
}

// TestReadmeFirstMinute walks the README's set-up and "Try it" as a new
// user would, with a temporary HOME and no XDG_STATE_HOME: the set-up
// command starts the gateway, the decision API's curl makes a write wait,
// the terminal says how to answer it, `approve` with the ID answers it,
// the waiting call is allowed, the audit log has the rows and verifies,
// the denied tool is hidden from tools/list, and (with the npm clients)
// `claude mcp add` writes the connection Claude Code uses. Each command
// runs as the README writes it, with `go run ./cmd/portcullis` standing
// for the binary built once and the placeholder apr_… for the request's
// ID.
func TestReadmeFirstMinute(t *testing.T) {
	setup := readmeBlocks(t, "## Set up")
	try := readmeBlocks(t, "## Try it")
	if len(setup) != 2 || !strings.Contains(setup[0], " serve ") || setup[1] != "go test ./..." {
		t.Fatalf("the set-up commands are %q; want serve, then go test ./...", setup)
	}
	var claudeAdd, curl, approve string
	var audit []string
	for _, c := range try {
		switch {
		case strings.HasPrefix(c, "claude mcp add "):
			claudeAdd = c
		case strings.HasPrefix(c, "curl "):
			curl = c
		case strings.HasPrefix(c, "go run ./cmd/portcullis approve "):
			approve = c
		case strings.HasPrefix(c, "go run ./cmd/portcullis audit "):
			audit = append(audit, c)
		default:
			t.Fatalf("the test does not know the README's command %q", c)
		}
	}
	if claudeAdd == "" || curl == "" || approve == "" || len(audit) == 0 {
		t.Fatalf("the Try it commands %q lack one of claude mcp add, curl, approve, audit", try)
	}

	bin := buildPortcullis(t, t.TempDir())
	home := t.TempDir()
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"HOME=" + home}
	// The user's Go caches stay where they are (under their real home),
	// so the notes server's `go run` does not download every module again.
	for _, k := range []string{"GOMODCACHE", "GOCACHE"} {
		v, err := exec.Command("go", "env", k).Output()
		if err != nil {
			t.Fatal(err)
		}
		env = append(env, k+"="+strings.TrimSpace(string(v)))
	}
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "HOME" && k != "XDG_STATE_HOME" && k != "CLAUDE_CONFIG_DIR" && !strings.HasPrefix(k, "PORTCULLIS_") {
			env = append(env, kv)
		}
	}
	asWritten := func(c string) string {
		return strings.ReplaceAll(c, "go run ./cmd/portcullis", bin)
	}
	sh := func(c string) (string, error) {
		cmd := exec.Command("bash", "-c", asWritten(c))
		cmd.Dir, cmd.Env = repo, env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	// The gateway, as the set-up starts it.
	serve := exec.Command("bash", "-c", "exec "+asWritten(setup[0]))
	serve.Dir, serve.Env = repo, env
	var said lockedBuffer
	serve.Stderr = &said
	out, err := serve.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { terminate(serve, 10*time.Second) })
	base, err := awaitServingTee(out, &said)
	if err != nil {
		t.Fatalf("%s: %v\n%s", setup[0], err, said.String())
	}
	if base != "http://127.0.0.1:8470" {
		t.Fatalf("the gateway serves on %s; the README says http://127.0.0.1:8470", base)
	}
	state := filepath.Join(home, ".local", "state", "portcullis")
	if _, err := os.Stat(filepath.Join(state, "admin.token")); err != nil {
		t.Fatalf("the console's token is not where the README says: %v", err)
	}
	token, err := os.ReadFile(filepath.Join(repo, "examples", "gateway", "demo-agent.token"))
	if err != nil {
		t.Fatal(err)
	}

	// A write waits.
	got, err := sh(curl)
	if err != nil {
		t.Fatalf("%s: %v\n%s", curl, err, got)
	}
	var d struct {
		DecisionID  string `json:"decisionId"`
		Outcome     string `json:"outcome"`
		ChallengeID string `json:"challengeId"`
	}
	if err := json.Unmarshal([]byte(got), &d); err != nil || d.Outcome != "confirm" || !strings.HasPrefix(d.ChallengeID, "apr_") {
		t.Fatalf("the README's curl answered %s (%v); want a confirm with a challengeId", got, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(said.String(), "portcullis approve "+d.ChallengeID) {
		if time.Now().After(deadline) {
			t.Fatalf("the gateway's terminal does not say how to approve %s:\n%s", d.ChallengeID, said.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	// A person approves it; the waiting call is allowed.
	if got, err := sh(strings.ReplaceAll(approve, "apr_…", d.ChallengeID)); err != nil {
		t.Fatalf("%s: %v\n%s", approve, err, got)
	}
	req, err := http.NewRequest("GET", base+"/v1/decisions/"+d.DecisionID+"/wait?timeout=10s", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"outcome":"allow"`) {
		t.Fatalf("after the approval the wait answered %d %s; want allow", resp.StatusCode, body)
	}

	// The audit log has the decision and the answer, and verifies.
	for _, c := range audit {
		got, err := sh(c)
		if err != nil {
			t.Fatalf("%s: %v\n%s", c, err, got)
		}
		if strings.Contains(c, " tail") && (!strings.Contains(got, "write_note") || !strings.Contains(got, "approv")) {
			t.Errorf("%s shows no write_note decision and approval:\n%s", c, got)
		}
	}

	// The denied tool is hidden. The notes server is built by `go run`
	// too: its tools appear once it is connected.
	cs := connectHTTP(t, base, strings.TrimSpace(string(token)))
	var names []string
	for deadline := time.Now().Add(2 * time.Minute); len(names) == 0 && time.Now().Before(deadline); {
		tools, err := cs.ListTools(t.Context(), &mcp.ListToolsParams{})
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range tools.Tools {
			names = append(names, tl.Name)
		}
		if len(names) == 0 {
			time.Sleep(200 * time.Millisecond)
		}
	}
	if strings.Join(names, ",") != "list_notes,read_note,write_note" {
		t.Errorf("tools/list shows %v; the README says list_notes, read_note and write_note", names)
	}

	// Claude Code's connection, as the README adds it.
	t.Run("claude mcp add", func(t *testing.T) {
		dir := e2eDir(t)
		cmd := exec.Command("bash", "-c", claudeAdd)
		cmd.Dir = repo
		cmd.Env = append(env, "PATH="+filepath.Join(dir, "node_modules", ".bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", claudeAdd, err, out)
		}
		cfg, err := os.ReadFile(filepath.Join(home, ".claude.json"))
		if err != nil {
			t.Fatal(err)
		}
		var c struct {
			Projects map[string]struct {
				MCPServers map[string]struct {
					Type    string            `json:"type"`
					URL     string            `json:"url"`
					Headers map[string]string `json:"headers"`
				} `json:"mcpServers"`
			} `json:"projects"`
		}
		if err := json.Unmarshal(cfg, &c); err != nil {
			t.Fatal(err)
		}
		key := repo
		if real, err := filepath.EvalSymlinks(repo); err == nil {
			if _, ok := c.Projects[real]; ok {
				key = real
			}
		}
		s, ok := c.Projects[key].MCPServers["notes"]
		if !ok || s.Type != "http" || s.URL != base+"/mcp" || s.Headers["Authorization"] != "Bearer "+strings.TrimSpace(string(token)) {
			t.Errorf("Claude Code's configuration after the README's line:\n%s", cfg)
		}
	})
}

// awaitServingTee is awaitServing that also copies serve's standard output
// to w.
func awaitServingTee(out io.Reader, w io.Writer) (string, error) {
	pr, pw := io.Pipe()
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			w.Write([]byte(sc.Text() + "\n"))
			pw.Write([]byte(sc.Text() + "\n"))
		}
		pw.Close()
	}()
	return awaitServing(pr)
}
