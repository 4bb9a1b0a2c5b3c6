-- +goose Up
-- A dismissed dispute no longer holds its lease's offence: the market may
-- still prove it, as an upheld dispute of its own. An open or upheld one
-- still does (one offence, one penalty).
DROP INDEX disputes_lease_offence;
CREATE UNIQUE INDEX disputes_lease_offence ON disputes (lease_id, offence) WHERE lease_id <> '' AND state <> 'dismissed';

-- +goose Down
-- One way: once a lease has a dismissed dispute and an upheld one for the
-- same offence, the old index cannot be built again without losing one of
-- them, so going down keeps this index.
SELECT 1;
