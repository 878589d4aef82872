-- Schema 5: the audit log's lookups by session, agent, tool and time move
-- from indexes on the audit table, which every append updated (a WAL page
-- per session per commit), to tables of (key, seq) that the writer fills
-- in sorted batches. audit_indexed.seq is the watermark: the index tables
-- hold exactly the rows with seq <= it, and are written in the same
-- transaction as it. Rows after it (at most auditIndexBatch, in audit.go)
-- are found by a scan of the table's end.
CREATE TABLE audit_by_session (
	session TEXT NOT NULL,
	seq     INTEGER NOT NULL,
	PRIMARY KEY (session, seq)
) WITHOUT ROWID;
CREATE TABLE audit_by_agent (
	agent TEXT NOT NULL,
	seq   INTEGER NOT NULL,
	PRIMARY KEY (agent, seq)
) WITHOUT ROWID;
CREATE TABLE audit_by_tool (
	tool TEXT NOT NULL,
	seq  INTEGER NOT NULL,
	PRIMARY KEY (tool, seq)
) WITHOUT ROWID;
CREATE TABLE audit_by_time (
	time INTEGER NOT NULL,
	seq  INTEGER NOT NULL,
	PRIMARY KEY (time, seq)
) WITHOUT ROWID;
CREATE TABLE audit_indexed (
	id  INTEGER PRIMARY KEY CHECK (id = 1),
	seq INTEGER NOT NULL
);

INSERT INTO audit_by_session (session, seq) SELECT session, seq FROM audit ORDER BY session, seq;
INSERT INTO audit_by_agent (agent, seq) SELECT agent, seq FROM audit ORDER BY agent, seq;
INSERT INTO audit_by_tool (tool, seq) SELECT tool, seq FROM audit ORDER BY tool, seq;
INSERT INTO audit_by_time (time, seq) SELECT time, seq FROM audit ORDER BY time, seq;
INSERT INTO audit_indexed (id, seq) VALUES (1, coalesce((SELECT max(seq) FROM audit), 0));

DROP INDEX audit_session;
DROP INDEX audit_agent;
DROP INDEX audit_tool;
DROP INDEX audit_time;
