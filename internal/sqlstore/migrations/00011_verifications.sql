-- Verification of work: a verifiable lease re-run on another provider's
-- node, and a tie-break on a third when the output digests differ. The
-- runs are kept whole in body (JSON idlegrid.Verification); the columns
-- are what lookups need.

-- +goose Up
CREATE TABLE verifications (
	id                TEXT PRIMARY KEY,
	renter_id         TEXT NOT NULL REFERENCES accounts (id),
	state             TEXT NOT NULL,
	original_lease_id TEXT NOT NULL UNIQUE,
	original_provider TEXT NOT NULL,
	rerun_job_id      TEXT NOT NULL,
	rerun_provider    TEXT NOT NULL,
	tiebreak_job_id   TEXT NOT NULL,
	tiebreak_provider TEXT NOT NULL,
	body              TEXT NOT NULL,
	created_at        BIGINT NOT NULL,
	updated_at        BIGINT NOT NULL
);
CREATE INDEX verifications_rerun_job_id ON verifications (rerun_job_id);
CREATE INDEX verifications_tiebreak_job_id ON verifications (tiebreak_job_id);
CREATE INDEX verifications_renter_id ON verifications (renter_id, created_at);

-- +goose Down
DROP TABLE verifications;
