-- The decision API finds the approval request a decision made by the
-- decision's ID (GET /v1/decisions/{id}/wait).
CREATE INDEX approvals_decision ON approvals (decision_id);
