// Package hook adapts the tool hooks of AI coding hosts to Portcullis's
// gate: Claude Code's PreToolUse and PermissionRequest, Codex CLI's
// PreToolUse and PermissionRequest (the same wire format), Gemini CLI's
// BeforeTool, Cursor's beforeShellExecution, beforeMCPExecution,
// beforeReadFile and preToolUse, GitHub Copilot CLI's preToolUse, and opencode's tool.execute.before (sent
// by the plugin `portcullis hook install opencode` writes). Each host's
// event is read from stdin, its tool call is mapped
// onto the policy's tools (a shell command onto the policy's shell tool, a
// file write onto its file-write tool, an MCP tool onto the tool policy),
// decided, and answered in the host's own format. Every host shares one
// code path; only the parsing of the event and the shape of the answer
// differ.
//
// A hook must never let a call through on an error. Malformed input, an
// internal error, a panic or a timeout is answered with a deny on stdout and
// exit status 2, which every supported host treats as "block" (exit status 1
// is "go ahead" for Claude Code and is never used). The hook writes only a
// decision's reason: never a verification code, which lives on human
// channels only.
//
// The package imports only the root package: it consumes a Decider (and,
// to hold a call until a person answers, a Holder), which *gate.Gate and
// the decision API's client satisfy.
package hook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/portcullis/portcullis"
)

// Decider decides one call; *gate.Gate satisfies it. The Decision is always
// safe to act on; an error means the call could not be decided and the hook
// denies it.
type Decider interface {
	Decide(ctx context.Context, c portcullis.Call) (portcullis.Decision, error)
}

// Waiter waits until a person answers an approval request (the ChallengeID
// of a decision with outcome confirm), it expires, or ctx ends; *gate.Gate
// with a store satisfies it.
type Waiter interface {
	AwaitApproval(ctx context.Context, id string) (portcullis.Approval, error)
}

// Holder holds a call whose decision d needs a person until one answers,
// the request expires or ctx ends, and returns the decision that then
// stands: the call decided again after an approval, a deny after a denial,
// d itself while nobody has answered. WaitThenDecide makes one of a gate;
// one over the decision API's GET /v1/decisions/{id}/wait holds a call
// through a running gateway.
type Holder interface {
	Hold(ctx context.Context, c portcullis.Call, d portcullis.Decision) (portcullis.Decision, error)
}

// WaitThenDecide holds a call in process: it waits for the person's answer
// to the approval request, then decides the call again, which uses the
// grant an approval recorded.
type WaitThenDecide struct {
	Waiter  Waiter
	Decider Decider
}

// Hold implements Holder.
func (w WaitThenDecide) Hold(ctx context.Context, c portcullis.Call, d portcullis.Decision) (portcullis.Decision, error) {
	a, err := w.Waiter.AwaitApproval(ctx, d.ChallengeID)
	switch {
	case err != nil && errors.Is(err, context.DeadlineExceeded):
		return d, nil // nobody answered in time
	case err != nil:
		return d, err
	}
	switch a.Status {
	case portcullis.ApprovalApproved:
		return w.Decider.Decide(ctx, c)
	case portcullis.ApprovalDenied:
		d.Outcome, d.PermissionLevel, d.Code = portcullis.OutcomeDeny, portcullis.Deny, portcullis.CodeConfirmationRequired
		d.WhatWouldAuthorize = "a person approving the call; ask again only if the reason allows it"
		d.Reason = "A person denied " + quoteTool(c.Tool) + " (approval " + d.ChallengeID + ")"
		if a.DenyReason != "" {
			d.Reason += ": " + a.DenyReason
		}
		return d, nil
	case portcullis.ApprovalExpired:
		d.Outcome, d.PermissionLevel = portcullis.OutcomeDeny, portcullis.Deny
		d.WhatWouldAuthorize = "a person approving the call: try it again to ask again"
		d.Reason = "Nobody answered approval " + d.ChallengeID + " for " + quoteTool(c.Tool) + " before it expired"
		return d, nil
	}
	return d, nil
}

