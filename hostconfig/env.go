package hostconfig

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/syntax"
)

// Client names an agent whose configuration this package knows.
type Client string

// The clients: five run Portcullis as a hook (opencode through a plugin),
// Claude Desktop runs MCP servers that Portcullis wraps, and Cursor both
// (its MCP servers behind the wrapper, its shell commands, MCP calls and
// file reads through its hooks.json).
const (
	ClaudeCode    Client = "claude-code"
	Codex         Client = "codex"
	Gemini        Client = "gemini"
	ClaudeDesktop Client = "claude-desktop"
	Cursor        Client = "cursor"
	Copilot       Client = "copilot"
	OpenCode      Client = "opencode"
)

// Clients lists every client, in the order doctor reports them.
var Clients = []Client{ClaudeCode, Codex, Gemini, ClaudeDesktop, Cursor, Copilot, OpenCode}

// Hooked reports whether the client runs Portcullis as a tool hook only
// (init installs its hook; the others' MCP servers are wrapped).
func (c Client) Hooked() bool {
	return c == ClaudeCode || c == Codex || c == Gemini || c == Copilot || c == OpenCode
}

// HookInstallable reports whether Portcullis can be installed as the
// client's tool hook (hook install): the hooked clients, and Cursor.
func (c Client) HookInstallable() bool { return c.Hooked() || c == Cursor }

// ClientNames are the names of Clients, in order.
func ClientNames() []string {
	out := make([]string, 0, len(Clients))
	for _, c := range Clients {
		out = append(out, string(c))
	}
	return out
}

// Protection says in a line what `portcullis init` puts in front of the
// client.
func (c Client) Protection() string {
	return map[Client]string{
		ClaudeCode:    "Claude Code: a PreToolUse hook for every tool",
		Codex:         "Codex CLI: PreToolUse and PermissionRequest hooks, trusted in config.toml",
		Gemini:        "Gemini CLI: a BeforeTool hook for every tool",
		ClaudeDesktop: "Claude Desktop: every MCP server behind portcullis mcp",
		Cursor:        "Cursor: blocking hooks for its terminal, MCP calls, file reads and writes",
		Copilot:       "GitHub Copilot CLI: a preToolUse hook for every tool",
		OpenCode:      "opencode: a plugin that blocks every tool call Portcullis does not allow",
	}[c]
}

// WrappedClientNamed returns the client of that name whose MCP servers
// init wraps in `portcullis mcp`: not a Hooked one, which sees MCP tools
// through its hook.
func WrappedClientNamed(name string) (Client, bool) {
	c, ok := ClientNamed(name)
	return c, ok && !c.Hooked()
}

// ClientNamed returns the client of that name.
func ClientNamed(name string) (Client, bool) {
	for _, c := range Clients {
		if string(c) == name {
			return c, true
		}
	}
	return "", false
}

// Env is where the clients' files and the places a binary must not be
// installed from are, for one user. FromOS reads it from the process;
// tests build one around a temporary home.
type Env struct {
	Home      string // the user's home directory
	ConfigDir string // the user's configuration directory (os.UserConfigDir)
	CodexHome string // Codex's home: $CODEX_HOME, else Home/.codex
	// CopilotHome is GitHub Copilot CLI's home: $COPILOT_HOME, else
	// Home/.copilot (when empty).
	CopilotHome string
	// OpenCodeDir is opencode's configuration directory:
	// $XDG_CONFIG_HOME/opencode, else (also when empty) Home/.config/opencode.
	OpenCodeDir string
	// GeminiTrustedFolders is Gemini CLI's list of trusted folders:
	// $GEMINI_CLI_TRUSTED_FOLDERS_PATH, else (also when empty)
	// Home/.gemini/trustedFolders.json.
	GeminiTrustedFolders string
	GoCache              string   // the Go build cache: $GOCACHE, else the user cache directory's go-build
	TempDirs             []string // temporary directories: a command there does not last
}

// FromOS is the Env of the running process's user.
func FromOS() (Env, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return Env{}, fmt.Errorf("find the home directory: %w", err)
	}
	e := Env{Home: home}
	if e.ConfigDir, err = os.UserConfigDir(); err != nil {
		e.ConfigDir = filepath.Join(home, ".config")
	}
	e.CodexHome = filepath.Join(home, ".codex")
	if h := os.Getenv("CODEX_HOME"); h != "" {
		if e.CodexHome, err = filepath.Abs(h); err != nil {
			return Env{}, err
		}
	}
	if h := os.Getenv("COPILOT_HOME"); h != "" {
		if e.CopilotHome, err = filepath.Abs(h); err != nil {
			return Env{}, err
		}
	}
	if x := os.Getenv("XDG_CONFIG_HOME"); filepath.IsAbs(x) {
		e.OpenCodeDir = filepath.Join(x, "opencode")
	}
	if p := os.Getenv("GEMINI_CLI_TRUSTED_FOLDERS_PATH"); p != "" {
		if e.GeminiTrustedFolders, err = filepath.Abs(p); err != nil {
			return Env{}, err
		}
	}
	e.GoCache = os.Getenv("GOCACHE")
	if e.GoCache == "" || e.GoCache == "off" {
		if cache, err := os.UserCacheDir(); err == nil {
			e.GoCache = filepath.Join(cache, "go-build")
		}
	}
	e.TempDirs = []string{os.TempDir()}
	if d := os.Getenv("GOTMPDIR"); d != "" {
		e.TempDirs = append(e.TempDirs, d)
	}
	return e, nil
}

