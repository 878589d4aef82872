package httpapi

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"unicode/utf8"

	"github.com/portcullis/portcullis"
)

// This file holds the people's endpoints: the human token only. Every
// action is audited with the actor (see ActorHeader).

// ApprovalList is the answer of GET /v1/approvals, newest first.
type ApprovalList struct {
	Approvals []portcullis.Approval `json:"approvals"`
}

// GrantList is the answer of GET /v1/grants, oldest first.
type GrantList struct {
	Grants []portcullis.Grant `json:"grants"`
}

// BlockList is the answer of GET /v1/blocks.
type BlockList struct {
	Blocks []portcullis.Block `json:"blocks"`
}

// ApproveRequest is the body of POST /v1/approvals/{id}/approve. An empty
// body approves once.
type ApproveRequest struct {
	// Session approves the tool for the rest of the call's session; only a
	// CONFIRM_SESSION call can be.
	Session bool `json:"session"`
}

// DenyRequest is the body of POST /v1/approvals/{id}/deny.
type DenyRequest struct {
	// Reason is shown to the agent.
	Reason string `json:"reason"`
}

// UnblockRequest is the body of POST /v1/blocks/{agent}/unblock.
type UnblockRequest struct {
	ChallengeID string `json:"challengeId"`
	Code        string `json:"code"`
}

// maxListLimit bounds ?limit= of the approvals list.
const maxListLimit = 1000

// approvals is GET /v1/approvals?status=&session=&agent=&decision=&limit=.
func (a *api) approvals(w http.ResponseWriter, r *http.Request, _ principal) {
	q := r.URL.Query()
	if err := onlyParams(q, "status", "session", "agent", "decision", "limit"); err != nil {
		writeError(w, http.StatusBadRequest, portcullis.CodeInvalidRequest, err.Error())
		return
	}
	f := portcullis.ApprovalFilter{Session: q.Get("session"), Agent: q.Get("agent"), DecisionID: q.Get("decision")}
	switch s := portcullis.ApprovalStatus(q.Get("status")); s {
	case "", "all":
	case portcullis.ApprovalPending, portcullis.ApprovalApproved, portcullis.ApprovalDenied, portcullis.ApprovalExpired:
		f.Status = s
	default:
		writeError(w, http.StatusBadRequest, portcullis.CodeInvalidRequest, "status: want pending, approved, denied, expired or all, got "+strconv.Quote(string(s)))
		return
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxListLimit {
			writeError(w, http.StatusBadRequest, portcullis.CodeInvalidRequest, "limit: want a number from 1 to "+strconv.Itoa(maxListLimit)+", got "+strconv.Quote(s))
			return
		}
		f.Limit = n
	}
	list, err := a.store.Approvals(r.Context(), f)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if list == nil {
		list = []portcullis.Approval{}
	}
	writeJSON(w, http.StatusOK, ApprovalList{Approvals: list})
}

// approval is GET /v1/approvals/{id}.
func (a *api) approval(w http.ResponseWriter, r *http.Request, _ principal) {
	ap, err := a.store.Approval(r.Context(), r.PathValue("id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, ap)
}

// approve is POST /v1/approvals/{id}/approve: 200 with the approval; 409
// when someone answered first or it expired.
func (a *api) approve(w http.ResponseWriter, r *http.Request, p principal) {
	var req ApproveRequest
	if !decodeBody(w, r, &req) {
		return
	}
	ap, err := a.gate.Approve(r.Context(), r.PathValue("id"), p.actor, req.Session)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, ap)
}

// maxReason bounds a denial's reason.
const maxReason = 2000

// deny is POST /v1/approvals/{id}/deny: 200 with the approval; 409 when
// someone answered first or it expired.
func (a *api) deny(w http.ResponseWriter, r *http.Request, p principal) {
	var req DenyRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if len(req.Reason) > maxReason || !utf8.ValidString(req.Reason) {
		writeError(w, http.StatusBadRequest, portcullis.CodeInvalidRequest, "reason: want valid text of at most "+strconv.Itoa(maxReason)+" bytes")
		return
	}
	ap, err := a.gate.DenyApproval(r.Context(), r.PathValue("id"), p.actor, req.Reason)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, ap)
}

// blocks is GET /v1/blocks: the agents stopped in the danger zone. The
// challenge codes are not here: they were shown once, on a human channel.
func (a *api) blocks(w http.ResponseWriter, r *http.Request, _ principal) {
	if err := onlyParams(r.URL.Query()); err != nil {
		writeError(w, http.StatusBadRequest, portcullis.CodeInvalidRequest, err.Error())
		return
	}
	list, err := a.store.Blocks(r.Context())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if list == nil {
		list = []portcullis.Block{}
	}
	writeJSON(w, http.StatusOK, BlockList{Blocks: list})
}

// unblock is POST /v1/blocks/{agent}/unblock: 204 when the code cleared the
// block; 400 VERIFICATION_FAILED for a wrong or expired code, 429 after too
// many, 404 when the agent is not blocked.
func (a *api) unblock(w http.ResponseWriter, r *http.Request, p principal) {
	var req UnblockRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if req.ChallengeID == "" || req.Code == "" {
		writeError(w, http.StatusBadRequest, portcullis.CodeInvalidRequest, `want "challengeId" and "code" (the code shown on a human channel)`)
		return
	}
	agent := r.PathValue("agent")
	if err := a.gate.Unblock(r.Context(), agent, req.ChallengeID, req.Code); err != nil {
		a.fail(w, r, err)
		return
	}
	ev := portcullis.AuditEvent{
		Kind: portcullis.AuditUnblock, Time: a.clock.Now().UTC(), Agent: agent, Actor: p.actor,
		Detail: "cleared with challenge " + req.ChallengeID,
	}
	if _, err := a.store.AppendAudit(r.Context(), ev); err != nil {
		a.fail(w, r, errors.Join(errors.New("unblocked, but the audit row was not written"), err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// grants is GET /v1/grants?session=: the live grants.
func (a *api) grants(w http.ResponseWriter, r *http.Request, _ principal) {
	q := r.URL.Query()
	if err := onlyParams(q, "session"); err != nil {
		writeError(w, http.StatusBadRequest, portcullis.CodeInvalidRequest, err.Error())
		return
	}
	list, err := a.store.Grants(r.Context(), q.Get("session"), a.clock.Now())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if list == nil {
		list = []portcullis.Grant{}
	}
	writeJSON(w, http.StatusOK, GrantList{Grants: list})
}

// revokeGrant is DELETE /v1/grants/{id}: 204, or 404 when there is no such
// grant.
func (a *api) revokeGrant(w http.ResponseWriter, r *http.Request, p principal) {
	if err := a.gate.RevokeGrant(r.Context(), r.PathValue("id"), p.actor); err != nil {
		a.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// onlyParams refuses query parameters other than the named ones, so a
// misspelt filter is an error rather than a silently wider answer.
func onlyParams(q url.Values, names ...string) error {
outer:
	for k := range q {
		for _, n := range names {
			if k == n {
				continue outer
			}
		}
		return errors.New("unknown query parameter " + strconv.Quote(k))
	}
	return nil
}
