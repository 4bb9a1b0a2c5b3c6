-- The trust lists page newest first by time, then ID (GET /v1/verifications,
-- /v1/nodes/{id}/challenges, /v1/quarantine?before=): an admin's pages,
-- which name no renter, provider or node, read these in order instead of
-- sorting every row for each page. A node's challenges and a provider's
-- quarantines already have an index by time.

-- +goose Up
CREATE INDEX verifications_created ON verifications (created_at, id);
CREATE INDEX challenges_issued ON challenges (issued_at, id);
CREATE INDEX quarantines_since ON quarantines (since, id);

-- +goose Down
DROP INDEX quarantines_since;
DROP INDEX challenges_issued;
DROP INDEX verifications_created;
