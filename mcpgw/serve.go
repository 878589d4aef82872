package mcpgw

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServeStdio serves one client over in and out (the wrapper's stdin and
// stdout) until the client disconnects or ctx ends. Only MCP messages are
// written to out.
func (g *Gateway) ServeStdio(ctx context.Context, in io.ReadCloser, out io.WriteCloser) error {
	ss, err := g.server.Connect(ctx, &mcp.IOTransport{Reader: in, Writer: out}, nil)
	if err != nil {
		return fmt.Errorf("mcpgw: serve stdio: %w", err)
	}
	g.sessionOf(ss, nil)
	done := make(chan error, 1)
	go func() { done <- ss.Wait() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		ss.Close()
		<-done
		return ctx.Err()
	}
}

// HTTPOptions configures the Streamable HTTP endpoint.
type HTTPOptions struct {
	// AgentOf maps a bearer token to the agent it identifies. A request
	// without a known token is refused (401). Required.
	AgentOf func(token string) (agent string, ok bool)
	// SessionTimeout closes sessions idle for this long (default 30
	// minutes).
	SessionTimeout time.Duration
	// AllowRemoteHosts turns off the SDK's DNS-rebinding protection, which
	// refuses requests whose Host is not localhost; set it when the
	// gateway listens on a non-loopback address behind a proxy.
	AllowRemoteHosts bool
}

// Handler serves the gateway over Streamable HTTP. Every request must carry
// a bearer token that names an agent; a session stays bound to the token
// that opened it, so one agent cannot use another's session.
func (g *Gateway) Handler(o HTTPOptions) (http.Handler, error) {
	if o.AgentOf == nil {
		return nil, fmt.Errorf("mcpgw: the HTTP endpoint needs agent tokens")
	}
	if o.SessionTimeout <= 0 {
		o.SessionTimeout = 30 * time.Minute
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return g.server }, &mcp.StreamableHTTPOptions{
		Logger:                     g.log,
		SessionTimeout:             o.SessionTimeout,
		DisableLocalhostProtection: o.AllowRemoteHosts,
	})
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		agent, ok := o.AgentOf(token)
		if !ok || agent == "" {
			return nil, auth.ErrInvalidToken
		}
		// UserID binds the session to the agent: the SDK refuses a
		// session's requests made with another agent's token.
		return &auth.TokenInfo{UserID: agent, Expiration: time.Now().Add(24 * time.Hour)}, nil
	}
	return auth.RequireBearerToken(verify, nil)(h), nil
}