// MCPNames says which policy tool name an MCP tool call
// (`mcp__<server>__<tool>`) is decided under, when the policy has no entry
// for the full name.
type MCPNames string

// The MCP naming choices.
const (
	MCPToolName MCPNames = "tool" // <tool>, as the MCP gateway names it (default)
	MCPFullName MCPNames = "full" // mcp__<server>__<tool>
)

// Defaults of Options.
const (
	DefaultTimeout = 20 * time.Second
	DefaultMaxWait = 60 * time.Second
	// MaxInputBytes bounds one hook event on stdin (a Write of a large file
	// carries its whole content).
	MaxInputBytes = 32 << 20
)

// Options configure a Handler.
type Options struct {
	// Decider decides the calls. Required.
	Decider Decider
	// Holder, with Hold, holds a call that needs a person until one
	// answers out of band. Nil: such a call is answered the host's way
	// (ask, or deny where the host cannot ask).
	Holder Holder
	// Policy maps host tools onto the policy's tools and gives
	// approvals.wait; nil decides every call under the host's tool name.
	Policy *portcullis.Policy
	// Agent is the acting agent's identity (default: the host's name).
	Agent string
	// Hold holds a call that needs a person in Portcullis's own approval
	// flow (up to approvals.wait, at most MaxWait) instead of asking in the
	// host. A Policy whose approvals are out of band holds them whatever
	// Hold says.
	Hold bool
	// MaxWait caps how long a call is held (default DefaultMaxWait); keep
	// it, plus two decisions, under the host's hook timeout.
	MaxWait time.Duration
	// Timeout bounds one decision (default DefaultTimeout).
	Timeout time.Duration
	// MCPNames names MCP tools the policy does not name in full.
	MCPNames MCPNames
	// DeferMCP names MCP servers that run behind a Portcullis MCP wrapper
	// (`portcullis mcp`), which decides their calls: a call of one of
	// their tools is answered allow without a decision here, when every
	// definition MCPServers returns for the server is wrapped. See
	// MCPServer.
	DeferMCP []string
	// MCPServers returns the host's definitions of the MCP server a tool
	// name calls server (ClaudeMCPServers for Claude Code). Required with
	// DeferMCP.
	MCPServers func(server string) ([]MCPServer, error)
	// Logger receives internal errors; nil discards.
	Logger *slog.Logger
}

// Handler answers host hook events. It is safe for concurrent use.
type Handler struct {
	opts     Options
	tools    *resolver
	deferMCP map[string]bool
	log      *slog.Logger
}

// New returns a handler.
func New(opts Options) (*Handler, error) {
	if opts.Decider == nil {
		return nil, errors.New("hook: no decider")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxWait <= 0 {
		opts.MaxWait = DefaultMaxWait
	}
	if opts.Policy != nil && opts.Policy.Approvals.OutOfBand {
		opts.Hold = true // the policy says people answer out of band
	}
	switch opts.MCPNames {
	case "":
		opts.MCPNames = MCPToolName
	case MCPToolName, MCPFullName:
	default:
		return nil, fmt.Errorf("hook: unknown MCP naming %q (want tool or full)", opts.MCPNames)
	}
	h := &Handler{opts: opts, tools: newResolver(opts.Policy, opts.MCPNames), deferMCP: map[string]bool{}, log: opts.Logger}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	for _, s := range opts.DeferMCP {
		if err := CheckMCPServerName(s); err != nil {
			return nil, fmt.Errorf("hook: %w", err)
		}
		h.deferMCP[s] = true
	}
	if len(h.deferMCP) > 0 && opts.MCPServers == nil {
		return nil, errors.New("hook: MCP servers to defer, but no way to read the host's MCP servers")
	}
	return h, nil
}

// ExitBlock is the exit status of a failed hook: a deny on stdout, the
// reason on stderr. Every supported host blocks the call on it.
const ExitBlock = 2

// Run reads one event of host from stdin, decides it, writes the host's
// answer on stdout and returns the exit status: 0 when the call was
// decided (whatever the outcome), ExitBlock when it could not be (the
// answer is then a deny and the reason is also on stderr). Run never
// returns without answering: a decision that outlives its deadline is
// answered with a deny.
func (h *Handler) Run(ctx context.Context, host Host, stdin io.Reader, stdout, stderr io.Writer) int {
	deadline := 2*h.opts.Timeout + time.Second
	if h.opts.Hold {
		deadline += h.opts.MaxWait
	}
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	done := make(chan answer, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				h.log.Error("hook: panic", "host", host.Name(), "panic", r)
				done <- failure(host, nil, fmt.Sprintf("internal error: %v", r))
			}
		}()
		done <- h.handle(ctx, host, stdin)
	}()
	var a answer
	select {
	case a = <-done:
	case <-ctx.Done():
		a = failure(host, nil, "the decision did not finish in time")
	}
	if a.code != 0 {
		fmt.Fprintln(stderr, a.reason)
	}
	if _, err := stdout.Write(a.out); err != nil {
		h.log.Error("hook: write answer", "err", err)
		return ExitBlock
	}
	return a.code
}

