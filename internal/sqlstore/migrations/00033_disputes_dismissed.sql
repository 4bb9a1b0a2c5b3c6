-- +goose Up
-- A dismissed dispute no longer holds its lease's offence: the market may
-- still prove it, as an upheld dispute of its own. An open or upheld one
-- still does (one offence, one penalty).
DROP INDEX disputes_lease_offence;
CREATE UNIQUE INDEX disputes_lease_offence ON disputes (lease_id, offence) WHERE lease_id <> '' AND state <> 'dismissed';

-- +goose Down
DROP INDEX disputes_lease_offence;
CREATE UNIQUE INDEX disputes_lease_offence ON disputes (lease_id, offence) WHERE lease_id <> '';
