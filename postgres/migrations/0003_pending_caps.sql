-- The per-agent and per-session caps on pending approval requests count
-- an agent's pending requests on every call that needs a person.
CREATE INDEX approvals_agent_pending ON approvals (agent, session) WHERE status = 'pending';

-- The caps that refused a request since the agent (or its session) was
-- last under them: the first refusal inserts the row and tells a person;
-- a request recorded for the agent and session deletes it. scope is
-- 'agent' (session empty) or 'session'.
CREATE TABLE approval_refusals (
    scope      text NOT NULL CHECK (scope IN ('agent', 'session')),
    agent      text COLLATE "C" NOT NULL,
    session    text COLLATE "C" NOT NULL DEFAULT '',
    refused_at timestamptz NOT NULL,
    PRIMARY KEY (scope, agent, session)
);