// answer is what Run writes.
type answer struct {
	out    []byte // the host's JSON, with a trailing newline
	code   int
	reason string // for stderr, when code is not 0
}

// Refuse answers a hook that could not even be set up (a bad flag, a
// policy that does not load, a store that does not open): a deny in the
// host's format on stdout, the reason on stderr. It returns ExitBlock.
func Refuse(host Host, stdout, stderr io.Writer, why string) int {
	a := failure(host, nil, why)
	fmt.Fprintln(stderr, a.reason)
	if _, err := stdout.Write(a.out); err != nil {
		return ExitBlock
	}
	return a.code
}

func failure(host Host, ev *Event, why string) answer {
	reason := "Portcullis denied this call: " + why
	return answer{out: encode(host.answer(ev, Verdict{Behavior: Deny, Reason: reason})), code: ExitBlock, reason: reason}
}

func encode(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// The answers are structs of strings and booleans: this cannot happen.
		return []byte(`{"decision":"deny"}` + "\n")
	}
	return b.Bytes()
}

func (h *Handler) handle(ctx context.Context, host Host, stdin io.Reader) answer {
	data, err := io.ReadAll(io.LimitReader(stdin, MaxInputBytes+1))
	if err != nil {
		return failure(host, nil, "read the hook event: "+err.Error())
	}
	if len(data) > MaxInputBytes {
		return failure(host, nil, fmt.Sprintf("the hook event is larger than %d bytes", MaxInputBytes))
	}
	ev, err := host.parse(data)
	if err != nil {
		return failure(host, ev, "malformed hook event: "+err.Error())
	}
	v, err := h.Decide(ctx, host, ev)
	if err != nil {
		h.log.Error("hook: decide", "host", host.Name(), "tool", ev.ToolName, "err", err)
		return failure(host, ev, err.Error())
	}
	return answer{out: encode(host.answer(ev, v))}
}

