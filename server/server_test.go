package server_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/policy"
	"github.com/portcullis/portcullis/server"
	"github.com/portcullis/portcullis/sqlite"
)

const testPolicy = `version: 1
tools:
  read_note:  {endpoint: READ}
  write_note: {endpoint: UPDATE}
approvals:
  wait: 60s
`

// notesServer is a real MCP server over Streamable HTTP with the two
// tools of testPolicy.
func notesServer(t *testing.T) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "1"}, nil)
	type args struct {
		Name string `json:"name"`
	}
	for _, name := range []string{"read_note", "write_note"} {
		mcp.AddTool(s, &mcp.Tool{Name: name}, func(ctx context.Context, req *mcp.CallToolRequest, a args) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + " " + a.Name}}}, nil, nil
		})
	}
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(srv.Close)
	return srv.URL
}

// options are a Server's options as the binary gives them: a SQLite store
// in the state directory and a gate built from the policy file.
func options(t *testing.T, cfg *server.Config) server.Options {
	return server.Options{
		Config: cfg,
		OpenStore: func(ctx context.Context, state, _ string) (portcullis.Store, string, error) {
			if err := os.MkdirAll(state, 0o700); err != nil {
				return nil, "", err
			}
			st, err := sqlite.Open(ctx, filepath.Join(state, "portcullis.db"), sqlite.Options{})
			return st, state, err
		},
		LoadGate: func(path string, opts ...gate.Option) (*gate.Gate, error) {
			pol, _, err := policy.Load(path)
			if err != nil {
				return nil, err
			}
			return gate.New(pol, opts...)
		},
	}
}

func loadConfig(t *testing.T, rest string) *server.Config {
	t.Helper()
	c, err := server.LoadConfig(writeConfig(t, "state: state\nupstreams: [{name: notes, url: '"+notesServer(t)+"/'}]\n"+rest))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func TestServerServesAndCloses(t *testing.T) {
	cfg := loadConfig(t, "")
	srv := server.New(options(t, cfg))
	if err := srv.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if got := srv.CreatedTokens(); len(got) != 1 || !strings.HasPrefix(got[0], "bot: ") {
		t.Fatalf("CreatedTokens() = %q; want the token file of bot, made at this start", got)
	}
	var banner strings.Builder
	srv.WriteBanner(&banner)
	dir := srv.StateDir()
	if want := "portcullis: created the token of agent " + srv.CreatedTokens()[0] + " (0600); clients send it as Authorization: Bearer <token>\n" +
		"portcullis: serving MCP on " + srv.URL() + "/mcp (1 upstream, 1 agent); state in " + dir + "\n" +
		"portcullis: console on " + srv.URL() + "/ (log in with the token in " + filepath.Join(dir, "admin.token") + ")\n" +
		"portcullis: metrics on " + srv.URL() + "/metrics (bearer token in " + filepath.Join(dir, "metrics.token") + ")\n"; banner.String() != want {
		t.Errorf("WriteBanner wrote\n%s\nwant\n%s", banner.String(), want)
	}
	tok, err := os.ReadFile(cfg.Agents[0].TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	tr := &mcp.StreamableClientTransport{Endpoint: srv.URL() + "/mcp", HTTPClient: &http.Client{Transport: bearer{strings.TrimSpace(string(tok))}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "read_note", Arguments: map[string]any{"name": "a"}})
	if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "read_note a" {
		t.Fatalf("read_note through the server = %+v, %v; want the upstream's answer", res, err)
	}
	cs.Close()
	addr := strings.TrimPrefix(srv.URL(), "http://")
	if err := srv.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Fatalf("after Close, %s still accepts connections", addr)
	}
	if err := srv.Close(); err != nil {
		t.Fatalf("a second Close() = %v; want nil", err)
	}
	// The store was closed: another process can open the file and finds
	// the decision's audit row.
	st, err := sqlite.Open(context.Background(), filepath.Join(cfg.State, "portcullis.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	recs, err := st.QueryAudit(context.Background(), portcullis.AuditQuery{Tool: "read_note"})
	if err != nil || len(recs) == 0 {
		t.Fatalf("audit rows of read_note = %d, %v; want the decision's row", len(recs), err)
	}
}

// freePort is a loopback address nothing listens on.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestServerFailedOpenReleasesEverything: an Open that fails after the
// listener and the gateway were started ends them again, so the address
// is free at once for the next try.
func TestServerFailedOpenReleasesEverything(t *testing.T) {
	cfg := loadConfig(t, "audit:\n  witnesses: [{stderr: true}]\n")
	addr := freePort(t)
	// The audit key cannot be read (a directory is in its place): the
	// witnesses, started last, fail.
	if err := os.MkdirAll(filepath.Join(cfg.State, "audit.key"), 0o700); err != nil {
		t.Fatal(err)
	}
	opts := options(t, cfg)
	opts.Listen = addr
	srv := server.New(opts)
	err := srv.Open(context.Background())
	if err == nil || !strings.Contains(err.Error(), "audit key") {
		t.Fatalf("Open with an unreadable audit key = %v; want an error naming the audit key", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("after a failed Open, %s is still taken: %v", addr, err)
	}
	ln.Close()
	// And the store was closed: a new Server opens it.
	if err := os.Remove(filepath.Join(cfg.State, "audit.key")); err != nil {
		t.Fatal(err)
	}
	srv = server.New(opts)
	if err := srv.Open(context.Background()); err != nil {
		t.Fatalf("Open after the fault was fixed = %v", err)
	}
	srv.Close()
}

func TestServerOpenErrors(t *testing.T) {
	t.Run("listen form", func(t *testing.T) {
		opts := options(t, loadConfig(t, ""))
		opts.Listen = "8470"
		err := server.New(opts).Open(context.Background())
		var ce *server.ConfigError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "the form is HOST:PORT") {
			t.Errorf("Open with --listen 8470 = %v; want a ConfigError saying the form is HOST:PORT", err)
		}
	})
	t.Run("address in use", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		opts := options(t, loadConfig(t, ""))
		opts.Listen = ln.Addr().String()
		err = server.New(opts).Open(context.Background())
		if err == nil || !strings.Contains(err.Error(), "a `portcullis serve` may already run there") || !strings.Contains(err.Error(), "--listen HOST:PORT") {
			t.Errorf("Open on a taken address = %v; want it to say a serve may already run there and to pass another --listen", err)
		}
	})
	t.Run("agent token", func(t *testing.T) {
		cfg := loadConfig(t, "")
		cfg.Agents[0].TokenFile = ""
		cfg.Agents[0].TokenEnv = "PORTCULLIS_TEST_NO_SUCH_TOKEN"
		err := server.New(options(t, cfg)).Open(context.Background())
		var ce *server.ConfigError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "$PORTCULLIS_TEST_NO_SUCH_TOKEN is empty") {
			t.Errorf("Open with an empty token variable = %v; want a ConfigError naming it", err)
		}
	})
}
