-- The renter's Idempotency-Key of a job's submission (idlegrid.Job.
-- IdempotencyKey); '' when it was submitted without one. A renter's key
-- names one job: a submission sent again with it finds that job instead
-- of making another.

-- +goose Up
ALTER TABLE jobs ADD COLUMN idempotency_key TEXT NOT NULL DEFAULT '';
CREATE UNIQUE INDEX jobs_idempotency_key ON jobs (renter_id, idempotency_key) WHERE idempotency_key <> '';

-- +goose Down
DROP INDEX jobs_idempotency_key;
ALTER TABLE jobs DROP COLUMN idempotency_key;