// Decide decides a parsed event: every call its tool use makes (one, or
// one per file of a multi-file patch), the strictest verdict winning. An
// error means it could not be decided: the caller denies.
func (h *Handler) Decide(ctx context.Context, host Host, ev *Event) (Verdict, error) {
	acts, err := host.actions(ev)
	if err != nil {
		return Verdict{}, err
	}
	if len(acts) == 0 {
		// Nothing decided is nothing allowed.
		return Verdict{}, fmt.Errorf("%s: no call to decide", ev.ToolName)
	}
	conv := h.conversation(host, ev)
	agent := h.opts.Agent
	if agent == "" {
		agent = host.Name()
	}
	var worst Verdict
	for i, a := range acts {
		if ok, why := h.deferred(a); ok {
			v := deferredVerdict(a)
			if i == 0 || v.Behavior.stricter(worst.Behavior) {
				worst = v
			}
			continue
		} else if why != "" {
			h.log.Warn("hook: MCP server not deferred to its wrapper: the call is decided here", "tool", a.hostTool, "why", why)
		}
		c := h.tools.call(a)
		c.Session = ev.SessionID
		if ev.SessionID != "" || ev.ToolUseID != "" {
			// The host's own names of the call, so that its rows join
			// the rows of the same session's MCP calls.
			c.Client = &portcullis.ClientRef{Session: ev.SessionID, ToolUseID: ev.ToolUseID}
		}
		c.Agent = agent
		c.UserPresent = ev.UserPresent
		c.Conversation = conv
		// Read from the host's own event and transcript, not stated by
		// the agent. Through a gateway the decision API marks it as the
		// hook's agent's word, trusted only when the policy lists it.
		c.ContextSource = portcullis.ContextHost
		// The host's working directory, from its event: writes outside it
		// may need more (a tool's outsideWorkdir).
		c.Workdir = ev.Cwd
		v, err := h.decideOne(ctx, host, ev, c)
		if err != nil {
			return Verdict{}, err
		}
		if i == 0 || v.Behavior.stricter(worst.Behavior) {
			worst = v
		}
		if worst.Behavior == Deny {
			break // the call is denied: ask nobody about the rest
		}
	}
	return worst, nil
}

func (h *Handler) decideOne(ctx context.Context, host Host, ev *Event, c portcullis.Call) (Verdict, error) {
	d, err := h.decide(ctx, c)
	if err != nil {
		return Verdict{}, err
	}
	if d.Outcome != portcullis.OutcomeConfirm {
		return verdictOf(&d, c.Tool), nil
	}
	if !h.opts.Hold || h.opts.Holder == nil || d.ChallengeID == "" {
		return host.confirm(ev, &d, c.Tool), nil
	}
	return h.hold(ctx, c, &d)
}

func (h *Handler) decide(ctx context.Context, c portcullis.Call) (portcullis.Decision, error) {
	dctx, cancel := context.WithTimeout(ctx, h.opts.Timeout)
	defer cancel()
	d, err := h.opts.Decider.Decide(dctx, c)
	if err != nil {
		return d, fmt.Errorf("decide %s: %w", c.Tool, err)
	}
	switch d.Outcome {
	case portcullis.OutcomeAllow, portcullis.OutcomeConfirm, portcullis.OutcomeDeny, portcullis.OutcomeStop:
		return d, nil
	}
	return d, fmt.Errorf("decide %s: unknown outcome %q", c.Tool, d.Outcome)
}

// hold waits for a person's answer to the decision's approval request
// (up to approvals.wait, at most MaxWait) and answers with the decision
// that then stands. No answer in time, a denial or an error is a deny.
func (h *Handler) hold(ctx context.Context, c portcullis.Call, d *portcullis.Decision) (Verdict, error) {
	wait := h.opts.MaxWait
	if h.opts.Policy != nil && h.opts.Policy.Approvals.Wait > 0 && h.opts.Policy.Approvals.Wait < wait {
		wait = h.opts.Policy.Approvals.Wait
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	d2, err := h.opts.Holder.Hold(wctx, c, *d)
	cancel()
	if err != nil {
		return Verdict{}, fmt.Errorf("wait for approval %s: %w", d.ChallengeID, err)
	}
	switch d2.Outcome {
	case portcullis.OutcomeAllow, portcullis.OutcomeDeny, portcullis.OutcomeStop:
		return verdictOf(&d2, c.Tool), nil
	case portcullis.OutcomeConfirm:
		if d2.DecisionID == d.DecisionID {
			return denied(fmt.Sprintf("%s needs a person's approval (approval %s), and nobody answered within %s. Tell the user; once they approve it, try again.", quoteTool(c.Tool), d.ChallengeID, wait)), nil
		}
		return denied(fmt.Sprintf("%s was approved (approval %s), but the approval does not cover this call: %s", quoteTool(c.Tool), d.ChallengeID, d2.Reason)), nil
	}
	return Verdict{}, fmt.Errorf("wait for approval %s: unknown outcome %q", d.ChallengeID, d2.Outcome)
}

// conversation reads the transcript for the validator and the retry
// guard: the newest messages within bounds when the policy's validator
// reads the conversation, otherwise only the user's latest message (what
// tells the retry guard that the user said something new).
func (h *Handler) conversation(host Host, ev *Event) []portcullis.Message {
	if ev.TranscriptPath == "" {
		return nil
	}
	contextual := h.opts.Policy != nil && h.opts.Policy.Validator != nil &&
		h.opts.Policy.Validator.Mode == string(portcullis.ValidateContextual)
	msgs, err := ReadTranscript(ev.TranscriptPath, host.transcript(), DefaultTranscriptBounds)
	if err != nil {
		// A missing or unreadable transcript leaves the validator without
		// context: it then judges on less, which only makes it stricter.
		h.log.Warn("hook: transcript not read", "path", ev.TranscriptPath, "err", err)
		return nil
	}
	if contextual {
		return msgs
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			return msgs[i : i+1]
		}
	}
	return nil
}

