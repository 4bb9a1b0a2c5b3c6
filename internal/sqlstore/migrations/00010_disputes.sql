-- Disputes: an offence a provider is charged with, its evidence, and the
-- penalty taken from its bond when upheld (transfer_id names the ledger
-- transfer that took it, posted in the same transaction).

-- +goose Up
CREATE TABLE disputes (
	id             TEXT PRIMARY KEY,
	offence        TEXT NOT NULL,
	state          TEXT NOT NULL,
	provider_id    TEXT NOT NULL REFERENCES accounts (id),
	node_id        TEXT NOT NULL,
	lease_id       TEXT NOT NULL,
	renter_id      TEXT NOT NULL,
	evidence       TEXT NOT NULL,
	detail         TEXT NOT NULL,
	harm_micros    BIGINT NOT NULL,
	penalty_micros BIGINT NOT NULL,
	penalty_to     TEXT NOT NULL,
	transfer_id    TEXT NOT NULL,
	resolution     TEXT NOT NULL,
	resolved_by    TEXT NOT NULL,
	policy_sha256  TEXT NOT NULL,
	created_at     BIGINT NOT NULL,
	resolved_at    BIGINT
);
CREATE INDEX disputes_provider_id ON disputes (provider_id, created_at);
CREATE INDEX disputes_renter_id ON disputes (renter_id, created_at);
CREATE INDEX disputes_state ON disputes (state, created_at);
-- One dispute per offence per lease: a detector that runs twice finds the
-- one already open.
CREATE UNIQUE INDEX disputes_lease_offence ON disputes (lease_id, offence) WHERE lease_id <> '';

-- +goose Down
DROP TABLE disputes;
