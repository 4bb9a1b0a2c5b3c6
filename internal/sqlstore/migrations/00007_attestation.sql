-- Hardware attestation (docs/trust.md): every fingerprint a node's key
-- signed (each distinct one once, the current one marked), the changes
-- between them, the hardware challenges with their outcomes, and the
-- quarantines with their evidence. A node's record says whether it is
-- quarantined, so that the scheduler reads it with the node.

-- +goose Up
ALTER TABLE nodes ADD COLUMN quarantined BOOLEAN NOT NULL DEFAULT FALSE;

CREATE TABLE attestations (
	node_id        TEXT NOT NULL REFERENCES nodes (id),
	hash           TEXT NOT NULL, -- hex SHA-256 of the canonical fingerprint
	fingerprint    TEXT NOT NULL, -- JSON
	signed_at      BIGINT NOT NULL, -- unix microseconds, as signed (milliseconds)
	signature      TEXT NOT NULL, -- the latest signature of this fingerprint
	first_received BIGINT NOT NULL,
	received_at    BIGINT NOT NULL, -- when it was last presented
	is_current     BOOLEAN NOT NULL,
	PRIMARY KEY (node_id, hash)
);
CREATE INDEX attestations_received ON attestations (node_id, received_at);

CREATE TABLE hardware_changes (
	id           TEXT PRIMARY KEY,
	node_id      TEXT NOT NULL REFERENCES nodes (id),
	kind         TEXT NOT NULL,
	gpu_uuid     TEXT NOT NULL,
	before_value TEXT NOT NULL,
	after_value  TEXT NOT NULL,
	from_hash    TEXT NOT NULL,
	to_hash      TEXT NOT NULL,
	at           BIGINT NOT NULL
);
CREATE INDEX hardware_changes_node ON hardware_changes (node_id, at);

CREATE TABLE challenges (
	id          TEXT PRIMARY KEY,
	node_id     TEXT NOT NULL REFERENCES nodes (id),
	gpu_uuid    TEXT NOT NULL,
	model       TEXT NOT NULL,
	vram_mb     BIGINT NOT NULL,
	seed        TEXT NOT NULL,
	size        BIGINT NOT NULL,
	reason      TEXT NOT NULL,
	state       TEXT NOT NULL, -- issued, passed, failed, expired, unsupported
	min_nanos  BIGINT NOT NULL,
	max_nanos  BIGINT NOT NULL,
	issued_at   BIGINT NOT NULL,
	deadline    BIGINT NOT NULL,
	answer      TEXT NOT NULL, -- JSON without the row hashes; '' before the answer
	findings    TEXT NOT NULL, -- JSON list of strings
	resolved_at BIGINT
);
CREATE INDEX challenges_node ON challenges (node_id, issued_at);
CREATE INDEX challenges_state ON challenges (state, deadline);

CREATE TABLE quarantines (
	id          TEXT PRIMARY KEY,
	node_id     TEXT NOT NULL REFERENCES nodes (id),
	provider_id TEXT NOT NULL REFERENCES accounts (id),
	reason      TEXT NOT NULL,
	evidence    TEXT NOT NULL, -- JSON
	since       BIGINT NOT NULL,
	lifted_at   BIGINT,
	lifted_by   TEXT NOT NULL,
	lift_note   TEXT NOT NULL
);
CREATE UNIQUE INDEX quarantines_in_force ON quarantines (node_id) WHERE lifted_at IS NULL;
CREATE INDEX quarantines_provider ON quarantines (provider_id, since);

-- +goose Down
DROP TABLE quarantines;
DROP TABLE challenges;
DROP TABLE hardware_changes;
DROP TABLE attestations;
ALTER TABLE nodes DROP COLUMN quarantined;