// copilotHome is Copilot CLI's home directory.
func (e Env) copilotHome() string {
	if e.CopilotHome != "" {
		return e.CopilotHome
	}
	return filepath.Join(e.Home, ".copilot")
}

// PolicyDir is where `portcullis init` keeps the user's policy.
func (e Env) PolicyDir() string { return filepath.Join(e.ConfigDir, "portcullis") }

// goRunDir matches the directories `go run` and `go test` build into
// (…/go-build123456/b001/exe/).
var goRunDir = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^go-build[0-9]+$`) })

// ErrTransient is the error of CheckBinary for a binary that will not
// last: in the Go build cache, where `go run` left it, or in a temporary
// directory.
var ErrTransient = errors.New("the binary will not last")

// InstallAdvice says how to get a binary that lasts.
const InstallAdvice = "install the binary (from a clone: go install ./cmd/portcullis, which puts it in $(go env GOPATH)/bin) and run this command again with the installed portcullis"

// CheckBinary refuses a binary that a client must not be told to run: one
// that does not exist, or one that will not last — in the Go build cache
// or a `go run` directory (the next cache trim deletes it, and every tool
// call then fails), or in a temporary directory.
func (e Env) CheckBinary(exe string) error {
	if !filepath.IsAbs(exe) {
		return fmt.Errorf("%s: not an absolute path", exe)
	}
	st, err := os.Stat(exe)
	if err != nil {
		return fmt.Errorf("%s: %w", exe, err)
	}
	if st.IsDir() || st.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s: not an executable file", exe)
	}
	for _, part := range strings.Split(filepath.ToSlash(exe), "/") {
		if goRunDir().MatchString(part) {
			return fmt.Errorf("%s was built by `go run` or `go test` into a directory Go deletes (%w): %s", exe, ErrTransient, InstallAdvice)
		}
	}
	if within(exe, e.GoCache) {
		return fmt.Errorf("%s is in the Go build cache %s (%w: the next cache trim deletes it): %s", exe, e.GoCache, ErrTransient, InstallAdvice)
	}
	for _, t := range e.TempDirs {
		if within(exe, t) {
			return fmt.Errorf("%s is in the temporary directory %s (%w): %s", exe, t, ErrTransient, InstallAdvice)
		}
	}
	return nil
}

// within reports whether path is dir or below it (both made absolute and,
// where they exist, free of symbolic links).
func within(path, dir string) bool {
	if dir == "" {
		return false
	}
	path, dir = realPath(path), realPath(dir)
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

func realPath(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// ShellJoin quotes words for the POSIX shell the clients run hook commands
// in.
func ShellJoin(words []string) (string, error) {
	out := make([]string, len(words))
	for i, w := range words {
		q, err := syntax.Quote(w, syntax.LangPOSIX)
		if err != nil {
			return "", fmt.Errorf("quote %q: %w", w, err)
		}
		out[i] = q
	}
	return strings.Join(out, " "), nil
}

// splitCommand splits a hook command as the shell would into its words,
// or reports that it is more than one simple command.
func splitCommand(command string) ([]string, error) {
	f, err := syntax.NewParser().Parse(strings.NewReader(command), "")
	if err != nil {
		return nil, err
	}
	if len(f.Stmts) != 1 {
		return nil, errors.New("not one command")
	}
	call, ok := f.Stmts[0].Cmd.(*syntax.CallExpr)
	if !ok || len(f.Stmts[0].Redirs) > 0 || len(call.Assigns) > 0 {
		return nil, errors.New("not a simple command")
	}
	var words []string
	for _, w := range call.Args {
		lit, ok := literal(w)
		if !ok {
			return nil, errors.New("a word with expansions")
		}
		words = append(words, lit)
	}
	return words, nil
}

// literal is the value of a word made only of literal and quoted text.
func literal(w *syntax.Word) (string, bool) {
	var b strings.Builder
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			b.WriteString(strings.ReplaceAll(p.Value, `\`, ""))
		case *syntax.SglQuoted:
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				lit, ok := q.(*syntax.Lit)
				if !ok {
					return "", false
				}
				b.WriteString(lit.Value)
			}
		default:
			return "", false
		}
	}
	return b.String(), true
}
