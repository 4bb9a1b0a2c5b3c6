-- When a running lease's workload last saved a checkpoint, as its agent
-- reports in heartbeats, so that the engine, rebuilt from the store,
-- counts a preemption's lost work from there.

-- +goose Up
ALTER TABLE leases ADD COLUMN checkpoint_at BIGINT;

-- +goose Down
ALTER TABLE leases DROP COLUMN checkpoint_at;
