-- Bronze notice and checkpoints: a lease records the notice it is
-- guaranteed, when that notice was given, and the checkpoint its workload
-- last reported, so that a preempted job resumes where it stopped.

-- +goose Up
ALTER TABLE leases ADD COLUMN notice_seconds BIGINT NOT NULL DEFAULT 0;
ALTER TABLE leases ADD COLUMN notice_at BIGINT;
ALTER TABLE leases ADD COLUMN checkpoint_ref TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE leases DROP COLUMN checkpoint_ref;
ALTER TABLE leases DROP COLUMN notice_at;
ALTER TABLE leases DROP COLUMN notice_seconds;
