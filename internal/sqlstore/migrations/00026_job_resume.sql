-- The run a requeued job's checkpoint already holds (idlegrid.Job.
-- ResumeSeconds), in seconds: how long its leases ran up to the
-- checkpoint it resumes from. 0 for a job that has none.

-- +goose Up
ALTER TABLE jobs ADD COLUMN resume_seconds BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE jobs DROP COLUMN resume_seconds;
