// Package client is a Go client of Portcullis's HTTP API (package httpapi,
// docs/openapi.json): agents decide calls, report outcomes and wait for a
// person's answer; people's tools list and answer approval requests,
// grants and blocks.
//
// It uses the standard library only, plus the root package's types. It
// must stay fail-closed for its callers: any error means the call was not
// allowed, and a Decision is allowed only when its outcome is allow.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/portcullis/portcullis"
)

// Client calls one Portcullis gateway with one token: an agent token for
// Decide, ReportOutcome and Wait; the human token for the people's calls.
// It is safe for concurrent use.
type Client struct {
	base  *url.URL
	token string
	hc    *http.Client
	actor string
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sets the HTTP client (default: one with no overall
// timeout, since Wait holds requests open; bound calls with their ctx).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithActor names the person behind the human token, for the gateway's
// audit log (the Portcullis-Actor header).
func WithActor(name string) Option { return func(c *Client) { c.actor = name } }

// New returns a client of the gateway at baseURL (http://127.0.0.1:8080,
// say) that sends token as its bearer token.
func New(baseURL, token string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil {
		return nil, fmt.Errorf("client: gateway URL %q: %w", baseURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("client: gateway URL %q: want http://host:port or https://host:port", baseURL)
	}
	if token == "" {
		return nil, errors.New("client: empty token")
	}
	c := &Client{base: u, token: token, hc: &http.Client{}}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// Error is an error answer of the gateway. It unwraps to a
// *portcullis.Error with the same code, so portcullis.ErrorCode works on
// it: NOT_FOUND, CONFLICT, INVALID_REQUEST, VERIFICATION_FAILED,
// RATE_LIMITED, and the HTTP layer's UNAUTHORIZED, FORBIDDEN,
// PAYLOAD_TOO_LARGE, INTERNAL.
type Error struct {
	Status  int             // the HTTP status
	Code    portcullis.Code // the error's code
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("gateway: %s (%d %s)", e.Message, e.Status, e.Code)
}

// Unwrap returns the error as a *portcullis.Error.
func (e *Error) Unwrap() error { return &portcullis.Error{Code: e.Code, Message: e.Message} }

// UnreachableError says that no gateway answers at the client's URL: the
// connection could not be made (refused, no route, no such host), so no
// request reached a gateway.
type UnreachableError struct {
	Gateway string // the gateway's scheme and host: http://127.0.0.1:8080
	Err     error  // why the connection failed
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("client: no gateway answers at %s: %v", e.Gateway, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// maxResponse bounds an answer the client reads.
const maxResponse = 64 << 20

// do sends a request and decodes a JSON answer into out (when not nil).
// path is escaped (url.PathEscape each segment). Statuses in ok are
// successes; any other is an *Error.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, body, out any, ok ...int) (int, error) {
	u := *c.base
	u.RawPath = c.base.EscapedPath() + path
	p, err := url.PathUnescape(u.RawPath)
	if err != nil {
		return 0, fmt.Errorf("client: path %s: %w", u.RawPath, err)
	}
	u.Path = p
	if len(query) > 0 {
		u.RawQuery = query.Encode()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, fmt.Errorf("client: encode request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return 0, fmt.Errorf("client: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.actor != "" {
		req.Header.Set("Portcullis-Actor", c.actor)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		var oe *net.OpError
		if errors.As(err, &oe) && oe.Op == "dial" && ctx.Err() == nil {
			return 0, &UnreachableError{Gateway: c.base.Scheme + "://" + c.base.Host, Err: oe.Err}
		}
		return 0, fmt.Errorf("client: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("client: %s %s: read answer: %w", method, path, err)
	}
	if len(data) > maxResponse {
		return resp.StatusCode, fmt.Errorf("client: %s %s: the answer is larger than %d bytes", method, path, maxResponse)
	}
	good := false
	for _, s := range ok {
		good = good || resp.StatusCode == s
	}
	if !good {
		return resp.StatusCode, answerError(resp.StatusCode, data)
	}
	if out != nil && len(data) > 0 {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if err := dec.Decode(out); err != nil {
			return resp.StatusCode, fmt.Errorf("client: %s %s: decode answer: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

func answerError(status int, data []byte) error {
	var eb struct {
		Error struct {
			Code    portcullis.Code `json:"code"`
			Message string          `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(data, &eb); err != nil || eb.Error.Code == "" {
		msg := strings.TrimSpace(string(data))
		if len(msg) > 200 {
			msg = msg[:200] + "…"
		}
		if msg == "" {
			msg = http.StatusText(status)
		}
		return &Error{Status: status, Code: "HTTP_" + portcullis.Code(strconv.Itoa(status)), Message: msg}
	}
	return &Error{Status: status, Code: eb.Error.Code, Message: eb.Error.Message}
}

// Decide asks the gateway to decide a call (POST /v1/decide). The agent is
// the one the token names, whatever c.Agent says. Run the call only when
// the error is nil and the outcome is allow; on confirm, Wait for the
// person's answer.
func (c *Client) Decide(ctx context.Context, call portcullis.Call) (portcullis.Decision, error) {
	var d portcullis.Decision
	_, err := c.do(ctx, http.MethodPost, "/v1/decide", nil, call, &d, http.StatusOK)
	if err != nil {
		return portcullis.Decision{}, err
	}
	return d, nil
}

// ReportOutcome reports how the latest step of an autonomous run ended
// (POST /v1/outcomes); a failure pauses the run at its next step.
func (c *Client) ReportOutcome(ctx context.Context, runID string, o portcullis.StepOutcome) error {
	body := map[string]any{"runId": runID, "outcome": o}
	_, err := c.do(ctx, http.MethodPost, "/v1/outcomes", nil, body, nil, http.StatusNoContent)
	return err
}

// Poll waits at most timeout (the gateway bounds it to a minute) for a
// person to answer the approval request behind a confirm decision (GET
// /v1/decisions/{id}/wait). done is true with the final Decision: the call
// decided again after an approval (normally allow), or a deny with the
// person's reason, or a deny because the request expired. done is false
// while the request is pending.
func (c *Client) Poll(ctx context.Context, decisionID string, timeout time.Duration) (d portcullis.Decision, done bool, err error) {
	q := url.Values{"timeout": {strconv.FormatInt(int64(timeout/time.Second), 10)}}
	var raw json.RawMessage
	status, err := c.do(ctx, http.MethodGet, "/v1/decisions/"+url.PathEscape(decisionID)+"/wait", q, nil, &raw, http.StatusOK, http.StatusAccepted)
	if err != nil {
		return portcullis.Decision{}, false, err
	}
	if status == http.StatusAccepted {
		return portcullis.Decision{}, false, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&d); err != nil {
		return portcullis.Decision{}, false, fmt.Errorf("client: decode decision: %w", err)
	}
	return d, true, nil
}

// Wait polls until a person answers the approval request behind a confirm
// decision, the request expires, or ctx ends, and returns the final
// Decision (see Poll).
func (c *Client) Wait(ctx context.Context, decisionID string) (portcullis.Decision, error) {
	for {
		d, done, err := c.Poll(ctx, decisionID, 30*time.Second)
		if err != nil || done {
			return d, err
		}
		if err := ctx.Err(); err != nil {
			return portcullis.Decision{}, err
		}
	}
}

// Approvals lists approval requests, newest first (GET /v1/approvals).
// The filter's zero fields do not filter.
func (c *Client) Approvals(ctx context.Context, f portcullis.ApprovalFilter) ([]portcullis.Approval, error) {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("status", string(f.Status))
	set("session", f.Session)
	set("agent", f.Agent)
	set("decision", f.DecisionID)
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	var out struct {
		Approvals []portcullis.Approval `json:"approvals"`
	}
	if _, err := c.do(ctx, http.MethodGet, "/v1/approvals", q, nil, &out, http.StatusOK); err != nil {
		return nil, err
	}
	return out.Approvals, nil
}

// Approval returns one approval request (GET /v1/approvals/{id}).
func (c *Client) Approval(ctx context.Context, id string) (portcullis.Approval, error) {
	var a portcullis.Approval
	_, err := c.do(ctx, http.MethodGet, "/v1/approvals/"+url.PathEscape(id), nil, nil, &a, http.StatusOK)
	return a, err
}

// Approve approves a pending request, once or for the session
// (CONFIRM_SESSION calls only). CONFLICT when it was answered first or
// expired.
func (c *Client) Approve(ctx context.Context, id string, forSession bool) (portcullis.Approval, error) {
	var a portcullis.Approval
	_, err := c.do(ctx, http.MethodPost, "/v1/approvals/"+url.PathEscape(id)+"/approve", nil, map[string]bool{"session": forSession}, &a, http.StatusOK)
	return a, err
}

// Deny denies a pending request; the reason is shown to the agent.
func (c *Client) Deny(ctx context.Context, id, reason string) (portcullis.Approval, error) {
	var a portcullis.Approval
	_, err := c.do(ctx, http.MethodPost, "/v1/approvals/"+url.PathEscape(id)+"/deny", nil, map[string]string{"reason": reason}, &a, http.StatusOK)
	return a, err
}

// Grants lists the live grants, of one session when session is not empty.
func (c *Client) Grants(ctx context.Context, session string) ([]portcullis.Grant, error) {
	q := url.Values{}
	if session != "" {
		q.Set("session", session)
	}
	var out struct {
		Grants []portcullis.Grant `json:"grants"`
	}
	if _, err := c.do(ctx, http.MethodGet, "/v1/grants", q, nil, &out, http.StatusOK); err != nil {
		return nil, err
	}
	return out.Grants, nil
}

// RevokeGrant revokes a grant; NOT_FOUND when there is none.
func (c *Client) RevokeGrant(ctx context.Context, id string) error {
	_, err := c.do(ctx, http.MethodDelete, "/v1/grants/"+url.PathEscape(id), nil, nil, nil, http.StatusNoContent)
	return err
}

// Blocks lists the agents stopped in the danger zone.
func (c *Client) Blocks(ctx context.Context) ([]portcullis.Block, error) {
	var out struct {
		Blocks []portcullis.Block `json:"blocks"`
	}
	if _, err := c.do(ctx, http.MethodGet, "/v1/blocks", nil, nil, &out, http.StatusOK); err != nil {
		return nil, err
	}
	return out.Blocks, nil
}

// Unblock clears an agent's block with the code of its challenge;
// VERIFICATION_FAILED for a wrong or expired code.
func (c *Client) Unblock(ctx context.Context, agent, challengeID, code string) error {
	body := map[string]string{"challengeId": challengeID, "code": code}
	_, err := c.do(ctx, http.MethodPost, "/v1/blocks/"+url.PathEscape(agent)+"/unblock", nil, body, nil, http.StatusNoContent)
	return err
}
