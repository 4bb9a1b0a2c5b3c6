-- The latest start of a gold or silver lease that took GPUs another job's
-- reservation of its node will need (EASY backfill), in microseconds
-- since the epoch as the other times; NULL for every other lease. The
-- reaper takes back such a lease its node has not started by then.

-- +goose Up
ALTER TABLE leases ADD COLUMN start_by BIGINT;

-- +goose Down
ALTER TABLE leases DROP COLUMN start_by;
