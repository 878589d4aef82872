package mcpgw

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis/portcullis/internal/guard"
)

// HTTPOptions configures the Streamable HTTP endpoint.
type HTTPOptions struct {
	// AgentOf maps a bearer token to the agent it identifies. A request
	// without a known token is refused (401). Required.
	AgentOf func(token string) (agent string, ok bool)
	// SessionTimeout closes sessions idle for this long (default 30
	// minutes).
	SessionTimeout time.Duration
	// AllowRemoteHosts turns off the Host check — the SDK's DNS-rebinding
	// protection, which refuses requests whose Host is not localhost, or
	// with a Guard the guard's allow-list — for a gateway that listens on
	// a non-loopback address with no public name of its own.
	AllowRemoteHosts bool
	// Guard is the server's shared guard: its Host allow-list (the
	// defence against DNS rebinding), its Origin rule, and its count of
	// wrong tokens, the same as the API's and the console's. Nil: a guard
	// of the endpoint's own checks the Origin and counts wrong tokens, and
	// the SDK checks the Host.
	Guard *guard.Guard
}

// Handler serves the gateway over Streamable HTTP. Every request must carry
// a bearer token that names an agent; a session stays bound to the token
// that opened it, so one agent cannot use another's session.
//
// Before the SDK sees a request, the guard checks its Host and Origin: a
// browser's request from a page that is not the gateway's own origin is
// refused (403), as the MCP specification asks; a request without an
// Origin (a program, not a browser) is not. A wrong token is counted
// against the client and, past its allowance, answered 429; a right one is
// always served. Every refusal closes the connection, so a client that is
// refused cannot hold it by trickling a body.
//
// A plain tools/call on a session the gateway serves, from the agent that
// opened it, is answered by the gateway itself after the same checks the
// SDK's handler makes (httpfast.go); every other request goes to the SDK's
// handler.
func (g *Gateway) Handler(o HTTPOptions) (http.Handler, error) {
	if o.AgentOf == nil {
		return nil, fmt.Errorf("mcpgw: the HTTP endpoint needs agent tokens")
	}
	if o.SessionTimeout <= 0 {
		o.SessionTimeout = 30 * time.Minute
	}
	gd, checkHost := o.Guard, !o.AllowRemoteHosts
	if gd == nil {
		var err error
		if gd, err = guard.New(guard.Options{}); err != nil {
			return nil, fmt.Errorf("mcpgw: %w", err)
		}
		checkHost = false // the SDK's check, as AllowRemoteHosts says
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return g.server }, &mcp.StreamableHTTPOptions{
		Logger:                     g.log,
		SessionTimeout:             o.SessionTimeout,
		DisableLocalhostProtection: o.AllowRemoteHosts || checkHost,
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
	inner := auth.RequireBearerToken(verify, nil)(h)
	fast := &httpFront{g: g, sdkHostCheck: !o.AllowRemoteHosts && !checkHost, fresh: o.SessionTimeout / 2}
	refuse := func(w http.ResponseWriter, r *http.Request, status int, kind, msg string) {
		g.log.Warn("mcpgw: request refused", "severity", "HIGH", "type", kind, "method", r.Method, "host", r.Host, "origin", r.Header.Get("Origin"), "remote", r.RemoteAddr)
		guard.CloseAfter(w)
		http.Error(w, msg, status)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if checkHost {
			if err := gd.Sites.CheckHost(r); err != nil {
				refuse(w, r, http.StatusForbidden, "HOST_NOT_ALLOWED", "Forbidden: "+err.Error())
				return
			}
		}
		if err := gd.Sites.CheckOrigin(r); err != nil && !errors.Is(err, guard.ErrNoOrigin) {
			refuse(w, r, http.StatusForbidden, "ORIGIN_NOT_ALLOWED", "Forbidden: "+err.Error())
			return
		}
		scheme, token, ok := twoFields(r.Header.Get("Authorization"))
		if !ok || !strings.EqualFold(scheme, "bearer") {
			guard.CloseAfter(w)
			w.Header().Set("WWW-Authenticate", `Bearer realm="portcullis"`)
			http.Error(w, "no bearer token: send Authorization: Bearer TOKEN", http.StatusUnauthorized)
			return
		}
		agent, ok := o.AgentOf(token)
		if !ok || agent == "" {
			f := gd.Failures.Fail("mcp", guard.ClientKey(r.RemoteAddr))
			guard.CloseAfter(w)
			if f.Limited {
				if f.FirstLimited {
					g.log.Warn("mcpgw: too many wrong tokens; further ones from this client are counted, not logged, until it slows down", "severity", "HIGH", "type", "RATE_LIMITED", "client", f.Client, "remote", r.RemoteAddr)
				}
				w.Header().Set("Retry-After", guard.RetryAfterSeconds(f.RetryAfter))
				http.Error(w, "too many wrong tokens from this address: wait "+guard.RetryAfterSeconds(f.RetryAfter)+"s before trying another (a right token is always served)", http.StatusTooManyRequests)
				return
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="portcullis", error="invalid_token"`)
			refuse(w, r, http.StatusUnauthorized, "UNAUTHORIZED", "invalid token")
			return
		}
		if r.Method == http.MethodPost {
			g.mu.Lock()
			g.posts++
			g.mu.Unlock()
			defer func() {
				g.mu.Lock()
				g.posts--
				g.mu.Unlock()
			}()
		}
		handled, release := fast.serve(w, r, agent)
		if handled {
			return
		}
		if release != nil {
			// Deferred: a handler that panics (net/http recovers it) must
			// not keep the request's id held on its session for good.
			defer release()
		}
		inner.ServeHTTP(w, r)
		fast.noteSDK(r)
	}), nil
}

// twoFields is strings.Fields(s) when it holds exactly two fields,
// without allocating.
func twoFields(s string) (a, b string, ok bool) {
	s = strings.TrimSpace(s)
	i := strings.IndexFunc(s, unicode.IsSpace)
	if i < 0 {
		return "", "", false
	}
	a, b = s[:i], strings.TrimLeftFunc(s[i:], unicode.IsSpace)
	if strings.IndexFunc(b, unicode.IsSpace) >= 0 {
		return "", "", false
	}
	return a, b, true
}
