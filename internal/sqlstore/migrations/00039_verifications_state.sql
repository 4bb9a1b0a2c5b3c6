-- The verifications still deciding, which the reaper reads at every pass
-- to close those whose run can no longer happen (the server's
-- closeStalledVerifications), and a bond's release looks for: by state,
-- rather than a scan of every verification ever made.

-- +goose Up
CREATE INDEX verifications_state ON verifications (state);

-- +goose Down
DROP INDEX verifications_state;
