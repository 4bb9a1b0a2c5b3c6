-- What a node runs hardware challenges with (idlegrid.ChallengeRunner:
-- '', 'simulated' or 'cuda'), as its latest signature of a fingerprint
-- said; the coordinator sizes the node's challenges for it
-- (docs/trust.md). Older agents leave it ''.

-- +goose Up
ALTER TABLE attestations ADD COLUMN challenge_runner TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE attestations DROP COLUMN challenge_runner;