// Behavior is what a hook answers for a call.
type Behavior int

// The behaviors, from least to most strict.
const (
	Allow Behavior = iota
	Ask            // a person decides in the host's own prompt
	Deny
)

func (b Behavior) String() string {
	switch b {
	case Allow:
		return "allow"
	case Ask:
		return "ask"
	}
	return "deny"
}

func (b Behavior) stricter(than Behavior) bool { return b > than }

// Verdict is a hook's answer, before the host's format.
type Verdict struct {
	Behavior Behavior
	// Reason is shown to the agent (deny) or the person (ask).
	Reason string
	// Stop ends the agent's turn: a danger-zone block or a retry loop, after
	// which the agent must wait for the user.
	Stop bool
}

func denied(reason string) Verdict {
	return Verdict{Behavior: Deny, Reason: "Portcullis: " + reason}
}

// verdictOf maps a decision that is not a confirm.
func verdictOf(d *portcullis.Decision, tool string) Verdict {
	switch d.Outcome {
	case portcullis.OutcomeAllow:
		return Verdict{Behavior: Allow, Reason: "Portcullis: " + d.Reason}
	case portcullis.OutcomeStop:
		return Verdict{Behavior: Deny, Reason: reasonOf(d), Stop: true}
	case portcullis.OutcomeConfirm:
		// Only reached after a hold: a second confirm is not an answer.
		return denied(quoteTool(tool) + " still needs a person's approval: " + d.Reason)
	}
	return Verdict{Behavior: Deny, Reason: reasonOf(d)}
}

// reasonOf is a decision's reason for the agent: what was decided and what
// would authorize it. Decisions never carry a verification code.
func reasonOf(d *portcullis.Decision) string {
	var b strings.Builder
	b.WriteString("Portcullis: ")
	b.WriteString(d.Reason)
	if d.WhatWouldAuthorize != "" {
		b.WriteString(" (what would authorize it: ")
		b.WriteString(d.WhatWouldAuthorize)
		b.WriteString(")")
	}
	return b.String()
}

// askReason is the reason of a confirm answered in the host: the person
// reads it in the host's prompt.
func askReason(d *portcullis.Decision) string {
	r := "Portcullis: " + d.Reason
	if d.ChallengeID != "" {
		r += " (approval " + d.ChallengeID + ")"
	}
	return r
}

// pendingReason is the reason of a confirm denied by a host that cannot
// ask: the agent is told that a person must approve it out of band first.
func pendingReason(d *portcullis.Decision, tool string) string {
	r := "Portcullis: " + strings.TrimSuffix(d.Reason, ".") + ". "
	if d.ChallengeID != "" {
		return r + "Approval " + d.ChallengeID + " waits for a person (the Portcullis console, or `portcullis approve " + d.ChallengeID + "`). Tell the user; once they approve it, try " + quoteTool(tool) + " again with the same arguments."
	}
	return r + "It needs a person's approval, and this host cannot ask for it: tell the user."
}

func quoteTool(t string) string { return fmt.Sprintf("%q", t) }
