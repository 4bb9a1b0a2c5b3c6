-- The latest start at which a lease still ends before what follows on
-- its node (its window's close, or another job's reservation of it) and
-- its job's deadline, in
-- microseconds since the epoch as the other times; NULL when nothing
-- follows. The reaper takes back such a lease its node has not started by
-- then.

-- +goose Up
ALTER TABLE leases ADD COLUMN start_by BIGINT;

-- +goose Down
ALTER TABLE leases DROP COLUMN start_by;
