-- The use of the policy's budgets (rate limits and spend caps): one row
-- per budget, key and fixed window. The dimensions a budget does not count
-- apart are ''. Amounts are in millionths. A take locks its rows (FOR
-- UPDATE, in one order) so two replicas cannot both take the last unit,
-- and deletes the ended windows of its own counters.
CREATE TABLE budget_use (
    budget       text COLLATE "C" NOT NULL,
    agent        text COLLATE "C" NOT NULL DEFAULT '',
    session      text COLLATE "C" NOT NULL DEFAULT '',
    tool         text COLLATE "C" NOT NULL DEFAULT '',
    window_start timestamptz NOT NULL,
    window_end   timestamptz NOT NULL,
    used         bigint NOT NULL DEFAULT 0 CHECK (used >= 0),
    lim          bigint NOT NULL,
    PRIMARY KEY (budget, agent, session, tool, window_start)
);
CREATE INDEX budget_use_end ON budget_use (window_end);
