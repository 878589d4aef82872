package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/portcullis/portcullis"
)

// This file holds the agent-facing endpoints. Nothing here may return a
// verification code or decide an approval: a Decision carries only the
// challenge's ID, and approvals are answered on the people's endpoints.

// decide is POST /v1/decide: the body is a decision request, the answer the
// Decision, whatever its outcome (200). A malformed request is a 400.
func (a *api) decide(w http.ResponseWriter, r *http.Request, p principal) {
	b, ok := readBody(w, r, portcullis.MaxRequestBytes)
	if !ok {
		return
	}
	c, err := portcullis.DecodeCall(b)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if c.Agent != "" && c.Agent != p.agent {
		a.log.Warn("httpapi: a request named another agent; the token's agent is used", "severity", "HIGH", "type", "AGENT_SPOOF", "token_agent", p.agent, "body_agent", c.Agent)
	}
	asAgent(&c, p.agent)
	d, err := a.gate.Decide(r.Context(), c)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// asAgent makes the call the agent's own: the token's identity, and none
// of the fields only a trusted caller may set (grants, the active set, run
// state other than the run's ID — so no trigger, and no migration bypass),
// whatever the gate's configuration. An agent cannot approve itself by
// sending a grant. The conversation and userPresent it states are marked as
// its own word (ContextAgent): the validator does not take them for the
// user's, unless the policy trusts this agent to state them
// (validator.trustedContext).
func asAgent(c *portcullis.Call, agent string) {
	c.Agent = agent
	c.ContextSource = portcullis.ContextAgent
	c.Grants = nil
	c.ActiveElements = nil
	if c.Run != nil {
		c.Run = &portcullis.Run{ID: c.Run.ID}
	}
}

// outcomeRequest is the body of POST /v1/outcomes.
type outcomeRequest struct {
	RunID   string                 `json:"runId"`
	Outcome portcullis.StepOutcome `json:"outcome"`
}

// outcome is POST /v1/outcomes: how the latest step of one of the agent's
// autonomous runs ended. 204 when recorded; 404 for a run the agent does
// not have.
func (a *api) outcome(w http.ResponseWriter, r *http.Request, p principal) {
	var req outcomeRequest
	b, ok := readBody(w, r, maxSmallBody)
	if !ok {
		return
	}
	if err := decodeStrict(b, &req); err != nil {
		writeError(w, http.StatusBadRequest, portcullis.CodeInvalidRequest, err.Error())
		return
	}
	switch {
	case req.RunID == "":
		writeError(w, http.StatusBadRequest, portcullis.CodeInvalidRequest, `missing "runId"`)
		return
	case len(req.RunID) > 500:
		writeError(w, http.StatusBadRequest, portcullis.CodeInvalidRequest, "runId is longer than 500 characters")
		return
	}
	switch req.Outcome {
	case portcullis.StepSuccess, portcullis.StepFailure, portcullis.StepPartial:
	default:
		writeError(w, http.StatusBadRequest, portcullis.CodeInvalidRequest, `"outcome": want success, failure or partial, got `+strconv.Quote(string(req.Outcome)))
		return
	}
	run, found, err := a.store.RunState(r.Context(), req.RunID)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if !found || run.Agent != p.agent {
		// Another agent's run looks like no run at all.
		writeError(w, http.StatusNotFound, portcullis.CodeNotFound, "agent "+strconv.Quote(p.agent)+" has no run "+strconv.Quote(req.RunID)+" (a run starts with its first decided step)")
		return
	}
	if err := a.gate.RecordOutcome(r.Context(), req.RunID, req.Outcome); err != nil {
		a.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// Pending is the answer of GET /v1/decisions/{id}/wait (202) when no person
// has answered yet: wait again.
type Pending struct {
	DecisionID  string                    `json:"decisionId"`
	ChallengeID string                    `json:"challengeId"`
	Status      portcullis.ApprovalStatus `json:"status"`
	ExpiresAt   time.Time                 `json:"expiresAt,omitzero"`
}

// wait is GET /v1/decisions/{id}/wait?timeout=30s: it holds the request
// until a person answers the approval request a confirm decision made, at
// most the timeout (MaxWait). Approved: the call is decided again, which
// uses the grant the approval recorded, and the new Decision is the answer
// (200). Denied or expired: a deny Decision with the person's reason
// (200). Still pending: 202 with Pending.
func (a *api) wait(w http.ResponseWriter, r *http.Request, p principal) {
	timeout, err := waitTimeout(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, portcullis.CodeInvalidRequest, err.Error())
		return
	}
	id := r.PathValue("id")
	list, err := a.store.Approvals(r.Context(), portcullis.ApprovalFilter{DecisionID: id, Agent: p.agent, Limit: 1})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if len(list) == 0 || list[0].Call.Agent != p.agent {
		// Another agent's decision looks like no decision at all.
		writeError(w, http.StatusNotFound, portcullis.CodeNotFound, "agent "+strconv.Quote(p.agent)+" has no decision "+strconv.Quote(id)+" waiting for a person (only a confirm decision has one)")
		return
	}
	ap := list[0]
	if ap.Status == portcullis.ApprovalPending && timeout > 0 {
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		got, err := a.gate.AwaitApproval(ctx, ap.ID)
		cancel()
		switch {
		case r.Context().Err() != nil:
			return // the agent went away
		case err == nil:
			ap = got
		case !errors.Is(err, context.DeadlineExceeded):
			a.fail(w, r, err)
			return
		}
		// At the deadline the request is still pending, as last read.
	}
	switch ap.Status {
	case portcullis.ApprovalApproved:
		a.decideApproved(w, r, ap)
	case portcullis.ApprovalDenied:
		reason := "A person denied this call"
		if ap.DenyReason != "" {
			reason += ": " + ap.DenyReason
		}
		writeJSON(w, http.StatusOK, answered(ap, reason, "approval request "+ap.ID+" denied by a person",
			"a person approving the call; ask again only if the reason allows it"))
	case portcullis.ApprovalExpired:
		writeJSON(w, http.StatusOK, answered(ap, "No person answered before the approval request expired",
			"approval request "+ap.ID+" expired unanswered", "a person approving the call: decide it again to ask again"))
	default:
		writeJSON(w, http.StatusAccepted, Pending{DecisionID: ap.DecisionID, ChallengeID: ap.ID, Status: ap.Status, ExpiresAt: ap.ExpiresAt})
	}
}

// decideApproved decides an approved call again, so that it uses the
// approval's grant, unless the grant is already used or gone: then a 409
// rather than a new approval request the agent did not ask for.
func (a *api) decideApproved(w http.ResponseWriter, r *http.Request, ap portcullis.Approval) {
	q := portcullis.GrantQuery{
		Session: ap.Call.Session, Tool: ap.Tool, ElementType: ap.Call.ElementType,
		ArgsDigest: ap.ArgsDigest, Level: ap.Level, Now: a.clock.Now(),
	}
	grants, err := a.store.Grants(r.Context(), ap.Call.Session, q.Now)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	covered := false
	for i := range grants {
		if q.Covers(&grants[i]) {
			covered = true
			break
		}
	}
	if !covered {
		writeError(w, http.StatusConflict, portcullis.CodeConflict, "approval request "+ap.ID+" was approved, and its grant is already used or revoked: decide the call again to ask again")
		return
	}
	d, err := a.gate.Decide(r.Context(), ap.Call)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// answered is the deny Decision for an approval request a person denied,
// or that expired unanswered.
func answered(ap portcullis.Approval, reason, trace, authorize string) portcullis.Decision {
	return portcullis.Decision{
		DecisionID:         ap.DecisionID,
		Outcome:            portcullis.OutcomeDeny,
		PermissionLevel:    portcullis.Deny,
		Code:               portcullis.CodeConfirmationRequired,
		Reason:             reason,
		Source:             portcullis.SourceSessionGrant,
		ChallengeID:        ap.ID,
		WhatWouldAuthorize: authorize,
		Trace:              []portcullis.TraceEntry{{Stage: "confirmation", Result: trace, Level: portcullis.Deny, Decided: true}},
		Tool:               ap.Tool,
	}
}

// waitTimeout reads ?timeout= as a Go duration ("30s") or whole seconds
// ("30"); absent means DefaultWait, more than MaxWait means MaxWait, 0
// means answer at once.
func waitTimeout(r *http.Request) (time.Duration, error) {
	q := r.URL.Query()
	for k := range q {
		if k != "timeout" {
			return 0, errors.New("unknown query parameter " + strconv.Quote(k) + " (want timeout)")
		}
	}
	s := strings.TrimSpace(q.Get("timeout"))
	if s == "" {
		return DefaultWait, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		n, nerr := strconv.Atoi(s)
		if nerr != nil {
			return 0, errors.New("timeout: want a duration such as 30s, or whole seconds, got " + strconv.Quote(s))
		}
		d = time.Duration(min(n, int(MaxWait/time.Second))) * time.Second
	}
	if d < 0 {
		return 0, errors.New("timeout: " + strconv.Quote(s) + " is negative")
	}
	return min(d, MaxWait), nil
}
