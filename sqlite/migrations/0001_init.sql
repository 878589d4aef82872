-- Schema 1: every table of the Store. Times are INTEGER Unix nanoseconds in
-- UTC (0 for "no time"), so they round-trip exactly.

CREATE TABLE grants (
	id           TEXT PRIMARY KEY,
	kind         TEXT NOT NULL CHECK (kind IN ('session', 'single')),
	tool         TEXT NOT NULL,
	element_type TEXT NOT NULL DEFAULT '',
	session      TEXT NOT NULL DEFAULT '',
	args_digest  TEXT NOT NULL DEFAULT '',
	granted_by   TEXT NOT NULL DEFAULT '',
	created_at   INTEGER NOT NULL,
	expires_at   INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX grants_session_tool ON grants (session, tool);
CREATE INDEX grants_created ON grants (created_at, id);

CREATE TABLE approvals (
	id          TEXT PRIMARY KEY,
	decision_id TEXT NOT NULL DEFAULT '',
	status      TEXT NOT NULL,
	session     TEXT NOT NULL DEFAULT '',
	agent       TEXT NOT NULL DEFAULT '',
	tool        TEXT NOT NULL DEFAULT '',
	args_digest TEXT NOT NULL DEFAULT '',
	level       TEXT NOT NULL DEFAULT '',
	reason      TEXT NOT NULL DEFAULT '',
	call        BLOB NOT NULL, -- the Call as JSON
	created_at  INTEGER NOT NULL,
	expires_at  INTEGER NOT NULL DEFAULT 0,
	decided_by  TEXT NOT NULL DEFAULT '',
	decided_at  INTEGER NOT NULL DEFAULT 0,
	deny_reason TEXT NOT NULL DEFAULT ''
);
CREATE INDEX approvals_created ON approvals (created_at, id);
CREATE INDEX approvals_status ON approvals (status, created_at);

CREATE TABLE blocks (
	agent        TEXT PRIMARY KEY,
	reason       TEXT NOT NULL DEFAULT '',
	challenge_id TEXT NOT NULL DEFAULT '',
	decision_id  TEXT NOT NULL DEFAULT '',
	created_at   INTEGER NOT NULL
);

CREATE TABLE challenges (
	id         TEXT PRIMARY KEY,
	agent      TEXT NOT NULL DEFAULT '',
	salt       TEXT NOT NULL,
	code_hash  TEXT NOT NULL,
	reason     TEXT NOT NULL DEFAULT '',
	created_at INTEGER NOT NULL,
	expires_at INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE failed_attempts (
	id    INTEGER PRIMARY KEY,
	agent TEXT NOT NULL,
	at    INTEGER NOT NULL
);
CREATE INDEX failed_attempts_agent ON failed_attempts (agent, at);

CREATE TABLE runs (
	run_id       TEXT PRIMARY KEY,
	agent        TEXT NOT NULL DEFAULT '',
	steps        INTEGER NOT NULL,
	last_outcome TEXT NOT NULL DEFAULT '',
	updated_at   INTEGER NOT NULL
);

CREATE TABLE denials (
	run_id     TEXT NOT NULL,
	signature  TEXT NOT NULL,
	count      INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	PRIMARY KEY (run_id, signature)
) WITHOUT ROWID;

CREATE TABLE tool_pins (
	upstream           TEXT NOT NULL,
	tool               TEXT NOT NULL,
	hash               TEXT NOT NULL,
	definition         BLOB NOT NULL,
	pending_hash       TEXT NOT NULL DEFAULT '',
	pending_definition BLOB,
	first_seen         INTEGER NOT NULL,
	updated_at         INTEGER NOT NULL,
	accepted_by        TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (upstream, tool)
) WITHOUT ROWID;

-- The audit log. body is the event's canonical JSON exactly as
-- portcullis.EncodeAuditBody produced it and as hash covers; the other
-- columns copy fields of the body for the queries' indexes.
CREATE TABLE audit (
	seq         INTEGER PRIMARY KEY,
	time        INTEGER NOT NULL,
	kind        TEXT NOT NULL,
	decision_id TEXT NOT NULL DEFAULT '',
	session     TEXT NOT NULL DEFAULT '',
	agent       TEXT NOT NULL DEFAULT '',
	tool        TEXT NOT NULL DEFAULT '',
	outcome     TEXT NOT NULL DEFAULT '',
	body        BLOB NOT NULL,
	prev_hash   TEXT NOT NULL,
	hash        TEXT NOT NULL
);
CREATE INDEX audit_session ON audit (session, seq);
CREATE INDEX audit_agent ON audit (agent, seq);
CREATE INDEX audit_tool ON audit (tool, seq);
CREATE INDEX audit_time ON audit (time);

-- The checkpoint of a pruned prefix of the audit log: at most one row.
CREATE TABLE audit_checkpoint (
	id        INTEGER PRIMARY KEY CHECK (id = 1),
	seq       INTEGER NOT NULL,
	hash      TEXT NOT NULL,
	time      INTEGER NOT NULL,
	signature TEXT NOT NULL
);

-- Changes to grants, approvals, blocks and pins, written in the same
-- transaction as the change, for Watch. Old rows are trimmed.
CREATE TABLE changes (
	id   INTEGER PRIMARY KEY AUTOINCREMENT,
	kind TEXT NOT NULL,
	ref  TEXT NOT NULL,
	time INTEGER NOT NULL
);
CREATE INDEX changes_time ON changes (time);
