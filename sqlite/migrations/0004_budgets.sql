-- The use of the policy's budgets (rate limits and spend caps): one row
-- per budget, key and fixed window. The dimensions a budget does not count
-- apart are ''. Amounts are in millionths. A take deletes the ended
-- windows of its own counters, so rows do not pile up.
CREATE TABLE budget_use (
	budget       TEXT NOT NULL,
	agent        TEXT NOT NULL DEFAULT '',
	session      TEXT NOT NULL DEFAULT '',
	tool         TEXT NOT NULL DEFAULT '',
	window_start INTEGER NOT NULL,
	window_end   INTEGER NOT NULL,
	used         INTEGER NOT NULL DEFAULT 0 CHECK (used >= 0),
	lim          INTEGER NOT NULL,
	PRIMARY KEY (budget, agent, session, tool, window_start)
);
CREATE INDEX budget_use_end ON budget_use (window_end);
