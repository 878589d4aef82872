-- Portcullis state, version 1. Every table lives in the store's schema (the
-- connection's search_path); times are timestamptz with microsecond
-- precision; a NULL time means "never" (no expiry, not decided). Keys that
-- lists are ordered by use collation "C": byte order, as Go sorts strings.

CREATE TABLE grants (
    id           text COLLATE "C" PRIMARY KEY,
    kind         text NOT NULL CHECK (kind IN ('session', 'single')),
    tool         text NOT NULL,
    element_type text NOT NULL DEFAULT '',
    session      text NOT NULL DEFAULT '',
    args_digest  text NOT NULL DEFAULT '',
    granted_by   text NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL,
    expires_at   timestamptz
);
-- UseGrant: a session's grants for a tool, single-use ones by digest, oldest first.
CREATE INDEX grants_use ON grants (session, tool, kind, args_digest, created_at, id);
CREATE INDEX grants_created ON grants (created_at, id);

CREATE TABLE approvals (
    id          text COLLATE "C" PRIMARY KEY,
    decision_id text NOT NULL DEFAULT '',
    status      text NOT NULL CHECK (status IN ('pending', 'approved', 'denied')),
    call        json NOT NULL,
    session     text NOT NULL DEFAULT '',
    agent       text NOT NULL DEFAULT '',
    tool        text NOT NULL DEFAULT '',
    args_digest text NOT NULL DEFAULT '',
    level       smallint NOT NULL,
    reason      text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL,
    expires_at  timestamptz,
    decided_by  text NOT NULL DEFAULT '',
    decided_at  timestamptz,
    deny_reason text NOT NULL DEFAULT ''
);
CREATE INDEX approvals_created ON approvals (created_at DESC, id DESC);
CREATE INDEX approvals_pending ON approvals (created_at DESC, id DESC) WHERE status = 'pending';
CREATE INDEX approvals_session ON approvals (session, created_at DESC);
CREATE INDEX approvals_agent ON approvals (agent, created_at DESC);

CREATE TABLE blocks (
    agent        text COLLATE "C" PRIMARY KEY,
    reason       text NOT NULL DEFAULT '',
    challenge_id text NOT NULL DEFAULT '',
    decision_id  text NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL
);

CREATE TABLE challenges (
    id         text PRIMARY KEY,
    agent      text NOT NULL DEFAULT '',
    salt       text NOT NULL DEFAULT '',
    code_hash  text NOT NULL DEFAULT '',
    reason     text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL,
    expires_at timestamptz
);

-- One row per agent with failures: AddFailedAttempt locks it, so concurrent
-- failures of one agent are counted one after the other.
CREATE TABLE failure_agents (
    agent text PRIMARY KEY
);
CREATE TABLE failed_attempts (
    id    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    agent text NOT NULL,
    at    timestamptz NOT NULL
);
CREATE INDEX failed_attempts_agent ON failed_attempts (agent, at);

CREATE TABLE runs (
    run_id          text PRIMARY KEY,
    agent           text NOT NULL DEFAULT '',
    steps           integer NOT NULL,
    last_outcome    text NOT NULL DEFAULT '',
    updated_at      timestamptz NOT NULL,
    -- updated_at as it was before the latest step, for RecordStep's answer.
    prev_updated_at timestamptz
);

CREATE TABLE denials (
    run_id    text NOT NULL,
    signature text NOT NULL,
    count     integer NOT NULL,
    last_at   timestamptz NOT NULL,
    PRIMARY KEY (run_id, signature)
);

CREATE TABLE tool_pins (
    upstream           text COLLATE "C" NOT NULL,
    tool               text COLLATE "C" NOT NULL,
    hash               text NOT NULL,
    definition         json NOT NULL,
    pending_hash       text NOT NULL DEFAULT '',
    pending_definition json,
    first_seen         timestamptz NOT NULL,
    updated_at         timestamptz NOT NULL,
    accepted_by        text NOT NULL DEFAULT '',
    PRIMARY KEY (upstream, tool)
);

-- The audit log. body is the event's canonical JSON exactly as hashed; the
-- other columns are copies for queries.
CREATE TABLE audit (
    seq         bigint PRIMARY KEY,
    time        timestamptz NOT NULL,
    kind        text NOT NULL,
    decision_id text NOT NULL DEFAULT '',
    session     text NOT NULL DEFAULT '',
    agent       text NOT NULL DEFAULT '',
    tool        text NOT NULL DEFAULT '',
    outcome     text NOT NULL DEFAULT '',
    body        bytea NOT NULL,
    prev_hash   text NOT NULL,
    hash        text NOT NULL
);
CREATE INDEX audit_session ON audit (session, seq);
CREATE INDEX audit_agent ON audit (agent, seq);
CREATE INDEX audit_tool ON audit (tool, seq);
CREATE INDEX audit_time ON audit (time);

-- The head of the chain: the last appended row's seq and hash. Every append
-- locks this one row, so appends from every replica form one chain. It
-- stays when the rows are pruned.
CREATE TABLE audit_head (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    seq      bigint NOT NULL,
    hash     text NOT NULL
);
INSERT INTO audit_head (seq, hash)
VALUES (0, 'sha256:0000000000000000000000000000000000000000000000000000000000000000');

-- The checkpoint that stands for the pruned prefix of the log.
CREATE TABLE audit_checkpoint (
    only_row  boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    seq       bigint NOT NULL,
    hash      text NOT NULL,
    time      timestamptz NOT NULL,
    signature text NOT NULL
);
