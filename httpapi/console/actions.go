package console

import (
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/portcullis/portcullis"
)

// maxReasonLength bounds a denial's reason (it goes to the agent).
const maxReasonLength = 1000

// finish ends an action: a message for the next page, and a redirect
// (POST, redirect, GET) to the form's return path or def.
func (c *Console) finish(w http.ResponseWriter, r *http.Request, s *session, def, msg string) {
	c.setFlash(s, false, msg)
	http.Redirect(w, r, localPath(r.PostFormValue("return"), def), http.StatusSeeOther)
}

// approve approves a pending request once, or for the session. Only a
// CONFIRM_SESSION call can be approved for the session; the console
// refuses it for any other (the gate would too).
func (c *Console) approve(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	scope := r.PostFormValue("scope")
	if scope != "once" && scope != "session" {
		c.refuse(w, r, http.StatusBadRequest, "Approve once or for the session (scope once or session).")
		return
	}
	a, err := c.store.Approval(r.Context(), id)
	if err != nil {
		c.fail(w, r, "Approving", err)
		return
	}
	forSession := scope == "session"
	if forSession && a.Level != portcullis.ConfirmSession {
		c.log.Warn("console: session approval refused", "approval", id, "level", a.Level.String(), "by", s.actor())
		c.refuse(w, r, http.StatusBadRequest, fmt.Sprintf("Approval %s is for a %s call: it can be approved once, never for the whole session.", id, a.Level))
		return
	}
	a, err = c.gate.Approve(r.Context(), id, s.actor(), forSession)
	if err != nil {
		c.fail(w, r, "Approving", err)
		return
	}
	msg := fmt.Sprintf("Approved %s (%s) once.", a.Tool, a.ID)
	if forSession {
		msg = fmt.Sprintf("Approved %s for session %q.", a.Tool, a.Call.Session)
	}
	c.finish(w, r, s, "/approvals", msg)
}

// deny denies a pending request with the reason the agent will see.
func (c *Console) deny(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	if reason == "" {
		// As the CLI (portcullis deny --reason): the agent is told why.
		c.refuse(w, r, http.StatusBadRequest, "Denying needs a reason: the agent is shown it, so it can change course.")
		return
	}
	if utf8.RuneCountInString(reason) > maxReasonLength {
		c.refuse(w, r, http.StatusBadRequest, fmt.Sprintf("A reason has at most %d characters.", maxReasonLength))
		return
	}
	a, err := c.gate.DenyApproval(r.Context(), id, s.actor(), reason)
	if err != nil {
		c.fail(w, r, "Denying", err)
		return
	}
	c.mu.Lock()
	s.flash = &flash{Denied: true, Text: fmt.Sprintf("Denied %s (%s).", a.Tool, a.ID)}
	c.mu.Unlock()
	http.Redirect(w, r, localPath(r.PostFormValue("return"), "/approvals"), http.StatusSeeOther)
}

// unblock clears an agent's block with its challenge's code, and audits it
// with who did it.
func (c *Console) unblock(w http.ResponseWriter, r *http.Request, s *session) {
	agent := r.PostFormValue("agent")
	challenge := r.PostFormValue("challenge")
	code := strings.TrimSpace(r.PostFormValue("code"))
	if agent == "" || challenge == "" || code == "" {
		c.refuse(w, r, http.StatusBadRequest, "Unblocking needs the agent, its challenge and the code.")
		return
	}
	if err := c.gate.Unblock(r.Context(), agent, challenge, code); err != nil {
		c.fail(w, r, "Unblocking", err)
		return
	}
	c.notices.forget(challenge)
	c.log.Info("console: agent unblocked", "agent", agent, "challenge", challenge, "by", s.actor())
	ev := portcullis.AuditEvent{
		Kind: portcullis.AuditUnblock, Time: c.clock.Now().UTC(), Agent: agent, Actor: s.actor(),
		Detail: "cleared with challenge " + challenge,
	}
	if p := c.gate.Policy(); p != nil {
		ev.PolicyHash = p.Hash
	}
	if _, err := c.store.AppendAudit(r.Context(), ev); err != nil {
		c.fail(w, r, "Recording the unblock in the audit log (the agent is unblocked)", err)
		return
	}
	c.finish(w, r, s, "/blocks", fmt.Sprintf("Unblocked %s.", agent))
}

// reissue replaces a blocked agent's challenge: its new code reaches the
// gate's notifier, and so this console when it is (part of) it.
func (c *Console) reissue(w http.ResponseWriter, r *http.Request, s *session) {
	agent := r.PostFormValue("agent")
	if agent == "" {
		c.refuse(w, r, http.StatusBadRequest, "Name the agent whose code to replace.")
		return
	}
	id, err := c.gate.ReissueChallenge(r.Context(), agent)
	if err != nil {
		c.fail(w, r, "Issuing a new code", err)
		return
	}
	c.log.Info("console: challenge reissued", "agent", agent, "challenge", id, "by", s.actor())
	msg := fmt.Sprintf("Issued a new code for %s; it is shown below.", agent)
	if _, ok, _ := c.notices.code(id); !ok {
		msg = fmt.Sprintf("Issued a new challenge for %s (%s); its code went to the gateway's other human channels (its terminal, notifications).", agent, id)
	}
	c.finish(w, r, s, "/blocks", msg)
}

// revoke revokes a grant.
func (c *Console) revoke(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	if err := c.gate.RevokeGrant(r.Context(), id, s.actor()); err != nil {
		c.fail(w, r, "Revoking", err)
		return
	}
	c.finish(w, r, s, "/grants", fmt.Sprintf("Revoked grant %s.", id))
}

// acceptTool accepts a tool's changed definition.
func (c *Console) acceptTool(w http.ResponseWriter, r *http.Request, s *session) {
	upstream, tool := r.PostFormValue("upstream"), r.PostFormValue("tool")
	if tool == "" {
		c.refuse(w, r, http.StatusBadRequest, "Name the tool whose change to accept.")
		return
	}
	if _, err := c.gate.AcceptTool(r.Context(), upstream, tool, s.actor()); err != nil {
		c.fail(w, r, "Accepting the change", err)
		return
	}
	c.finish(w, r, s, "/tools", fmt.Sprintf("Accepted the new definition of %s (upstream %s).", tool, upstream))
}
