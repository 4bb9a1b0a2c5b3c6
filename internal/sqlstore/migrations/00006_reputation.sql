-- Reputation (docs/trust.md): each node's and provider's standing, the
-- evidence it rests on per kind of fact with the time it was decayed to,
-- the facts themselves (each stored once, under its key), and every
-- promotion and demotion with its reasons. A node's level is kept on its
-- record, beside the reliability the engine ranks it by.

-- +goose Up
ALTER TABLE nodes ADD COLUMN level BIGINT NOT NULL DEFAULT 0;

CREATE TABLE reputations (
	subject            TEXT NOT NULL, -- node or provider
	subject_id         TEXT NOT NULL,
	provider_id        TEXT NOT NULL REFERENCES accounts (id),
	score              DOUBLE PRECISION NOT NULL,
	level              BIGINT NOT NULL,
	level_name         TEXT NOT NULL,
	gpu_seconds_served BIGINT NOT NULL,
	uptime_through     BIGINT,        -- unix microseconds
	version            BIGINT NOT NULL,
	updated_at         BIGINT NOT NULL,
	PRIMARY KEY (subject, subject_id)
);
CREATE INDEX reputations_provider_id ON reputations (provider_id, subject);

CREATE TABLE reputation_counts (
	subject    TEXT NOT NULL,
	subject_id TEXT NOT NULL,
	dimension  TEXT NOT NULL, -- leases, uptime, notices, receipts, challenges
	good       DOUBLE PRECISION NOT NULL,
	bad        DOUBLE PRECISION NOT NULL,
	decayed_to BIGINT NOT NULL, -- the counts are as of this time
	PRIMARY KEY (subject, subject_id, dimension),
	FOREIGN KEY (subject, subject_id) REFERENCES reputations (subject, subject_id)
);

CREATE TABLE reputation_facts (
	fact_key         TEXT PRIMARY KEY,
	node_id          TEXT NOT NULL REFERENCES nodes (id),
	kind             TEXT NOT NULL,
	at               BIGINT NOT NULL,
	count            BIGINT NOT NULL,
	promised_seconds BIGINT NOT NULL,
	online_seconds   BIGINT NOT NULL,
	source           TEXT NOT NULL
);
CREATE INDEX reputation_facts_node_id ON reputation_facts (node_id, at);

CREATE TABLE level_changes (
	id         TEXT PRIMARY KEY,
	subject    TEXT NOT NULL,
	subject_id TEXT NOT NULL,
	from_level BIGINT NOT NULL,
	to_level   BIGINT NOT NULL,
	from_name  TEXT NOT NULL,
	to_name    TEXT NOT NULL,
	reasons    TEXT NOT NULL, -- JSON list of strings
	at         BIGINT NOT NULL
);
CREATE INDEX level_changes_subject ON level_changes (subject, subject_id, at);

-- +goose Down
DROP TABLE level_changes;
DROP TABLE reputation_facts;
DROP TABLE reputation_counts;
DROP TABLE reputations;
ALTER TABLE nodes DROP COLUMN level;
